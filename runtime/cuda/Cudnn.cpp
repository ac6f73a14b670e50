//===- Cudnn.cpp - cuDNN, loaded when a convolution first runs -----------===//
#include "cuda/Cudnn.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

const zrt::CudnnApi &zrt::cudnnApi() {
  static CudnnApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string home = std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : "/usr/local/cuda";
    void *handle = nullptr;
    std::string why;
    for (std::string name : {std::string("libcudnn.so.9"), home + "/lib64/libcudnn.so.9",
                             home + "/lib/libcudnn.so.9", std::string("libcudnn.so")}) {
      if ((handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)))
        break;
      if (why.empty())
        why = dlerror();
    }
    if (!handle) {
      api.error = "cannot load libcudnn.so.9 (" + why +
                  "), which convolutions need on the GPU; install cuDNN 9 or put its lib folder "
                  "on LD_LIBRARY_PATH (PyTorch's pip packages hold one: nvidia/cudnn/lib)";
      return;
    }
#define ZRT_CUDNN_LOOKUP(name)                                                                     \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(handle, #name));                           \
  if (!api.name && api.error.empty())                                                              \
    api.error = "libcudnn.so.9 has no " #name " (cuDNN 9 is needed)";
    ZRT_CUDNN_FUNCTIONS(ZRT_CUDNN_LOOKUP)
#undef ZRT_CUDNN_LOOKUP
  });
  return api;
}
