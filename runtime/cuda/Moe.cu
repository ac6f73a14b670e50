//===- Moe.cu - CUDA kernels: mixtures of experts ----------------------------===//
//
// moe_route, grouped_matmul and grouped_matmul_rhs_grad (cpu/Moe.cpp has the
// reference and the ABI). No CUDA kernel yet: the executor runs the CPU
// kernels on staged copies (its host fallback, counted in zrun's report).
//
//===----------------------------------------------------------------------===//
#include "cuda/KernelSupport.cuh"

namespace zrt::cuda {

bool supportsMoeRoute(const KernelCall &) { return false; }
bool supportsGroupedMatmul(const KernelCall &) { return false; }
bool supportsGroupedMatmulRhsGrad(const KernelCall &) { return false; }
Status launchMoeRoute(const KernelCall &, CudaContext &) {
  return errorf("moe_route has no CUDA kernel (the host fallback runs it)");
}
Status launchGroupedMatmul(const KernelCall &, CudaContext &) {
  return errorf("grouped_matmul has no CUDA kernel (the host fallback runs it)");
}
Status launchGroupedMatmulRhsGrad(const KernelCall &, CudaContext &) {
  return errorf("grouped_matmul_rhs_grad has no CUDA kernel (the host fallback runs it)");
}

} // namespace zrt::cuda
