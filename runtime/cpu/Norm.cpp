//===- Norm.cpp - CPU kernels: norm -----------------------------------------===//
//
// Norms and softmax: softmax/log_softmax along an axis, bias_softmax (the
// attention scores with a mask), layer_norm, rms_norm, and their gradients.
// Row statistics in double.
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"

#include <cmath>

namespace zrt::cpu {

std::string checkSoftmax(const KernelCall &c) {
  if (auto e = checkUnaryFloat(c); !e.empty())
    return e;
  if (c.ints.size() != 1 || !validAxis(c.ints[0], c.in[0].shape.size()))
    return "expects a valid axis";
  return "";
}
template <typename T> Status softmaxImpl(const KernelCall &c, bool log) {
  int64_t outer, dim, inner;
  around(c.in[0].shape, c.ints[0], outer, dim, inner);
  const T *x = c.in[0].as<T>();
  T *y = c.out[0].as<T>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const T *xr = x + o * dim * inner + i;
      T *yr = y + o * dim * inner + i;
      float mx = -INFINITY;
      for (int64_t j = 0; j < dim; ++j)
        mx = std::max(mx, float(xr[j * inner]));
      double sum = 0;
      for (int64_t j = 0; j < dim; ++j)
        sum += std::exp((double)float(xr[j * inner]) - mx);
      double lse = std::log(sum);
      for (int64_t j = 0; j < dim; ++j) {
        double z = (double)float(xr[j * inner]) - mx;
        yr[j * inner] = T((float)(log ? z - lse : std::exp(z) / sum));
      }
    }
  return Status::ok();
}
Status runSoftmax(const KernelCall &c) {
  return dispatchFloat(c.in[0].dtype,
                       [&](auto tag) { return softmaxImpl<decltype(tag)>(c, false); });
}

std::string checkBiasSoftmax(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  const TensorRef &x = c.in[0], &bias = c.in[1], &y = c.out[0];
  if (!isFloatStorage(x.dtype) || bias.dtype != x.dtype || y.dtype != x.dtype ||
      y.shape != x.shape || x.shape.empty())
    return "expects float input, bias and result of one type, result of the input's shape";
  Shape s;
  if (!broadcastShape(x.shape, bias.shape, s) || s != x.shape)
    return "bias " + describe(bias) + " does not broadcast to " + describe(x);
  if (c.ints.size() != 1)
    return "expects ints [nan_to_zero]";
  return "";
}
/// Element offsets into a bias broadcast to |shape|: of each row (all but
/// the last dimension), and the stride along the row (0 or 1).
void biasRows(const Shape &shape, const Shape &bias, std::vector<int64_t> &rowOffset,
              int64_t &step) {
  size_t rank = shape.size(), lead = rank - bias.size();
  std::vector<int64_t> stride(rank, 0);
  for (int64_t d = (int64_t)rank - 1, s = 1; d >= (int64_t)lead; --d) {
    int64_t size = bias[d - lead];
    stride[d] = size == 1 ? 0 : s;
    s *= size;
  }
  step = stride[rank - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d)
    rows *= shape[d];
  rowOffset.assign(rows, 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = (int64_t)rank - 2, rest = r; d >= 0; --d) {
      rowOffset[r] += (rest % shape[d]) * stride[d];
      rest /= shape[d];
    }
}
template <typename T> Status biasSoftmaxImpl(const KernelCall &c) {
  const Shape &shape = c.in[0].shape;
  int64_t dim = shape.back(), step;
  std::vector<int64_t> rowOffset;
  biasRows(shape, c.in[1].shape, rowOffset, step);
  const T *x = c.in[0].as<T>(), *bias = c.in[1].as<T>();
  T *y = c.out[0].as<T>();
  bool nanToZero = c.ints[0] != 0;
  std::vector<float> z(dim);
  for (size_t r = 0; r < rowOffset.size(); ++r) {
    const T *xr = x + r * dim, *br = bias + rowOffset[r];
    T *yr = y + r * dim;
    float mx = -INFINITY;
    for (int64_t j = 0; j < dim; ++j) {
      z[j] = float(xr[j]) + float(br[j * step]);
      mx = std::max(mx, z[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < dim; ++j)
      sum += std::exp((double)z[j] - mx);
    for (int64_t j = 0; j < dim; ++j) {
      float p = (float)(std::exp((double)z[j] - mx) / sum);
      yr[j] = T(nanToZero && std::isnan(p) ? 0.0f : p);
    }
  }
  return Status::ok();
}
Status runBiasSoftmax(const KernelCall &c) {
  return dispatchFloat(c.in[0].dtype, [&](auto tag) { return biasSoftmaxImpl<decltype(tag)>(c); });
}
std::string checkLogSoftmax(const KernelCall &c) { return checkSoftmax(c); }
Status runLogSoftmax(const KernelCall &c) {
  return dispatchFloat(c.in[0].dtype,
                       [&](auto tag) { return softmaxImpl<decltype(tag)>(c, true); });
}

std::string checkNorm(const KernelCall &c, bool allowBias) {
  size_t nin = c.in.size();
  if (nin < 2 || nin > (allowBias ? 3u : 2u) || c.out.size() != 1)
    return "wrong number of operands";
  const TensorRef &x = c.in[0];
  if (c.ints.size() != 1 || !validAxis(c.ints[0], x.shape.size()) || c.floats.size() != 1 ||
      !(c.floats[0] >= 0))
    return "expects [axis] and [epsilon >= 0]";
  if (!isFloatStorage(x.dtype) || c.out[0].dtype != x.dtype || c.out[0].shape != x.shape)
    return "expects float32 or bfloat16 in and out of one type and shape";
  Shape normShape(x.shape.begin() + c.ints[0], x.shape.end());
  for (size_t i = 1; i < nin; ++i)
    if (c.in[i].dtype != x.dtype || c.in[i].shape != normShape)
      return "scale/bias " + describe(c.in[i]) + " should be " + dtypeName(x.dtype) +
             shapeStr(normShape);
  return "";
}
std::string checkLayerNorm(const KernelCall &c) { return checkNorm(c, true); }
std::string checkRmsNorm(const KernelCall &c) { return checkNorm(c, false); }
Status normImpl(const KernelCall &c, bool rms) {
  const TensorRef &x = c.in[0];
  int64_t axis = c.ints[0], rows = 1, cols = 1;
  for (int64_t d = 0; d < axis; ++d)
    rows *= x.shape[d];
  for (size_t d = axis; d < x.shape.size(); ++d)
    cols *= x.shape[d];
  double eps = c.floats[0];
  const float *px = x.as<float>(), *w = c.in[1].as<float>();
  const float *bias = c.in.size() > 2 ? c.in[2].as<float>() : nullptr;
  float *py = c.out[0].as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = px + r * cols;
    float *yr = py + r * cols;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < cols; ++j)
        mean += xr[j];
      mean /= cols;
    }
    for (int64_t j = 0; j < cols; ++j)
      var += (xr[j] - mean) * (xr[j] - mean);
    var /= cols;
    double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < cols; ++j) {
      double v = (xr[j] - mean) * rstd * w[j];
      yr[j] = (float)(bias ? v + bias[j] : v);
    }
  }
  return Status::ok();
}
Status runLayerNormF32(const KernelCall &c) { return normImpl(c, false); }
Status runRmsNormF32(const KernelCall &c) { return normImpl(c, true); }

std::string checkSoftmaxGrad(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  for (const TensorRef *t : {&c.in[0], &c.in[1], &c.out[0]})
    if (t->dtype != c.out[0].dtype || !isFloatStorage(t->dtype) || t->shape != c.out[0].shape)
      return "expects float32 or bfloat16 y, dy and dx of one type and shape";
  if (c.ints.size() != 1 || !validAxis(c.ints[0], c.out[0].shape.size()))
    return "expects a valid axis";
  return "";
}
Status softmaxGradImpl(const KernelCall &c, bool log) {
  int64_t outer, dim, inner;
  around(c.out[0].shape, c.ints[0], outer, dim, inner);
  const float *y = c.in[0].as<float>(), *g = c.in[1].as<float>();
  float *dx = c.out[0].as<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * dim * inner + i;
      double dot = 0;
      for (int64_t j = 0; j < dim; ++j)
        dot +=
            log ? (double)g[base + j * inner] : (double)g[base + j * inner] * y[base + j * inner];
      for (int64_t j = 0; j < dim; ++j) {
        int64_t k = base + j * inner;
        dx[k] = (float)(log ? g[k] - std::exp((double)y[k]) * dot : y[k] * (g[k] - dot));
      }
    }
  return Status::ok();
}
std::string checkLogSoftmaxGrad(const KernelCall &c) { return checkSoftmaxGrad(c); }
Status runSoftmaxGradF32(const KernelCall &c) { return softmaxGradImpl(c, false); }
Status runLogSoftmaxGradF32(const KernelCall &c) { return softmaxGradImpl(c, true); }

std::string checkNormGrad(const KernelCall &c, size_t outs) {
  // x, scale, dy, and optionally the residual gradient dx adds (same as dx).
  if (auto e = arity(c, c.in.size() == 4 ? 4 : 3, outs); !e.empty())
    return e;
  const TensorRef &x = c.in[0];
  if (c.in.size() == 4 && (c.in[3].shape != x.shape || c.in[3].dtype != x.dtype))
    return "the residual must have x's shape and type";
  if (c.ints.size() != 1 || !validAxis(c.ints[0], x.shape.size()) || c.floats.size() != 1)
    return "expects [axis] and [epsilon]";
  Shape normShape(x.shape.begin() + c.ints[0], x.shape.end());
  for (const TensorRef *t : {&c.in[1], &c.in[2], &c.out[0]})
    if (t->dtype != x.dtype)
      return "expects x, scale, dy and dx of one type";
  if (!isFloatStorage(x.dtype) || c.in[2].shape != x.shape || c.out[0].shape != x.shape ||
      c.in[1].shape != normShape)
    return "expects float32 or bfloat16 x, scale of the normalized shape, dy and dx";
  for (size_t k = 1; k < outs; ++k)
    if (c.out[k].shape != normShape || c.out[k].dtype != x.dtype)
      return "parameter gradients must have the normalized shape and x's type";
  return "";
}
std::string checkLayerNormGrad(const KernelCall &c) { return checkNormGrad(c, 3); }
std::string checkRmsNormGrad(const KernelCall &c) { return checkNormGrad(c, 2); }
Status normGradImpl(const KernelCall &c, bool rms) {
  const TensorRef &x = c.in[0];
  int64_t axis = c.ints[0], rows = 1, cols = 1;
  for (int64_t d = 0; d < axis; ++d)
    rows *= x.shape[d];
  for (size_t d = axis; d < x.shape.size(); ++d)
    cols *= x.shape[d];
  double eps = c.floats[0];
  const float *px = x.as<float>(), *w = c.in[1].as<float>(), *pg = c.in[2].as<float>();
  float *dx = c.out[0].as<float>();
  std::vector<double> dw(cols, 0.0), db(cols, 0.0), dxhat(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = px + r * cols, *gr = pg + r * cols;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < cols; ++j)
        mean += xr[j];
      mean /= cols;
    }
    for (int64_t j = 0; j < cols; ++j)
      var += (xr[j] - mean) * (xr[j] - mean);
    var /= cols;
    double rstd = 1.0 / std::sqrt(var + eps);
    double sumD = 0, sumDX = 0;
    for (int64_t j = 0; j < cols; ++j) {
      double xhat = (xr[j] - mean) * rstd;
      dxhat[j] = (double)gr[j] * w[j];
      sumD += dxhat[j];
      sumDX += dxhat[j] * xhat;
      dw[j] += (double)gr[j] * xhat;
      db[j] += gr[j];
    }
    for (int64_t j = 0; j < cols; ++j) {
      double xhat = (xr[j] - mean) * rstd;
      double v = rms ? rstd * (dxhat[j] - xhat * sumDX / cols)
                     : rstd * (dxhat[j] - sumD / cols - xhat * sumDX / cols);
      dx[r * cols + j] = (float)v;
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    c.out[1].as<float>()[j] = (float)dw[j];
    if (!rms)
      c.out[2].as<float>()[j] = (float)db[j];
  }
  return Status::ok();
}
Status runLayerNormGradF32(const KernelCall &c) { return normGradImpl(c, false); }
Status runRmsNormGradF32(const KernelCall &c) { return normGradImpl(c, true); }

// bfloat16/float16 operands: widened to float32 around the float32 kernel.
Status runSoftmaxGrad(const KernelCall &c) { return viaFloat32(c, runSoftmaxGradF32); }
Status runLogSoftmaxGrad(const KernelCall &c) { return viaFloat32(c, runLogSoftmaxGradF32); }
/// The norm gradient, then (with a fourth input) dx = round(dx + residual),
/// as the separate add kernel computes it on dx rounded to its type.
Status normGradWithResidual(const KernelCall &c, Status (*f32)(const KernelCall &)) {
  if (c.in.size() == 3)
    return viaFloat32(c, f32);
  KernelCall inner = c;
  inner.in.resize(3);
  ZRT_RETURN_IF_ERROR(viaFloat32(inner, f32));
  const TensorRef &dx = c.out[0], &r = c.in[3];
  for (int64_t k = 0, n = dx.numel(); k < n; ++k) {
    if (dx.dtype == DType::F32)
      dx.as<float>()[k] += r.as<float>()[k];
    else
      storeNarrow(dx, k, loadNarrow(dx, k) + loadNarrow(r, k));
  }
  return Status::ok();
}
Status runLayerNormGrad(const KernelCall &c) {
  return normGradWithResidual(c, runLayerNormGradF32);
}
Status runRmsNormGrad(const KernelCall &c) { return normGradWithResidual(c, runRmsNormGradF32); }
Status runLayerNorm(const KernelCall &c) { return viaFloat32(c, runLayerNormF32); }
Status runRmsNorm(const KernelCall &c) { return viaFloat32(c, runRmsNormF32); }

} // namespace zrt::cpu
