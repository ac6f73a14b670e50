//===- CudaCheck.h - every CUDA call checked, with file and line -*- C++ -*-===//
#ifndef ZRT_CUDA_CUDACHECK_H
#define ZRT_CUDA_CUDACHECK_H

#include "support/Status.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace zrt {

inline Status cudaStatus(cudaError_t e, const char *what, const char *file, int line) {
  if (e == cudaSuccess)
    return Status::ok();
  return errorf(file, ":", line, ": ", what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e),
                ")");
}

inline Status cublasStatus(cublasStatus_t e, const char *what, const char *file, int line) {
  if (e == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return errorf(file, ":", line, ": ", what, ": cuBLAS status ", (int)e);
}

} // namespace zrt

#define ZRT_CUDA(expr) ZRT_RETURN_IF_ERROR(::zrt::cudaStatus((expr), #expr, __FILE__, __LINE__))
#define ZRT_CUBLAS(expr) ZRT_RETURN_IF_ERROR(::zrt::cublasStatus((expr), #expr, __FILE__, __LINE__))

#endif // ZRT_CUDA_CUDACHECK_H
