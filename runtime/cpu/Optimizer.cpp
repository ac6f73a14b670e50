//===- Optimizer.cpp - CPU kernels: optimizer -------------------------------===//
//
// Optimizers: AdamW (PyTorch's arithmetic, in the same order) and SGD with
// momentum, each with an optional scalar `skip` input (an fp16 step with
// an overflow leaves every state unchanged).
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"

#include <cmath>

namespace zrt::cpu {

std::string checkSkip(const KernelCall &c, size_t withoutSkip, size_t nout) {
  if (c.in.size() == withoutSkip + 1) {
    const TensorRef &s = c.in.back();
    if (s.dtype != DType::Bool || !s.shape.empty())
      return "expects a scalar bool 'skip' as its last input";
    return arity(c, withoutSkip + 1, nout);
  }
  return arity(c, withoutSkip, nout);
}

/// A skipped optimizer step: results = inputs (nothing moves when in place).
bool skipStep(const KernelCall &c, size_t withoutSkip) {
  if (c.in.size() != withoutSkip + 1 || !*c.in.back().as<uint8_t>())
    return false;
  for (size_t k = 0; k < c.out.size(); ++k) {
    // Outputs k correspond to inputs 0 (param) and 2.. (state): param, then
    // the state tensors in order.
    const TensorRef &from = c.in[k == 0 ? 0 : k + 1];
    if (from.data != c.out[k].data)
      std::memmove(c.out[k].data, from.data, (size_t)from.numel() * sizeof(float));
  }
  return true;
}

/// adamw's optional inputs after lr and step: `skip` (a bool scalar), then
/// the gradient's scale (a float32 scalar: the gradient read is g * scale,
/// zero-fuse-optimizer). False if the inputs are not of that form.
bool adamwExtras(const KernelCall &c, const TensorRef *&skip, const TensorRef *&scale) {
  skip = scale = nullptr;
  if (c.in.size() < 6 || c.in.size() > 8)
    return false;
  for (size_t i = 6; i < c.in.size(); ++i) {
    const TensorRef &t = c.in[i];
    if (!t.shape.empty())
      return false;
    if (t.dtype == DType::Bool && i == 6)
      skip = &t;
    else if (t.dtype == DType::F32 && i == c.in.size() - 1)
      scale = &t;
    else
      return false;
  }
  return true;
}

std::string checkAdamw(const KernelCall &c) {
  const TensorRef *skip, *scale;
  if (!adamwExtras(c, skip, scale))
    return "expects [param, grad, m, v, lr, step], then optionally a scalar bool 'skip' and a "
           "float32 scalar gradient scale";
  // After the three states, each optional (zero-fuse-optimizer): the new
  // parameter rounded to 16 bits (mixed precision's copy for the next step)
  // and the gradient's sum of squares (a float32 scalar), in that order.
  if (c.out.size() < 3 || c.out.size() > 5)
    return "expects 3 to 5 results";
  for (size_t i = 3; i < c.out.size(); ++i) {
    const TensorRef &o = c.out[i];
    bool squares = o.shape.empty() && o.dtype == DType::F32;
    bool copy = isNarrowFloat(o.dtype) && o.shape == c.in[0].shape;
    if (!(squares || copy) || (copy && i == 4) || (i == 4 && c.out[3].shape.empty()))
      return "expects a 16-bit parameter copy of the parameter's shape and a float32 scalar sum "
             "of squares, each optional, after the new parameter and moments";
  }
  if (c.floats.size() != 4)
    return "expects [beta1, beta2, eps, weight_decay]";
  const Shape &s = c.in[0].shape;
  for (const TensorRef *t : {&c.in[0], &c.in[2], &c.in[3], &c.out[0], &c.out[1], &c.out[2]})
    if (t->dtype != DType::F32 || t->shape != s)
      return "expects float32 parameter, moments and results of one shape";
  // The gradient: float32, or 16-bit (a bf16 gradient bucket).
  if (!isFloatStorage(c.in[1].dtype) || c.in[1].shape != s)
    return "expects a float gradient of the parameter's shape";
  for (const TensorRef *t : {&c.in[4], &c.in[5]})
    if (t->dtype != DType::F32 || !t->shape.empty())
      return "expects float32 scalars lr and step";
  return "";
}
/// adamw's 16-bit copy of the parameter (an output after the states), if any.
const TensorRef *paramCopy(const KernelCall &c) {
  return c.out.size() > 3 && !c.out[3].shape.empty() ? &c.out[3] : nullptr;
}
void writeParamCopy(const KernelCall &c, const float *p, int64_t begin, int64_t end) {
  if (const TensorRef *copy = paramCopy(c))
    for (int64_t k = begin; k < end; ++k)
      storeNarrow(*copy, k, p[k]);
}
/// adamw's sum of the squared gradient (its last output, a scalar), if any:
/// as the reduce kernel sums it (each square in float, added in double in
/// order), so that the fused norm has the separate one's bits.
void writeSumSquares(const KernelCall &c) {
  if (c.out.size() < 4 || !c.out.back().shape.empty())
    return;
  const TensorRef &g = c.in[1];
  double a = 0;
  for (int64_t k = 0, n = g.numel(); k < n; ++k) {
    float v = isNarrowFloat(g.dtype) ? loadNarrow(g, k) : g.as<float>()[k];
    a += (double)(v * v);
  }
  *c.out.back().as<float>() = (float)a;
}

Status runAdamw(const KernelCall &c) {
  // PyTorch's AdamW (torch/optim/adamw.py, non-capturable): scalars in double,
  // tensor math in float32, in the same order.
  writeSumSquares(c); // before the update: the gradient may share bytes with a result
  const TensorRef *skip, *scale;
  adamwExtras(c, skip, scale);
  KernelCall state = c; // the float32 states and the skip flag; skipStep moves those
  state.out.resize(3);
  state.in.resize(skip ? 7 : 6);
  if (skipStep(state, 6)) {
    writeParamCopy(c, c.out[0].as<float>(), 0, c.in[0].numel());
    return Status::ok();
  }
  double lr = *c.in[4].as<float>(), t = *c.in[5].as<float>();
  double b1 = c.floats[0], b2 = c.floats[1], eps = c.floats[2], wd = c.floats[3];
  float decay = (float)(1.0 - lr * wd);
  double bc1 = 1.0 - std::pow(b1, t), bc2 = 1.0 - std::pow(b2, t);
  float stepSize = (float)(lr / bc1), bc2Sqrt = (float)std::sqrt(bc2);
  float w1 = (float)(1.0 - b1), fb2 = (float)b2, w2 = (float)(1.0 - b2), feps = (float)eps;
  const float *p = c.in[0].as<float>(), *m = c.in[2].as<float>(), *v = c.in[3].as<float>();
  const TensorRef &grad = c.in[1];
  bool wide = grad.dtype == DType::F32;
  float *po = c.out[0].as<float>(), *mo = c.out[1].as<float>(), *vo = c.out[2].as<float>();
  // Element by element, so any split over threads gives the same bits: as
  // DeepSpeed's CPU Adam, large (offloaded) shards use every core.
  parallelFor(c.in[0].numel(), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      float gk = wide ? grad.as<float>()[k] : loadNarrow(grad, k);
      if (scale)
        gk = gk * *scale->as<float>(); // as the separate multiply rounded it
      float pk = p[k] * decay;
      float mk = m[k] + w1 * (gk - m[k]); // lerp(m, g, 1 - beta1)
      float vk = v[k] * fb2 + w2 * gk * gk;
      float denom = std::sqrt(vk) / bc2Sqrt + feps;
      po[k] = pk - stepSize * (mk / denom);
      mo[k] = mk;
      vo[k] = vk;
    }
    writeParamCopy(c, po, begin, end);
  });
  return Status::ok();
}

std::string checkSgd(const KernelCall &c) {
  if (auto e = checkSkip(c, 4, 2); !e.empty())
    return e;
  if (c.floats.size() != 2 || c.ints.size() != 1)
    return "expects floats [momentum, weight_decay] and ints [nesterov]";
  const Shape &s = c.in[0].shape;
  for (const TensorRef *t : {&c.in[0], &c.in[1], &c.in[2], &c.out[0], &c.out[1]})
    if (t->dtype != DType::F32 || t->shape != s)
      return "expects float32 parameter, gradient, buffer and results of one shape";
  if (c.in[3].dtype != DType::F32 || !c.in[3].shape.empty())
    return "expects a float32 scalar lr";
  return "";
}
Status runSgd(const KernelCall &c) {
  // torch.optim.SGD (dampening 0): the buffer starts at zero, so its first
  // value is the gradient, as PyTorch's clone on the first step.
  if (skipStep(c, 4))
    return Status::ok();
  float lr = *c.in[3].as<float>(), mom = (float)c.floats[0], wd = (float)c.floats[1];
  bool nesterov = c.ints[0];
  const float *p = c.in[0].as<float>(), *g = c.in[1].as<float>(), *b = c.in[2].as<float>();
  float *po = c.out[0].as<float>(), *bo = c.out[1].as<float>();
  for (int64_t k = 0, n = c.in[0].numel(); k < n; ++k) {
    float d = wd != 0 ? g[k] + wd * p[k] : g[k];
    float buf = mom != 0 ? mom * b[k] + d : 0.0f;
    if (mom != 0)
      d = nesterov ? d + mom * buf : buf;
    po[k] = p[k] - lr * d;
    bo[k] = buf;
  }
  return Status::ok();
}

} // namespace zrt::cpu
