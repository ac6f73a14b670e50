//===- KernelTable.cu - the CUDA kernels by id, and their context --------===//
//
// One entry per line of kernels/Kernels.def, in its order: whether the CUDA
// implementation takes a call (dtypes, ranks, generated code present) and
// its launcher. A call it does not take runs the CPU kernel on staged
// copies (the executor's host fallback). Also here: the scratch memory and
// error slot of the CudaContext every launcher receives.
//
//===----------------------------------------------------------------------===//
#include "cuda/KernelSupport.cuh"

namespace zrt {
namespace cuda {

bool supportsAttention(const KernelCall &c) { return hasAttentionKernel(false, c); }
bool supportsAttentionGrad(const KernelCall &c) { return hasAttentionKernel(true, c); }
Status launchAttention(const KernelCall &c, CudaContext &ctx) {
  ZRT_RETURN_IF_ERROR(zrt::launchAttention(false, c, ctx));
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}
Status launchAttentionGrad(const KernelCall &c, CudaContext &ctx) {
  ZRT_RETURN_IF_ERROR(zrt::launchAttention(true, c, ctx));
  ZRT_CUDA(cudaGetLastError());
  return Status::ok();
}

} // namespace cuda

namespace {
struct CudaKernelInfo {
  bool (*supports)(const KernelCall &);
  Status (*launch)(const KernelCall &, CudaContext &);
};
const CudaKernelInfo kCudaKernels[] = {
#define ZRT_KERNEL(Id, Name) {cuda::supports##Id, cuda::launch##Id},
#include "kernels/Kernels.def"
};
static_assert(sizeof(kCudaKernels) / sizeof(kCudaKernels[0]) == kNumKernels,
              "one CUDA entry per entry of Kernels.def");
} // namespace

bool hasCudaKernel(KernelId id, const KernelCall &call) {
  return kCudaKernels[(size_t)id].supports(call);
}

Status launchCudaKernel(KernelId id, const KernelCall &call, CudaContext &ctx) {
  return kCudaKernels[(size_t)id].launch(call, ctx);
}

Status CudaContext::reserve(size_t bytes) {
  if (bytes <= scratchBytes)
    return Status::ok();
  if (scratchLimit >= 0 && (int64_t)bytes > scratchLimit)
    return errorf("a kernel needs ", bytes, " bytes of scratch, more than the ", scratchLimit,
                  " that --memory-budget leaves beside the arenas; raise the budget");
  ZRT_CUDA(cudaStreamSynchronize(stream));
  if (scratch)
    ZRT_CUDA(cudaFree(scratch));
  scratch = nullptr;
  scratchBytes = 0;
  ZRT_CUDA(cudaMalloc(&scratch, bytes));
  scratchBytes = bytes;
  return Status::ok();
}

bool hopperGpu() {
  int device = 0, major = 0, minor = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
         major == 9 && minor == 0;
}

std::string describeCudaError(const long long info[5]) {
  if (info[0] == 1)
    return errorf("label ", info[1], " at position ", info[2], " is out of range for ", info[3],
                  " classes (use ", info[4], " to ignore a position)")
        .message();
  if (info[0] == 2)
    return errorf("index ", info[1], " is out of range for a dimension of size ", info[3],
                  " (e.g. a token id >= the vocabulary size)")
        .message();
  if (info[0] == 3)
    return errorf("moe_route: token ", info[2], " chose expert ", info[1], ", outside the ",
                  info[3], " experts (the router's top-k indices must lie in [0, experts))")
        .message();
  if (info[0] == 4)
    return errorf("moe_route: ", info[1], " choices of this rank's experts, more than the ",
                  info[3], " rows a token choosing each expert once can need (token ", info[2],
                  " chose an expert twice)")
        .message();
  return info[0] ? "kernel error " + std::to_string(info[0]) : "";
}

} // namespace zrt
