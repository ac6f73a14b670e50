//===- CpAsync.cuh - cp.async copies from global to shared memory -*- CUDA -*-===//
//
// Ampere's asynchronous copies (cp.async): a thread starts 16-byte copies,
// commits them as a group and later waits for all but the newest N groups.
// Shared by the attention kernels' tile loads and the norm backward's row
// pipeline.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_CPASYNC_CUH
#define ZRT_CUDA_CPASYNC_CUH

namespace zrt {

/// Starts copying 16 bytes from global to shared memory (cp.async; zeros
/// when !valid, |gmem| then not read), to be waited for with cpAsyncWait.
__device__ __forceinline__ void cpAsync16(void *smem, const void *gmem, bool valid) {
  unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
/// Waits until at most |N| of the committed groups are still in flight.
template <int N> __device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

} // namespace zrt

#endif // ZRT_CUDA_CPASYNC_CUH
