//===- Layout.cpp - CPU kernels: layout -------------------------------------===//
//
// Layout and copies: broadcast (expand), transpose, slice, concat, split,
// gather (embedding lookups), and the gradients of gather (a scatter-add)
// and slice. Byte copies, so every dtype moves the same way.
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"
#include <algorithm>

#include <cstring>

namespace zrt::cpu {

std::string checkExpand(const KernelCall &c) {
  if (auto e = arity(c, 1, 1); !e.empty())
    return e;
  Shape s;
  if (c.in[0].dtype != c.out[0].dtype || !broadcastShape(c.in[0].shape, c.out[0].shape, s) ||
      s != c.out[0].shape)
    return "cannot broadcast " + describe(c.in[0]) + " to " + describe(c.out[0]);
  return "";
}
Status runExpand(const KernelCall &c) {
  size_t es = dtypeSize(c.out[0].dtype);
  const char *x = c.in[0].data;
  char *y = c.out[0].data;
  forEachBroadcast<1>(c.out[0].shape, {c.in[0].shape},
                      [&](int64_t k, const std::array<int64_t, 1> &off) {
                        std::memcpy(y + k * es, x + off[0] * es, es);
                      });
  return Status::ok();
}

std::string checkTranspose(const KernelCall &c) {
  if (auto e = arity(c, 1, 1); !e.empty())
    return e;
  const Shape &in = c.in[0].shape;
  if (c.ints.size() != in.size() || c.in[0].dtype != c.out[0].dtype)
    return "permutation and operand ranks or types differ";
  std::vector<bool> seen(in.size(), false);
  Shape expected;
  for (int64_t p : c.ints) {
    if (!validAxis(p, in.size()) || seen[p])
      return "not a permutation";
    seen[p] = true;
    expected.push_back(in[p]);
  }
  if (expected != c.out[0].shape)
    return "result " + describe(c.out[0]) + " is not the permuted input";
  return "";
}
Status runTranspose(const KernelCall &c) {
  const Shape &in = c.in[0].shape, &out = c.out[0].shape;
  size_t es = dtypeSize(c.out[0].dtype);
  std::vector<int64_t> inStrides(in.size(), 1), strides(out.size());
  for (int64_t d = (int64_t)in.size() - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * in[d + 1];
  for (size_t d = 0; d < out.size(); ++d)
    strides[d] = inStrides[c.ints[d]];
  std::vector<int64_t> coord(out.size(), 0);
  const char *x = c.in[0].data;
  char *y = c.out[0].data;
  int64_t off = 0;
  for (int64_t k = 0, n = numelOf(out); k < n; ++k) {
    std::memcpy(y + k * es, x + off * es, es);
    for (int64_t d = (int64_t)out.size() - 1; d >= 0; --d) {
      off += strides[d];
      if (++coord[d] < out[d])
        break;
      off -= strides[d] * coord[d];
      coord[d] = 0;
    }
  }
  return Status::ok();
}

std::string checkSlice(const KernelCall &c) {
  if (auto e = arity(c, 1, 1); !e.empty())
    return e;
  const Shape &in = c.in[0].shape, &out = c.out[0].shape;
  if (c.ints.size() != 2 * in.size() || out.size() != in.size() || c.in[0].dtype != c.out[0].dtype)
    return "expects start and stride per dimension";
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t start = c.ints[d], stride = c.ints[in.size() + d];
    if (stride < 1 || start < 0 || (out[d] > 0 && start + (out[d] - 1) * stride >= in[d]) ||
        start > in[d])
      return "slice of dimension " + std::to_string(d) + " is out of bounds";
  }
  return "";
}
Status runSlice(const KernelCall &c) {
  const Shape &in = c.in[0].shape, &out = c.out[0].shape;
  size_t es = dtypeSize(c.out[0].dtype), rank = in.size();
  std::vector<int64_t> inStrides(rank, 1);
  for (int64_t d = (int64_t)rank - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * in[d + 1];
  int64_t base = 0;
  std::vector<int64_t> step(rank);
  for (size_t d = 0; d < rank; ++d) {
    base += c.ints[d] * inStrides[d];
    step[d] = c.ints[rank + d] * inStrides[d];
  }
  std::vector<int64_t> coord(rank, 0);
  int64_t off = base;
  for (int64_t k = 0, n = numelOf(out); k < n; ++k) {
    std::memcpy(c.out[0].data + k * es, c.in[0].data + off * es, es);
    for (int64_t d = (int64_t)rank - 1; d >= 0; --d) {
      off += step[d];
      if (++coord[d] < out[d])
        break;
      off -= step[d] * coord[d];
      coord[d] = 0;
    }
  }
  return Status::ok();
}

/// Shared by concat and split: |parts| stacked along |axis| form |whole|.
std::string checkStacked(const std::vector<TensorRef> &parts, const TensorRef &whole,
                         const std::vector<int64_t> &ints) {
  if (ints.size() != 1 || !validAxis(ints[0], whole.shape.size()))
    return "expects a valid axis";
  int64_t axis = ints[0], total = 0;
  for (const TensorRef &p : parts) {
    if (p.dtype != whole.dtype || p.shape.size() != whole.shape.size())
      return "pieces differ in type or rank from " + describe(whole);
    for (size_t d = 0; d < p.shape.size(); ++d)
      if ((int64_t)d != axis && p.shape[d] != whole.shape[d])
        return "piece " + describe(p) + " does not fit " + describe(whole);
    total += p.shape[axis];
  }
  if (total != whole.shape[axis])
    return "pieces do not add up along the axis";
  return "";
}
/// Copies between the stacked pieces and the whole, in either direction.
void copyStacked(const std::vector<TensorRef> &parts, const TensorRef &whole, int64_t axis,
                 bool toWhole) {
  size_t es = dtypeSize(whole.dtype);
  int64_t outer = 1, inner = es;
  for (int64_t d = 0; d < axis; ++d)
    outer *= whole.shape[d];
  for (size_t d = axis + 1; d < whole.shape.size(); ++d)
    inner *= whole.shape[d];
  int64_t wholeRow = whole.shape[axis] * inner;
  int64_t at = 0;
  for (const TensorRef &p : parts) {
    int64_t row = p.shape[axis] * inner;
    // A part already in place (the memory planner had its producer write
    // into the whole: gradients into their bucket) is not copied.
    bool inPlace = outer == 1 && p.data == whole.data + at;
    for (int64_t o = 0; o < outer && !inPlace; ++o) {
      char *w = whole.data + o * wholeRow + at;
      char *q = p.data + o * row;
      if (toWhole)
        std::memcpy(w, q, row);
      else
        std::memcpy(q, w, row);
    }
    at += row;
  }
}
std::string checkConcat(const KernelCall &c) {
  if (c.in.empty() || c.out.size() != 1)
    return "expects inputs and one output";
  return checkStacked(c.in, c.out[0], c.ints);
}
Status runConcat(const KernelCall &c) {
  copyStacked(c.in, c.out[0], c.ints[0], true);
  return Status::ok();
}
std::string checkSplit(const KernelCall &c) {
  if (c.in.size() != 1 || c.out.empty())
    return "expects one input and outputs";
  return checkStacked(c.out, c.in[0], c.ints);
}
Status runSplit(const KernelCall &c) {
  copyStacked(c.out, c.in[0], c.ints[0], false);
  return Status::ok();
}

std::string checkGather(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  const TensorRef &x = c.in[0], &idx = c.in[1], &y = c.out[0];
  if (c.ints.size() != 1 || !validAxis(c.ints[0], x.shape.size()))
    return "expects a valid axis";
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    return "indices must be int64 or int32, got " + describe(idx);
  int64_t axis = c.ints[0];
  Shape expected(x.shape.begin(), x.shape.begin() + axis);
  expected.insert(expected.end(), idx.shape.begin(), idx.shape.end());
  expected.insert(expected.end(), x.shape.begin() + axis + 1, x.shape.end());
  if (y.dtype != x.dtype || y.shape != expected)
    return "result " + describe(y) + " should be " + shapeStr(expected);
  return "";
}
Status runGather(const KernelCall &c) {
  const TensorRef &x = c.in[0], &idx = c.in[1], &y = c.out[0];
  int64_t axis = c.ints[0], dim = x.shape[axis];
  size_t es = dtypeSize(x.dtype);
  int64_t outer = 1, inner = es;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  int64_t n = idx.numel();
  char *out = y.data;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k) {
      int64_t j = idx.dtype == DType::I64 ? idx.as<int64_t>()[k] : idx.as<int32_t>()[k];
      ZRT_RETURN_IF_ERROR(gatherIndex(j, dim));
      std::memcpy(out, x.data + (o * dim + j) * inner, inner);
      out += inner;
    }
  return Status::ok();
}

std::string checkGatherGrad(const KernelCall &c) {
  if (auto e = arity(c, c.in.size() == 3 ? 3 : 2, 1); !e.empty())
    return e;
  const TensorRef &idx = c.in[0], &g = c.in[1], &dx = c.out[0];
  if (c.in.size() == 3 && (c.in[2].dtype != dx.dtype || c.in[2].shape != dx.shape))
    return "the addend " + describe(c.in[2]) + " should be the result's type " + describe(dx);
  if (c.ints.empty() || c.ints.size() > 2 || !validAxis(c.ints[0], dx.shape.size()))
    return "expects [axis] or [axis, padding_idx]";
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    return "indices must be int64 or int32";
  int64_t axis = c.ints[0];
  Shape expected(dx.shape.begin(), dx.shape.begin() + axis);
  expected.insert(expected.end(), idx.shape.begin(), idx.shape.end());
  expected.insert(expected.end(), dx.shape.begin() + axis + 1, dx.shape.end());
  if (!isFloatStorage(g.dtype) || dx.dtype != g.dtype || g.shape != expected)
    return "dy " + describe(g) + " should be float32 or bfloat16" + shapeStr(expected);
  return "";
}
Status runGatherGradF32(const KernelCall &c) {
  const TensorRef &idx = c.in[0], &g = c.in[1], &dx = c.out[0];
  int64_t axis = c.ints[0], dim = dx.shape[axis], outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= dx.shape[d];
  for (size_t d = axis + 1; d < dx.shape.size(); ++d)
    inner *= dx.shape[d];
  float *out = dx.as<float>();
  const float *pg = g.as<float>();
  std::fill(out, out + dx.numel(), 0.0f);
  // Accumulate in index order: deterministic, and equal to PyTorch's
  // embedding backward up to float rounding of repeated indices.
  int64_t n = idx.numel();
  // PyTorch's nn.Embedding(padding_idx=P): row P gets no gradient.
  int64_t padding = c.ints.size() > 1 ? c.ints[1] : INT64_MIN;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k) {
      int64_t j = idx.dtype == DType::I64 ? idx.as<int64_t>()[k] : idx.as<int32_t>()[k];
      ZRT_RETURN_IF_ERROR(gatherIndex(j, dim));
      if (j == padding)
        continue;
      float *row = out + (o * dim + j) * inner;
      const float *src = pg + (o * n + k) * inner;
      for (int64_t i = 0; i < inner; ++i)
        row[i] += src[i];
    }
  return Status::ok();
}

std::string checkSliceGrad(const KernelCall &c) {
  if (auto e = arity(c, 1, 1); !e.empty())
    return e;
  // The forward slice's check, with the roles of the operands swapped.
  KernelCall fwd;
  fwd.in = {c.out[0]};
  fwd.out = {c.in[0]};
  fwd.ints = c.ints;
  return checkSlice(fwd);
}
Status runSliceGrad(const KernelCall &c) {
  const TensorRef &g = c.in[0], &dx = c.out[0];
  std::memset(dx.data, 0, dx.numel() * dtypeSize(dx.dtype));
  size_t rank = dx.shape.size(), es = dtypeSize(dx.dtype);
  std::vector<int64_t> strides(rank, 1);
  for (int64_t d = (int64_t)rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * dx.shape[d + 1];
  std::vector<int64_t> coord(rank, 0);
  for (int64_t k = 0, n = g.numel(); k < n; ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d)
      off += (c.ints[d] + coord[d] * c.ints[rank + d]) * strides[d];
    std::memcpy(dx.data + off * es, g.data + k * es, es);
    for (int64_t d = (int64_t)rank - 1; d >= 0; --d) {
      if (++coord[d] < g.shape[d])
        break;
      coord[d] = 0;
    }
  }
  return Status::ok();
}

/// gather_grad with an addend (zero-fuse-epilogues folds `add(x,
/// gather_grad(..))`, a tied embedding's two gradients): each row an index
/// touches gets addend + its sum, the sum (in index order, in float32) rounded
/// to the storage type first and the add rounded again, as the two separate
/// kernels did; rows no index touches keep the addend's bits (the separate
/// add turned -0 into +0 there). In place when the result is the addend.
template <typename T> Status runGatherGradAdd(const KernelCall &c) {
  const TensorRef &idx = c.in[0], &g = c.in[1], &acc = c.in[2], &dx = c.out[0];
  int64_t axis = c.ints[0], dim = dx.shape[axis], outer = 1, inner = 1, n = idx.numel();
  for (int64_t d = 0; d < axis; ++d)
    outer *= dx.shape[d];
  for (size_t d = axis + 1; d < dx.shape.size(); ++d)
    inner *= dx.shape[d];
  int64_t padding = c.ints.size() > 1 ? c.ints[1] : INT64_MIN;
  // The positions each row sums, in index order: (row, position) sorted.
  std::vector<std::pair<int64_t, int64_t>> rows;
  rows.reserve(n);
  for (int64_t k = 0; k < n; ++k) {
    int64_t j = idx.dtype == DType::I64 ? idx.as<int64_t>()[k] : idx.as<int32_t>()[k];
    ZRT_RETURN_IF_ERROR(gatherIndex(j, dim));
    if (j != padding)
      rows.push_back({j, k});
  }
  std::sort(rows.begin(), rows.end());
  if (dx.data != acc.data)
    std::memcpy(dx.data, acc.data, dx.numel() * sizeof(T));
  const T *pg = g.as<T>(), *pa = acc.as<T>();
  T *out = dx.as<T>();
  std::vector<float> sum(inner);
  for (int64_t o = 0; o < outer; ++o)
    for (size_t b = 0, e; b < rows.size(); b = e) {
      int64_t j = rows[b].first;
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (e = b; e < rows.size() && rows[e].first == j; ++e) {
        const T *src = pg + (o * n + rows[e].second) * inner;
        for (int64_t i = 0; i < inner; ++i)
          sum[i] += (float)src[i];
      }
      int64_t row = (o * dim + j) * inner;
      for (int64_t i = 0; i < inner; ++i)
        out[row + i] = T((float)pa[row + i] + (float)T(sum[i]));
    }
  return Status::ok();
}

Status runGatherGrad(const KernelCall &c) {
  // Without an addend, bfloat16/float16 operands are widened to float32
  // around the float32 kernel.
  if (c.in.size() == 3)
    return dispatchFloat(c.out[0].dtype, [&](auto t) { return runGatherGradAdd<decltype(t)>(c); });
  return viaFloat32(c, runGatherGradF32);
}

} // namespace zrt::cpu
