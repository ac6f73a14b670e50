//===- CublasLt.cpp - cuBLASLt, loaded when the CUDA backend first runs ---===//
//
// libcublasLt is ~500 MB: linked normally, every zrun start mapped it (0.38 s
// before main, and more address space than a small `ulimit -v` allows) even
// on the CPU backend. zrun links these definitions instead: each of the
// cuBLASLt functions the backend calls loads the library (dlopen) on first
// use and forwards to it. Without the library a call returns
// CUBLAS_STATUS_NOT_INITIALIZED and cublasLtLoadError() says why.
//
//===----------------------------------------------------------------------===//
#include "cuda/CublasLt.h"

#include <cublasLt.h>

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <string>

namespace {

struct Library {
  void *handle = nullptr;
  std::string error;
};

const Library &library() {
  static Library lib;
  static std::once_flag once;
  std::call_once(once, [] {
    // The loader's path first (LD_LIBRARY_PATH, ld.so.cache), then CUDA's
    // usual places.
    std::string why;
    std::string home = std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : "/usr/local/cuda";
    for (std::string name : {std::string("libcublasLt.so.13"), home + "/lib64/libcublasLt.so.13",
                             home + "/lib/libcublasLt.so.13", std::string("libcublasLt.so")}) {
      if ((lib.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)))
        return;
      if (why.empty())
        why = dlerror();
    }
    lib.error = "cannot load libcublasLt.so.13 (" + why +
                "); install CUDA 13's cuBLAS or put it on LD_LIBRARY_PATH";
  });
  return lib;
}

void *symbol(const char *name) {
  const Library &lib = library();
  return lib.handle ? dlsym(lib.handle, name) : nullptr;
}

} // namespace

const char *zrt::cublasLtLoadError() {
  const Library &lib = library();
  return lib.handle ? nullptr : lib.error.c_str();
}

// Each forwarder looks its function up once.
#define ZRT_FORWARD(name, ...)                                                                     \
  static auto f = reinterpret_cast<decltype(&name)>(symbol(#name));                                \
  return f ? f(__VA_ARGS__) : CUBLAS_STATUS_NOT_INITIALIZED

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) { ZRT_FORWARD(cublasLtCreate, handle); }

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) { ZRT_FORWARD(cublasLtDestroy, handle); }

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                              cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspaceBytes, cudaStream_t stream) {
  ZRT_FORWARD(cublasLtMatmul, handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc,
              algo, workspace, workspaceBytes, stream);
}

cublasStatus_t
cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                               cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                               cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                               cublasLtMatmulPreference_t preference, int requested,
                               cublasLtMatmulHeuristicResult_t results[], int *returned) {
  ZRT_FORWARD(cublasLtMatmulAlgoGetHeuristic, handle, desc, Adesc, Bdesc, Cdesc, Ddesc, preference,
              requested, results, returned);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  ZRT_FORWARD(cublasLtMatmulDescCreate, desc, compute, scale);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  ZRT_FORWARD(cublasLtMatmulDescDestroy, desc);
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t bytes) {
  ZRT_FORWARD(cublasLtMatmulDescSetAttribute, desc, attr, buf, bytes);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  ZRT_FORWARD(cublasLtMatmulPreferenceCreate, pref);
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  ZRT_FORWARD(cublasLtMatmulPreferenceDestroy, pref);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t bytes) {
  ZRT_FORWARD(cublasLtMatmulPreferenceSetAttribute, pref, attr, buf, bytes);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  ZRT_FORWARD(cublasLtMatrixLayoutCreate, layout, type, rows, cols, ld);
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  ZRT_FORWARD(cublasLtMatrixLayoutDestroy, layout);
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t bytes) {
  ZRT_FORWARD(cublasLtMatrixLayoutSetAttribute, layout, attr, buf, bytes);
}

} // extern "C"
