//===- ConstantFolder.cpp - evaluate ONNX nodes on constants --------------===//
//
// PyTorch exports compute masks, positions and shapes with dozens of small
// nodes (Shape, Range, CumSum, GatherND, Where, ...). Once the batch dimension
// is bound every one of them is constant, and this evaluator computes them at
// import so that only the real dataflow reaches the zero dialect.
//
//===----------------------------------------------------------------------===//
#include "HostTensor.h"
#include "OnnxUtils.h"
#include "support/Shape.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <functional>
#include <numeric>

using namespace zcc::onnx_import;
using llvm::ArrayRef;
using llvm::SmallVector;

/// Row-major strides of |shape|.
static SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t k = (int64_t)shape.size() - 2; k >= 0; --k)
    s[k] = s[k + 1] * shape[k + 1];
  return s;
}

/// For each element of |outShape|, the flat index of the element of a tensor
/// of |inShape| that broadcasts to it.
static std::vector<int64_t> broadcastIndex(ArrayRef<int64_t> inShape, ArrayRef<int64_t> outShape) {
  int64_t n = 1;
  for (int64_t d : outShape)
    n *= d;
  std::vector<int64_t> idx(n);
  SmallVector<int64_t> inStrides = stridesOf(inShape);
  size_t lead = outShape.size() - inShape.size();
  SmallVector<int64_t> coord(outShape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t flat = 0;
    for (size_t d = 0; d < inShape.size(); ++d)
      flat += (inShape[d] == 1 ? 0 : coord[lead + d]) * inStrides[d];
    idx[k] = flat;
    for (int64_t d = (int64_t)outShape.size() - 1; d >= 0; --d) {
      if (++coord[d] < outShape[d])
        break;
      coord[d] = 0;
    }
  }
  return idx;
}

namespace {
/// Shorthand for the evaluator's error path.
struct Folder {
  const onnx::NodeProto &node;
  int64_t opset;
  ArrayRef<const HostTensor *> in;
  std::vector<HostTensor> &out;
  std::string &error;

  FoldStatus fail(const std::string &msg) {
    error = msg;
    return FoldStatus::Error;
  }
  const HostTensor *input(size_t k) const { return k < in.size() ? in[k] : nullptr; }

  FoldStatus elementwise(int32_t resultType, const std::function<double(double, double)> &fn) {
    const HostTensor &a = *in[0], &b = *in[1];
    SmallVector<int64_t> shape;
    if (!broadcastShape(a.shape, b.shape, shape))
      return fail("operand shapes do not broadcast");
    HostTensor r(resultType, shape);
    auto ia = broadcastIndex(a.shape, shape), ib = broadcastIndex(b.shape, shape);
    bool ints = !a.isFloat() && !b.isFloat();
    for (int64_t k = 0, n = r.numel(); k < n; ++k) {
      if (ints && !r.isFloat() && resultType != kBool) {
        // Exact int64 arithmetic for shape computations.
        r.i[k] = (int64_t)fn((double)a.i[ia[k]], (double)b.i[ib[k]]);
        continue;
      }
      r.set(k, fn(a.getF(ia[k]), b.getF(ib[k])));
    }
    if (r.type == kFloat)
      for (double &v : r.f)
        v = (double)(float)v;
    out.push_back(std::move(r));
    return FoldStatus::Folded;
  }

  FoldStatus intBinary(const std::function<int64_t(int64_t, int64_t)> &fn) {
    const HostTensor &a = *in[0], &b = *in[1];
    SmallVector<int64_t> shape;
    if (!broadcastShape(a.shape, b.shape, shape))
      return fail("operand shapes do not broadcast");
    HostTensor r(a.type, shape);
    auto ia = broadcastIndex(a.shape, shape), ib = broadcastIndex(b.shape, shape);
    for (int64_t k = 0, n = r.numel(); k < n; ++k)
      r.i[k] = fn(a.i[ia[k]], b.i[ib[k]]);
    out.push_back(std::move(r));
    return FoldStatus::Folded;
  }

  FoldStatus unary(const std::function<double(double)> &fn) {
    HostTensor r = *in[0];
    for (int64_t k = 0, n = r.numel(); k < n; ++k)
      r.set(k, fn(r.getF(k)));
    if (r.type == kFloat)
      for (double &v : r.f)
        v = (double)(float)v;
    out.push_back(std::move(r));
    return FoldStatus::Folded;
  }

  /// Copies the elements of |src| at flat indices |idx| into a new tensor.
  HostTensor gatherFlat(const HostTensor &src, ArrayRef<int64_t> shape,
                        const std::vector<int64_t> &idx) {
    HostTensor r(src.type, shape);
    for (size_t k = 0; k < idx.size(); ++k) {
      if (src.isFloat())
        r.f[k] = src.f[idx[k]];
      else
        r.i[k] = src.i[idx[k]];
    }
    return r;
  }

  HostTensor transpose(const HostTensor &x, ArrayRef<int64_t> perm) {
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(x.shape[p]);
    SmallVector<int64_t> inStrides = stridesOf(x.shape);
    std::vector<int64_t> idx(x.numel());
    SmallVector<int64_t> coord(shape.size(), 0);
    for (size_t k = 0; k < idx.size(); ++k) {
      int64_t flat = 0;
      for (size_t d = 0; d < shape.size(); ++d)
        flat += coord[d] * inStrides[perm[d]];
      idx[k] = flat;
      for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
        if (++coord[d] < shape[d])
          break;
        coord[d] = 0;
      }
    }
    return gatherFlat(x, shape, idx);
  }

  /// Slices |x| along |axis| to [start, start+size).
  HostTensor sliceAxis(const HostTensor &x, int64_t axis, int64_t start, int64_t size) {
    SmallVector<int64_t> shape(x.shape);
    shape[axis] = size;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= x.shape[d];
    for (int64_t d = axis + 1; d < x.rank(); ++d)
      inner *= x.shape[d];
    std::vector<int64_t> idx;
    idx.reserve(outer * size * inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t s = 0; s < size; ++s)
        for (int64_t n = 0; n < inner; ++n)
          idx.push_back((o * x.shape[axis] + start + s) * inner + n);
    return gatherFlat(x, shape, idx);
  }

  FoldStatus run();
};
} // namespace

/// Largest tensor the evaluator creates (elements); larger results of shape
/// computation are almost certainly a malformed model.
static constexpr int64_t kMaxElements = int64_t(1) << 28;

/// Checks that |shape| is a valid tensor shape of at most kMaxElements.
static bool validShape(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > kMaxElements / d))
      return false;
    n *= d;
  }
  return true;
}

FoldStatus Folder::run() {
  const std::string &op = node.op_type();
  for (const HostTensor *t : in)
    if (t && t->type == kString)
      return FoldStatus::NotFoldable;
  // Scalar-like inputs (axes, positions, Range bounds) must hold a value.
  auto needScalar = [&](size_t k, const char *what) {
    if (input(k) && input(k)->numel() < 1) {
      error = std::string(what) + " (input " + std::to_string(k) + ") is empty";
      return false;
    }
    return true;
  };
  // ONNX requires one element type across these inputs; a model that breaks
  // the rule is reported rather than evaluated.
  static const char *sameType[] = {
      "Add", "Sub",   "Mul",  "Div",         "Mod",     "Max",
      "Min", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
      "And", "Or",    "Xor",  "Concat",      "Range"};
  if (llvm::is_contained(sameType, op))
    for (const HostTensor *t : in)
      if (t && t->type != in[0]->type)
        return fail(std::string("inputs of ") + op + " must have one element type, got " +
                    onnxTypeName(in[0]->type) + " and " + onnxTypeName(t->type));
  if (op == "CumSum" && !needScalar(1, "the axis"))
    return FoldStatus::Error;
  if (op == "Range" &&
      !(needScalar(0, "start") && needScalar(1, "limit") && needScalar(2, "delta")))
    return FoldStatus::Error;
  if (op == "Trilu" && !needScalar(1, "k"))
    return FoldStatus::Error;

  if (op == "Identity") {
    out.push_back(*in[0]);
    return FoldStatus::Folded;
  }
  if (op == "Cast") {
    out.push_back(in[0]->cast(attrInt(node, "to", kFloat)));
    return FoldStatus::Folded;
  }
  if (op == "CastLike") {
    out.push_back(in[0]->cast(in[1]->type));
    return FoldStatus::Folded;
  }
  if (op == "Add")
    return elementwise(in[0]->type, [](double a, double b) { return a + b; });
  if (op == "Sub")
    return elementwise(in[0]->type, [](double a, double b) { return a - b; });
  if (op == "Mul")
    return elementwise(in[0]->type, [](double a, double b) { return a * b; });
  if (op == "Div") {
    if (in[0]->type != in[1]->type)
      return fail("operand types differ");
    if (!in[0]->isFloat()) // integer division truncates toward zero in ONNX
      return intBinary([](int64_t a, int64_t b) { return b ? a / b : 0; });
    return elementwise(in[0]->type, [](double a, double b) { return a / b; });
  }
  if (op == "Mod") {
    bool fmod = attrInt(node, "fmod", 0) != 0;
    if (!in[0]->isFloat()) // fmod = 0: the divisor's sign (Python's %); 1: the dividend's
      return intBinary([fmod](int64_t a, int64_t b) -> int64_t {
        if (!b)
          return 0;
        int64_t r = a % b;
        return !fmod && r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
      });
    if (!fmod)
      return fail("Mod of floating-point tensors needs fmod = 1 (the ONNX rule)");
    return elementwise(in[0]->type, [](double a, double b) { return std::fmod(a, b); });
  }
  if (op == "Pow")
    return elementwise(in[0]->type, [](double a, double b) { return std::pow(a, b); });
  if ((op == "Max" || op == "Min") && in.size() == 2)
    return elementwise(
        in[0]->type, op == "Max" ? [](double a, double b) { return std::max(a, b); }
                                 : [](double a, double b) { return std::min(a, b); });
  if (op == "Equal")
    return elementwise(kBool, [](double a, double b) { return a == b ? 1.0 : 0.0; });
  if (op == "Less")
    return elementwise(kBool, [](double a, double b) { return a < b ? 1.0 : 0.0; });
  if (op == "LessOrEqual")
    return elementwise(kBool, [](double a, double b) { return a <= b ? 1.0 : 0.0; });
  if (op == "Greater")
    return elementwise(kBool, [](double a, double b) { return a > b ? 1.0 : 0.0; });
  if (op == "GreaterOrEqual")
    return elementwise(kBool, [](double a, double b) { return a >= b ? 1.0 : 0.0; });
  if (op == "And")
    return elementwise(kBool, [](double a, double b) { return (a != 0 && b != 0) ? 1.0 : 0.0; });
  if (op == "Or")
    return elementwise(kBool, [](double a, double b) { return (a != 0 || b != 0) ? 1.0 : 0.0; });
  if (op == "Xor")
    return elementwise(kBool,
                       [](double a, double b) { return ((a != 0) != (b != 0)) ? 1.0 : 0.0; });
  if (op == "Not")
    return unary([](double a) { return a != 0 ? 0.0 : 1.0; });
  if (op == "Neg")
    return unary([](double a) { return -a; });
  if (op == "Abs")
    return unary([](double a) { return std::fabs(a); });
  if (op == "Sqrt")
    return unary([](double a) { return std::sqrt(a); });
  if (op == "Exp")
    return unary([](double a) { return std::exp(a); });
  if (op == "Log")
    return unary([](double a) { return std::log(a); });
  if (op == "Cos")
    return unary([](double a) { return std::cos(a); });
  if (op == "Sin")
    return unary([](double a) { return std::sin(a); });
  if (op == "Reciprocal")
    return unary([](double a) { return 1.0 / a; });
  if (op == "Floor")
    return unary([](double a) { return std::floor(a); });
  if (op == "Ceil")
    return unary([](double a) { return std::ceil(a); });

  if (op == "Where") {
    const HostTensor &c = *in[0], &a = *in[1], &b = *in[2];
    if (c.type != kBool || a.type != b.type)
      return fail("Where needs a bool condition and two values of one type");
    SmallVector<int64_t> s1, shape;
    if (!broadcastShape(a.shape, b.shape, s1) || !broadcastShape(c.shape, s1, shape))
      return fail("operand shapes do not broadcast");
    HostTensor r(a.type, shape);
    auto ic = broadcastIndex(c.shape, shape), ia = broadcastIndex(a.shape, shape),
         ib = broadcastIndex(b.shape, shape);
    for (int64_t k = 0, n = r.numel(); k < n; ++k) {
      const HostTensor &src = c.i[ic[k]] ? a : b;
      int64_t j = c.i[ic[k]] ? ia[k] : ib[k];
      if (r.isFloat())
        r.f[k] = src.f[j];
      else
        r.i[k] = src.i[j];
    }
    out.push_back(std::move(r));
    return FoldStatus::Folded;
  }

  if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten") {
    std::vector<int64_t> arg;
    if (input(1))
      arg = input(1)->toInts();
    SmallVector<int64_t> shape;
    if (!inferViewShape(node, in[0]->shape, input(1) ? &arg : nullptr, shape, error))
      return FoldStatus::Error;
    HostTensor r = *in[0];
    r.shape = shape;
    out.push_back(std::move(r));
    return FoldStatus::Folded;
  }
  if (op == "Shape") {
    int64_t rank = in[0]->rank();
    int64_t start = attrInt(node, "start", 0), end = attrInt(node, "end", rank);
    if (start < 0)
      start += rank;
    if (end < 0)
      end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    HostTensor r(kInt64, {end - start});
    for (int64_t d = start; d < end; ++d)
      r.i[d - start] = in[0]->shape[d];
    out.push_back(std::move(r));
    return FoldStatus::Folded;
  }
  if (op == "Size") {
    HostTensor r(kInt64, {});
    r.i[0] = in[0]->numel();
    out.push_back(std::move(r));
    return FoldStatus::Folded;
  }
  if (op == "ConstantOfShape") {
    std::vector<int64_t> shape = in[0]->toInts();
    if (!validShape(shape))
      return fail("ConstantOfShape needs a non-negative shape of at most 2^28 elements");
    HostTensor value(kFloat, {});
    if (const auto *a = findAttr(node, "value"))
      if (!toHostTensor(a->t(), value, error))
        return FoldStatus::Error;
    if (value.numel() != 1)
      return fail("ConstantOfShape's value must hold one element");
    HostTensor r(value.type, SmallVector<int64_t>(shape.begin(), shape.end()));
    for (int64_t k = 0, n = r.numel(); k < n; ++k)
      r.set(k, value.getF(0));
    if (!value.isFloat())
      std::fill(r.i.begin(), r.i.end(), value.i[0]);
    out.push_back(std::move(r));
    return FoldStatus::Folded;
  }
  if (op == "Range") {
    const HostTensor &s = *in[0], &l = *in[1], &d = *in[2];
    double start = s.getF(0), limit = l.getF(0), delta = d.getF(0);
    if (delta == 0)
      return fail("Range delta must not be 0");
    double count = std::ceil((limit - start) / delta);
    if (!(count < (double)kMaxElements))
      return fail("Range would produce more than 2^28 elements");
    int64_t n = std::max<int64_t>((int64_t)count, 0);
    HostTensor r(s.type, {n});
    for (int64_t k = 0; k < n; ++k) {
      if (r.isFloat())
        r.f[k] = start + k * delta;
      else
        r.i[k] = s.getI(0) + k * d.getI(0);
    }
    out.push_back(std::move(r));
    return FoldStatus::Folded;
  }
  if (op == "CumSum") {
    HostTensor r = *in[0];
    int64_t axis = in[1]->getI(0);
    if (!normalizeAxis(axis, r.rank()))
      return fail("CumSum axis is out of range");
    bool exclusive = attrInt(node, "exclusive", 0), reverse = attrInt(node, "reverse", 0);
    int64_t dim = r.shape[axis], inner = 1, outer = 1;
    for (int64_t d = axis + 1; d < r.rank(); ++d)
      inner *= r.shape[d];
    for (int64_t d = 0; d < axis; ++d)
      outer *= r.shape[d];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t n = 0; n < inner; ++n) {
        double acc = 0;
        for (int64_t j = 0; j < dim; ++j) {
          int64_t jj = reverse ? dim - 1 - j : j;
          int64_t k = (o * dim + jj) * inner + n;
          double v = in[0]->getF(k);
          if (exclusive) {
            r.set(k, acc);
            acc += v;
          } else {
            acc += v;
            r.set(k, acc);
          }
        }
      }
    out.push_back(std::move(r));
    return FoldStatus::Folded;
  }
  if (op == "Concat") {
    int64_t axis = attrInt(node, "axis", 0);
    if (!normalizeAxis(axis, in[0]->rank()))
      return fail("Concat axis is out of range");
    SmallVector<int64_t> shape(in[0]->shape);
    shape[axis] = 0;
    for (const HostTensor *t : in) {
      if (!t || t->rank() != (int64_t)shape.size() || t->isFloat() != in[0]->isFloat())
        return fail("Concat inputs differ in rank or type");
      for (int64_t d = 0; d < t->rank(); ++d)
        if (d != axis && t->shape[d] != shape[d])
          return fail("Concat input shapes differ outside the axis");
      shape[axis] += t->shape[axis];
    }
    HostTensor r(in[0]->type, shape);
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= shape[d];
    int64_t k = 0;
    for (int64_t o = 0; o < outer; ++o)
      for (const HostTensor *t : in) {
        int64_t chunk = t->numel() / std::max<int64_t>(outer, 1);
        for (int64_t j = 0; j < chunk; ++j, ++k) {
          int64_t src = o * chunk + j;
          if (r.isFloat())
            r.f[k] = t->getF(src);
          else
            r.i[k] = t->getI(src);
        }
      }
    out.push_back(std::move(r));
    return FoldStatus::Folded;
  }
  if (op == "Transpose") {
    SmallVector<int64_t> perm;
    if (auto p = attrInts(node, "perm"))
      perm.assign(p->begin(), p->end());
    else
      for (int64_t d = in[0]->rank() - 1; d >= 0; --d)
        perm.push_back(d);
    SmallVector<bool> seen(in[0]->rank(), false);
    if ((int64_t)perm.size() != in[0]->rank())
      return fail("Transpose perm does not match the input rank");
    for (int64_t p : perm) {
      if (p < 0 || p >= in[0]->rank() || seen[p])
        return fail("Transpose perm is not a permutation");
      seen[p] = true;
    }
    out.push_back(transpose(*in[0], perm));
    return FoldStatus::Folded;
  }
  if (op == "Expand") {
    std::vector<int64_t> target = in[1]->toInts();
    SmallVector<int64_t> shape;
    if (!validShape(target))
      return fail("Expand target shape is invalid");
    if (!broadcastShape(in[0]->shape, SmallVector<int64_t>(target.begin(), target.end()), shape) ||
        !validShape(shape))
      return fail("Expand target shape does not broadcast with the input");
    out.push_back(gatherFlat(*in[0], shape, broadcastIndex(in[0]->shape, shape)));
    return FoldStatus::Folded;
  }
  if (op == "Gather") {
    const HostTensor &x = *in[0];
    int64_t axis = attrInt(node, "axis", 0);
    if (!normalizeAxis(axis, x.rank()))
      return fail("Gather axis is out of range");
    std::vector<int64_t> idx = in[1]->toInts();
    SmallVector<int64_t> shape(x.shape.begin(), x.shape.begin() + axis);
    shape.append(in[1]->shape.begin(), in[1]->shape.end());
    shape.append(x.shape.begin() + axis + 1, x.shape.end());
    int64_t outer = 1, inner = 1, dim = x.shape[axis];
    for (int64_t d = 0; d < axis; ++d)
      outer *= x.shape[d];
    for (int64_t d = axis + 1; d < x.rank(); ++d)
      inner *= x.shape[d];
    std::vector<int64_t> flat;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j : idx) {
        if (j < 0)
          j += dim;
        if (j < 0 || j >= dim)
          return fail("Gather index " + std::to_string(j) + " is out of range for dimension " +
                      std::to_string(dim));
        for (int64_t n = 0; n < inner; ++n)
          flat.push_back((o * dim + j) * inner + n);
      }
    out.push_back(gatherFlat(x, shape, flat));
    return FoldStatus::Folded;
  }
  if (op == "GatherElements") {
    const HostTensor &x = *in[0], &ind = *in[1];
    int64_t axis = attrInt(node, "axis", 0);
    if (!normalizeAxis(axis, x.rank()) || ind.rank() != x.rank())
      return fail("GatherElements axis or index rank is invalid");
    SmallVector<int64_t> xs = stridesOf(x.shape), is = stridesOf(ind.shape);
    std::vector<int64_t> flat(ind.numel());
    for (int64_t k = 0; k < ind.numel(); ++k) {
      int64_t rem = k, pos = 0;
      for (int64_t d = 0; d < ind.rank(); ++d) {
        int64_t c = rem / is[d];
        rem %= is[d];
        if (d == axis) {
          c = ind.getI(k);
          if (c < 0)
            c += x.shape[d];
          if (c < 0 || c >= x.shape[d])
            return fail("GatherElements index is out of range");
        }
        pos += c * xs[d];
      }
      flat[k] = pos;
    }
    out.push_back(gatherFlat(x, ind.shape, flat));
    return FoldStatus::Folded;
  }
  if (op == "GatherND") {
    const HostTensor &x = *in[0], &ind = *in[1];
    if (attrInt(node, "batch_dims", 0) != 0)
      return FoldStatus::NotFoldable;
    if (ind.rank() < 1)
      return fail("GatherND indices need rank >= 1");
    int64_t q = ind.shape.back();
    if (q < 1 || q > x.rank())
      return fail("GatherND index depth exceeds the data rank");
    SmallVector<int64_t> shape(ind.shape.begin(), ind.shape.end() - 1);
    shape.append(x.shape.begin() + q, x.shape.end());
    SmallVector<int64_t> xs = stridesOf(x.shape);
    int64_t inner = 1;
    for (int64_t d = q; d < x.rank(); ++d)
      inner *= x.shape[d];
    std::vector<int64_t> flat;
    for (int64_t t = 0, n = ind.numel() / std::max<int64_t>(q, 1); t < n; ++t) {
      int64_t base = 0;
      for (int64_t d = 0; d < q; ++d) {
        int64_t c = ind.getI(t * q + d);
        if (c < 0)
          c += x.shape[d];
        if (c < 0 || c >= x.shape[d])
          return fail("GatherND index is out of range");
        base += c * xs[d];
      }
      for (int64_t j = 0; j < inner; ++j)
        flat.push_back(base + j);
    }
    out.push_back(gatherFlat(x, shape, flat));
    return FoldStatus::Folded;
  }
  if (op == "Slice") {
    const HostTensor &x = *in[0];
    std::vector<int64_t> starts = in[1]->toInts(), ends = in[2]->toInts(), axes, steps;
    if (input(3))
      axes = input(3)->toInts();
    if (input(4))
      steps = input(4)->toInts();
    SliceParams p;
    if (!computeSlice(x.shape, starts, ends, input(3) ? &axes : nullptr,
                      input(4) ? &steps : nullptr, p, error))
      return FoldStatus::Error;
    SmallVector<int64_t> xs = stridesOf(x.shape);
    HostTensor shapeOnly(kInt64, p.count);
    std::vector<int64_t> flat(shapeOnly.numel());
    SmallVector<int64_t> cs = stridesOf(p.count);
    for (size_t k = 0; k < flat.size(); ++k) {
      int64_t rem = k, pos = 0;
      for (int64_t d = 0; d < x.rank(); ++d) {
        int64_t c = rem / cs[d];
        rem %= cs[d];
        pos += (p.start[d] + c * p.step[d]) * xs[d];
      }
      flat[k] = pos;
    }
    out.push_back(gatherFlat(x, p.count, flat));
    return FoldStatus::Folded;
  }
  if (op == "Trilu") {
    HostTensor r = *in[0];
    if (r.rank() < 2)
      return fail("Trilu needs rank >= 2");
    int64_t kk = input(1) ? input(1)->getI(0) : 0;
    bool upper = attrInt(node, "upper", 1);
    int64_t rows = r.shape[r.rank() - 2], cols = r.shape.back();
    for (int64_t k = 0, n = r.numel(); k < n; ++k) {
      int64_t c = k % cols, row = (k / cols) % rows;
      bool keep = upper ? (c - row >= kk) : (c - row <= kk);
      if (!keep)
        r.set(k, 0);
    }
    out.push_back(std::move(r));
    return FoldStatus::Folded;
  }
  return FoldStatus::NotFoldable;
}

FoldStatus zcc::onnx_import::foldNode(const onnx::NodeProto &node, int64_t opset,
                                      ArrayRef<const HostTensor *> inputs,
                                      std::vector<HostTensor> &outputs, std::string &error) {
  Folder folder{node, opset, inputs, outputs, error};
  return folder.run();
}
