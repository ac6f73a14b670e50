//===- Reduce.cpp - CPU kernels: reduce -------------------------------------===//
//
// Reductions over any set of axes (sum, mean, max, min, prod), accumulated
// in double in input order.
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"

#include <cmath>

namespace zrt::cpu {

std::string checkReduce(const KernelCall &c) {
  if (auto e = arity(c, 1, 1); !e.empty())
    return e;
  const TensorRef &x = c.in[0], &y = c.out[0];
  if (c.ints.size() < 2 || c.ints[0] < 0 || c.ints[0] > 5)
    return "expects [kind (0 sum, 1 mean, 2 max, 3 min, 4 prod, 5 sum of squares), keepdims, "
           "axes...]";
  // A sum of squares is float32 whatever the input (a norm's accumulation).
  if (!isFloatStorage(x.dtype) || y.dtype != (c.ints[0] == 5 ? DType::F32 : x.dtype))
    return c.ints[0] == 5 ? "expects a float input and a float32 sum of squares"
                          : "expects float32 or bfloat16 in and out of one type";
  std::vector<bool> reduced(x.shape.size(), false);
  for (size_t i = 2; i < c.ints.size(); ++i) {
    if (!validAxis(c.ints[i], x.shape.size()) || reduced[c.ints[i]])
      return "invalid axes";
    reduced[c.ints[i]] = true;
  }
  Shape expected;
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (!reduced[d])
      expected.push_back(x.shape[d]);
    else if (c.ints[1])
      expected.push_back(1);
  if (y.shape != expected)
    return "result " + describe(y) + " should be " + shapeStr(expected);
  return "";
}
Status runReduce(const KernelCall &c) {
  const TensorRef &x = c.in[0], &y = c.out[0];
  int64_t kind = c.ints[0];
  // Map each input element to its output element (reduced dims stride 0).
  std::vector<bool> reduced(x.shape.size(), false);
  for (size_t i = 2; i < c.ints.size(); ++i)
    reduced[c.ints[i]] = true;
  Shape kept;
  for (size_t d = 0; d < x.shape.size(); ++d)
    kept.push_back(reduced[d] ? 1 : x.shape[d]);
  int64_t n = y.numel(), count = x.numel() / std::max<int64_t>(n, 1);
  std::vector<double> acc(n, kind == 2 ? -INFINITY : kind == 3 ? INFINITY : kind == 4 ? 1.0 : 0.0);
  // Iterate the input in the index space of x, with kept's strides.
  forEachBroadcast<1>(x.shape, {kept}, [&](int64_t k, const std::array<int64_t, 1> &off) {
    double v = isNarrowFloat(x.dtype) ? loadNarrow(x, k) : x.as<float>()[k];
    double &a = acc[off[0]];
    switch (kind) {
    case 0:
    case 1:
      a += v;
      break;
    case 5: // each square in float, as a separate multiply would have been
      a += (double)((float)v * (float)v);
      break;
    case 2:
      a = std::max(a, v);
      break;
    case 3:
      a = std::min(a, v);
      break;
    default:
      a *= v;
      break;
    }
  });
  for (int64_t k = 0; k < n; ++k) {
    float v = (float)(kind == 1 ? acc[k] / count : acc[k]);
    if (isNarrowFloat(y.dtype))
      storeNarrow(y, k, v);
    else
      y.as<float>()[k] = v;
  }
  return Status::ok();
}

} // namespace zrt::cpu
