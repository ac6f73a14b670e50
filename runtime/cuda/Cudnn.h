//===- Cudnn.h - cuDNN, loaded when a convolution first runs -----*- C++ -*-===//
//
// libcudnn (9.x) is loaded on first use (dlopen), as cuBLASLt and NCCL are:
// zrun starts without it, and only plans with convolutions need it. The
// functions the convolution kernels call (cuda/Conv.cu) are looked up once.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_CUDNN_H
#define ZRT_CUDA_CUDNN_H

// The convolution functions of cuDNN's v7-style API are marked deprecated in
// cuDNN 9 (the graph API supersedes them); docs/cuda.md says why zcc uses
// them for now.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cudnn.h>

#include <string>

namespace zrt {

#define ZRT_CUDNN_FUNCTIONS(X)                                                                     \
  X(cudnnCreate)                                                                                   \
  X(cudnnSetStream)                                                                                \
  X(cudnnGetErrorString)                                                                           \
  X(cudnnCreateTensorDescriptor)                                                                   \
  X(cudnnSetTensorNdDescriptor)                                                                    \
  X(cudnnCreateFilterDescriptor)                                                                   \
  X(cudnnSetFilterNdDescriptor)                                                                    \
  X(cudnnCreateConvolutionDescriptor)                                                              \
  X(cudnnSetConvolutionNdDescriptor)                                                               \
  X(cudnnSetConvolutionGroupCount)                                                                 \
  X(cudnnSetConvolutionMathType)                                                                   \
  X(cudnnGetConvolutionForwardAlgorithm_v7)                                                        \
  X(cudnnGetConvolutionForwardWorkspaceSize)                                                       \
  X(cudnnConvolutionForward)                                                                       \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)                                                   \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize)                                                  \
  X(cudnnConvolutionBackwardData)                                                                  \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)                                                 \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize)                                                \
  X(cudnnConvolutionBackwardFilter)

/// cuDNN's functions, all found, or |error| saying why not.
struct CudnnApi {
#define ZRT_CUDNN_POINTER(name) decltype(&::name) name = nullptr;
  ZRT_CUDNN_FUNCTIONS(ZRT_CUDNN_POINTER)
#undef ZRT_CUDNN_POINTER
  std::string error;
};

/// Loads libcudnn.so.9 once (the loader's path, then CUDA_HOME's lib64).
const CudnnApi &cudnnApi();

} // namespace zrt

#pragma GCC diagnostic pop

#endif // ZRT_CUDA_CUDNN_H
