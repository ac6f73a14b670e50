//===- Conv.cu - CUDA kernels: convolutions through cuDNN ------------------===//
//
// conv, conv_input_grad and conv_filter_grad (the ABI of cpu/Conv.cpp) as
// cuDNN's forward, backward-data and backward-filter convolutions, channels
// first (NCHW / NCDHW; a 1-D convolution is a 2-D one over [L, 1]), float32
// accumulation for every storage type. Each shape is planned once: its
// descriptors and the first algorithm cuDNN's heuristic ranks that is
// deterministic (and, for float32 without --tf32, not a Tensor Core one:
// float32 stays float32, as the GEMMs do); its workspace is the context's
// scratch. cuDNN pads symmetrically: zcc's importer moves any asymmetric
// rest into explicit zeros, and a call with asymmetric pads is not
// supported here (the CPU kernel runs it).
//
//===----------------------------------------------------------------------===//
#include "cuda/Cudnn.h"
#include "cuda/KernelSupport.cuh"

#include <map>
#include <mutex>
#include <unordered_map>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace zrt::cuda {
namespace {

enum class Direction { Forward, Data, Filter };

/// The convolution's input x, filter w and output y among |c|'s operands.
struct ConvOperands {
  const TensorRef *x, *w, *y;
};
ConvOperands operandsOf(Direction d, const KernelCall &c) {
  switch (d) {
  case Direction::Forward:
    return {&c.in[0], &c.in[1], &c.out[0]};
  case Direction::Data:
    return {&c.out[0], &c.in[1], &c.in[0]};
  case Direction::Filter:
    break;
  }
  return {&c.in[0], &c.out[0], &c.in[1]};
}

bool supportsConvCall(Direction d, const KernelCall &c) {
  if (c.in.size() != 2 || c.out.size() != 1)
    return false;
  ConvOperands o = operandsOf(d, c);
  size_t rank = o.x->shape.size();
  int64_t spatial = (int64_t)rank - 2;
  if (rank < 3 || rank > 5 || o.w->shape.size() != rank || o.y->shape.size() != rank ||
      c.ints.size() != size_t(1 + 4 * spatial))
    return false;
  if (o.x->dtype != DType::F32 && o.x->dtype != DType::BF16 && o.x->dtype != DType::F16)
    return false;
  for (int64_t k = 0; k < spatial; ++k)
    if (c.ints[1 + 2 * spatial + k] != c.ints[1 + 3 * spatial + k])
      return false;
  for (const TensorRef *t : {o.x, o.w, o.y})
    if (t->numel() >= (int64_t(1) << 31))
      return false;
  return true;
}

Status cudnnCheck(cudnnStatus_t s, const char *what) {
  if (s == CUDNN_STATUS_SUCCESS)
    return Status::ok();
  return errorf("cuDNN ", what, ": ", cudnnApi().cudnnGetErrorString(s));
}
#define ZRT_CUDNN(expr, what) ZRT_RETURN_IF_ERROR(cudnnCheck((expr), what))

/// One shape's descriptors and algorithm.
struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;
  size_t workspace = 0;
};

cudnnDataType_t dataType(DType t) {
  return t == DType::BF16  ? CUDNN_DATA_BFLOAT16
         : t == DType::F16 ? CUDNN_DATA_HALF
                           : CUDNN_DATA_FLOAT;
}

/// cuDNN wants 4 or 5 dimensions: a 1-D shape gets a trailing 1.
std::vector<int> dimsOf(const std::vector<int64_t> &shape) {
  std::vector<int> d(shape.begin(), shape.end());
  if (d.size() == 3)
    d.push_back(1);
  return d;
}

/// Whether a heuristic's algorithm is one zcc runs: deterministic, and for
/// float32 without TF32 one that multiplies in float32.
template <typename Perf> bool acceptable(const Perf &p, bool exactF32) {
  return p.status == CUDNN_STATUS_SUCCESS && p.determinism == CUDNN_DETERMINISTIC &&
         !(exactF32 && (p.mathType == CUDNN_TENSOR_OP_MATH ||
                        p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION));
}

Status buildPlan(Direction d, const KernelCall &c, bool allowTf32, cudnnHandle_t h, ConvPlan &p) {
  const CudnnApi &api = cudnnApi();
  ConvOperands o = operandsOf(d, c);
  const int64_t spatial = (int64_t)o.x->shape.size() - 2;
  const cudnnDataType_t type = dataType(o.x->dtype);
  auto tensor = [&](const TensorRef &t, cudnnTensorDescriptor_t &desc) -> Status {
    std::vector<int> dims = dimsOf(t.shape), strides(dims.size(), 1);
    for (int k = (int)dims.size() - 2; k >= 0; --k)
      strides[k] = strides[k + 1] * dims[k + 1];
    ZRT_CUDNN(api.cudnnCreateTensorDescriptor(&desc), "tensor descriptor");
    ZRT_CUDNN(
        api.cudnnSetTensorNdDescriptor(desc, type, (int)dims.size(), dims.data(), strides.data()),
        "tensor descriptor");
    return Status::ok();
  };
  ZRT_RETURN_IF_ERROR(tensor(*o.x, p.x));
  ZRT_RETURN_IF_ERROR(tensor(*o.y, p.y));
  std::vector<int> wd = dimsOf(o.w->shape);
  ZRT_CUDNN(api.cudnnCreateFilterDescriptor(&p.w), "filter descriptor");
  ZRT_CUDNN(api.cudnnSetFilterNdDescriptor(p.w, type, CUDNN_TENSOR_NCHW, (int)wd.size(), wd.data()),
            "filter descriptor");
  std::vector<int> pads, strides, dilations;
  for (int64_t k = 0; k < spatial; ++k) {
    strides.push_back((int)c.ints[1 + k]);
    dilations.push_back((int)c.ints[1 + spatial + k]);
    pads.push_back((int)c.ints[1 + 2 * spatial + k]);
  }
  if (spatial == 1)
    pads.push_back(0), strides.push_back(1), dilations.push_back(1);
  ZRT_CUDNN(api.cudnnCreateConvolutionDescriptor(&p.conv), "convolution descriptor");
  ZRT_CUDNN(api.cudnnSetConvolutionNdDescriptor(p.conv, (int)pads.size(), pads.data(),
                                                strides.data(), dilations.data(),
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
            "convolution descriptor");
  ZRT_CUDNN(api.cudnnSetConvolutionGroupCount(p.conv, (int)c.ints[0]), "group count");
  const bool exactF32 = o.x->dtype == DType::F32 && !allowTf32;
  ZRT_CUDNN(
      api.cudnnSetConvolutionMathType(p.conv, exactF32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH),
      "math type");
  // The heuristic's ranking; the first acceptable algorithm, its math type
  // and workspace.
  auto pick = [&](auto *perf, int count, const char *what) -> Status {
    for (int k = 0; k < count; ++k)
      if (acceptable(perf[k], exactF32)) {
        p.algo = (int)perf[k].algo;
        p.workspace = perf[k].memory;
        ZRT_CUDNN(api.cudnnSetConvolutionMathType(p.conv, perf[k].mathType), "math type");
        return Status::ok();
      }
    auto dims = [](const TensorRef &t) {
      std::string s;
      for (int64_t v : t.shape)
        s += (s.empty() ? "" : "x") + std::to_string(v);
      return s;
    };
    return errorf("cuDNN has no deterministic ", what, " algorithm for input ", dims(*o.x),
                  " and filter ", dims(*o.w));
  };
  int count = 0;
  switch (d) {
  case Direction::Forward: {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    ZRT_CUDNN(api.cudnnGetConvolutionForwardAlgorithm_v7(
                  h, p.x, p.w, p.conv, p.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf),
              "forward heuristic");
    return pick(perf, count, "forward");
  }
  case Direction::Data: {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    ZRT_CUDNN(api.cudnnGetConvolutionBackwardDataAlgorithm_v7(
                  h, p.w, p.y, p.conv, p.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf),
              "backward-data heuristic");
    return pick(perf, count, "backward-data");
  }
  case Direction::Filter:
    break;
  }
  cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  ZRT_CUDNN(api.cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                h, p.x, p.y, p.conv, p.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf),
            "backward-filter heuristic");
  return pick(perf, count, "backward-filter");
}

/// This thread's cuDNN handle on the current device (ranks run as threads,
/// each on its own device).
Status handleFor(cudaStream_t stream, cudnnHandle_t &h) {
  thread_local std::unordered_map<int, cudnnHandle_t> handles;
  int device = 0;
  ZRT_CUDA(cudaGetDevice(&device));
  auto it = handles.find(device);
  if (it == handles.end()) {
    ZRT_CUDNN(cudnnApi().cudnnCreate(&h), "handle");
    it = handles.emplace(device, h).first;
  }
  h = it->second;
  ZRT_CUDNN(cudnnApi().cudnnSetStream(h, stream), "stream");
  return Status::ok();
}

Status launchConvCall(Direction d, const KernelCall &c, CudaContext &ctx) {
  const CudnnApi &api = cudnnApi();
  if (!api.error.empty())
    return errorf(api.error);
  cudnnHandle_t h;
  ZRT_RETURN_IF_ERROR(handleFor(ctx.stream, h));
  // Plans by direction, dtype, shapes, attributes and math; shared by the
  // ranks' threads (the descriptors are not tied to a device).
  static std::mutex mutex;
  static std::map<std::string, ConvPlan> plans;
  ConvOperands o = operandsOf(d, c);
  std::string key = std::to_string((int)d) + ":" + std::to_string((int)o.x->dtype) + ":" +
                    std::to_string(ctx.allowTf32);
  for (const TensorRef *t : {o.x, o.w, o.y})
    for (int64_t v : t->shape)
      key += "," + std::to_string(v);
  for (int64_t v : c.ints)
    key += ";" + std::to_string(v);
  ConvPlan p;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = plans.find(key);
    if (it == plans.end()) {
      ZRT_RETURN_IF_ERROR(buildPlan(d, c, ctx.allowTf32, h, p));
      it = plans.emplace(key, p).first;
    }
    p = it->second;
  }
  ZRT_RETURN_IF_ERROR(ctx.reserve(p.workspace));
  const float one = 1.0f, zero = 0.0f;
  switch (d) {
  case Direction::Forward:
    ZRT_CUDNN(api.cudnnConvolutionForward(h, &one, p.x, o.x->data, p.w, o.w->data, p.conv,
                                          (cudnnConvolutionFwdAlgo_t)p.algo, ctx.scratch,
                                          p.workspace, &zero, p.y, o.y->data),
              "convolution forward");
    break;
  case Direction::Data:
    ZRT_CUDNN(api.cudnnConvolutionBackwardData(h, &one, p.w, o.w->data, p.y, o.y->data, p.conv,
                                               (cudnnConvolutionBwdDataAlgo_t)p.algo, ctx.scratch,
                                               p.workspace, &zero, p.x, o.x->data),
              "convolution backward data");
    break;
  case Direction::Filter:
    ZRT_CUDNN(api.cudnnConvolutionBackwardFilter(h, &one, p.x, o.x->data, p.y, o.y->data, p.conv,
                                                 (cudnnConvolutionBwdFilterAlgo_t)p.algo,
                                                 ctx.scratch, p.workspace, &zero, p.w, o.w->data),
              "convolution backward filter");
    break;
  }
  return Status::ok();
}

} // namespace

bool supportsConv(const KernelCall &c) { return supportsConvCall(Direction::Forward, c); }
bool supportsConvInputGrad(const KernelCall &c) { return supportsConvCall(Direction::Data, c); }
bool supportsConvFilterGrad(const KernelCall &c) { return supportsConvCall(Direction::Filter, c); }
Status launchConv(const KernelCall &c, CudaContext &ctx) {
  return launchConvCall(Direction::Forward, c, ctx);
}
Status launchConvInputGrad(const KernelCall &c, CudaContext &ctx) {
  return launchConvCall(Direction::Data, c, ctx);
}
Status launchConvFilterGrad(const KernelCall &c, CudaContext &ctx) {
  return launchConvCall(Direction::Filter, c, ctx);
}

} // namespace zrt::cuda
