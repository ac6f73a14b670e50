//===- Collectives.cu - device collectives of in-process ranks -----------===//
//
// W ranks of one process on one device (zrun --world-size W on one GPU) run
// their collectives as device kernels over every rank's buffer: rank-ordered
// float sums, the in-process group's arithmetic, so results are
// bit-identical to the CPU backend's (cuda/CudaExecutor.cu orders them with
// events the rank threads exchange). 16-bit buffers (--comm-dtype) are
// summed in float and rounded once, as the CPU group does. Between
// processes, NCCL (cuda/Nccl.cu).
//
//===----------------------------------------------------------------------===//
#include "cuda/DeviceFloat.h"
#include "cuda/KernelSupport.cuh"

namespace zrt {
namespace {

struct RankPointers {
  const void *p[kMaxDeviceRanks];
};

template <typename T>
__global__ void rankReduceKernel(RankPointers in, int world, int64_t begin, int64_t n, T *out,
                                 bool avg) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n;
       k += (int64_t)gridDim.x * blockDim.x) {
    float acc = 0.0f;
    for (int r = 0; r < world; ++r)
      acc = __fadd_rn(acc, toF(static_cast<const T *>(in.p[r])[begin + k]));
    out[k] = fromF<T>(avg ? __fdiv_rn(acc, (float)world) : acc);
  }
}

} // namespace

Status launchRankReduce(const void *const *inputs, int world, int64_t begin, int64_t n, void *out,
                        CommType type, bool avg, cudaStream_t stream) {
  if (world < 1 || world > kMaxDeviceRanks)
    return errorf("an in-process collective of ", world, " ranks (at most ", kMaxDeviceRanks,
                  " on one device)");
  if (n == 0)
    return Status::ok();
  RankPointers ptrs{};
  for (int r = 0; r < world; ++r)
    ptrs.p[r] = inputs[r];
  int blocks = cuda::blocksFor(n);
  switch (type) {
  case CommType::F32:
    rankReduceKernel<<<blocks, cuda::kThreads, 0, stream>>>(ptrs, world, begin, n, (float *)out,
                                                            avg);
    break;
  case CommType::BF16:
    rankReduceKernel<<<blocks, cuda::kThreads, 0, stream>>>(ptrs, world, begin, n,
                                                            (__nv_bfloat16 *)out, avg);
    break;
  case CommType::F16:
    rankReduceKernel<<<blocks, cuda::kThreads, 0, stream>>>(ptrs, world, begin, n, (__half *)out,
                                                            avg);
    break;
  case CommType::I8:
    return Status::error("int8 collectives only gather (the plan validator refuses others)");
  }
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

} // namespace zrt
