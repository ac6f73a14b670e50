//===- CublasLt.h - cuBLASLt, loaded on first use ----------------*- C++ -*-===//
//
// zrun does not link libcublasLt: cuda/CublasLt.cpp defines the cuBLASLt
// functions the backend calls, loading the library on first use.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_CUBLASLT_H
#define ZRT_CUDA_CUBLASLT_H

namespace zrt {

/// Null when libcublasLt is loaded (or loads now); otherwise why not.
const char *cublasLtLoadError();

} // namespace zrt

#endif // ZRT_CUDA_CUBLASLT_H
