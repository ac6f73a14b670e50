//===- OnnxOpsComposite.cpp - ONNX ops made of other zero ops -----------===//
//
// The ONNX ops zcc writes as several zero ops (Clip, Softplus, Tile, Pad,
// OneHot, the scatters, Mod, CumSum, the norms, TopK, ArgMax/ArgMin; Conv
// is in OnnxConv.cpp): their gradients are those ops'. Dispatched from
// OnnxOps.cpp through OnnxOps.def.
//
//===----------------------------------------------------------------------===//
#include "OnnxNodeEmitter.h"

#include "llvm/ADT/StringMap.h"

#include "llvm/ADT/StringSwitch.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

using namespace mlir;
using namespace zcc;
using namespace zcc::onnx_import;
namespace zero = zcc::zero;

//===----------------------------------------------------------------------===//
// Ops made of other zero ops (their gradients are those ops')
//===----------------------------------------------------------------------===//

/// Clip: max(x, min) then min(·, max) (PyTorch's clamp: the gradient passes
/// where min <= x <= max). Bounds from inputs (opset 11+) or attributes.
LogicalResult NodeEmitter::clip() {
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  Type et = typeOf(x).getElementType();
  auto bound = [&](size_t k, const char *attr) -> Value {
    if (has(k)) {
      Value v = in(k);
      return typeOf(v).getRank() == 0 ? castTo(v, et) : Value();
    }
    if (findAttr(node, attr)) // opset < 11
      return splat(et, {}, attrFloat(node, attr, 0));
    return Value(); // no bound
  };
  Value lo = bound(1, "min"), hi = bound(2, "max");
  if ((has(1) && !lo) || (has(2) && !hi))
    return error() << "min and max must be scalars";
  Value y = x;
  if (lo)
    y = zero::MaxOp::create(b, loc, y, lo);
  if (hi)
    y = zero::MinOp::create(b, loc, y, hi);
  results.push_back(y);
  return success();
}

/// Softplus: log(1 + exp(x)), as max(x, 0) + log(1 + exp(-|x|)) (no
/// overflow for large x).
LogicalResult NodeEmitter::softplus() {
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  Type et = typeOf(x).getElementType();
  Value tail =
      zero::ExpOp::create(b, loc, zero::NegOp::create(b, loc, zero::AbsOp::create(b, loc, x)));
  tail = zero::LogOp::create(b, loc, zero::AddOp::create(b, loc, splat(et, {}, 1.0), tail));
  results.push_back(zero::AddOp::create(b, loc, zero::ReluOp::create(b, loc, x), tail));
  return success();
}

/// Tile: x [d0, d1, ...] as [1, d0, 1, d1, ...], expanded to
/// [r0, d0, r1, d1, ...] and read as [r0 d0, r1 d1, ...].
LogicalResult NodeEmitter::tile() {
  Value x = in(0);
  auto repeats = constInts(1, "repeats");
  if (failed(repeats))
    return failure();
  ArrayRef<int64_t> shape = typeOf(x).getShape();
  if (repeats->size() != shape.size())
    return error() << "repeats has " << repeats->size() << " values for a tensor of rank "
                   << shape.size();
  SmallVector<int64_t> split, expanded, out;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t r = (*repeats)[d];
    if (r < 1)
      return error() << "repeat " << r << " of dimension " << d << " is not positive";
    split.append({1, shape[d]});
    expanded.append({r, shape[d]});
    out.push_back(r * shape[d]);
  }
  if (checkedNumel(out) < 0)
    return error() << "the tiled tensor would be impossibly large";
  Value y = reshape(x, split);
  auto t = RankedTensorType::get(expanded, typeOf(x).getElementType());
  if (t != y.getType())
    y = zero::ExpandOp::create(b, loc, t, y);
  results.push_back(reshape(y, out));
  return success();
}

/// Pad (mode "constant"): negative pads slice, positive ones concatenate
/// constants of the pad value, one axis at a time.
LogicalResult NodeEmitter::pad() {
  Value x = in(0);
  std::string mode = attrString(node, "mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return error() << "mode '" << mode << "' is not one of constant, reflect, edge, wrap";
  std::vector<int64_t> pads;
  if (has(1)) {
    auto v = constInts(1, "pads");
    if (failed(v))
      return failure();
    pads = *v;
  } else if (auto a = attrInts(node, "pads")) { // opset < 11
    pads = *a;
  }
  int64_t rank = typeOf(x).getRank();
  std::vector<int64_t> axes;
  if (has(3)) {
    auto v = constInts(3, "axes");
    if (failed(v))
      return failure();
    for (int64_t a : *v) {
      if (!normalizeAxis(a, rank))
        return error() << "axis " << a << " is out of range for rank " << rank;
      axes.push_back(a);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size())
    return error() << "pads has " << pads.size() << " values; " << 2 * axes.size()
                   << " expected (begin and end of each axis)";
  double value = 0;
  if (has(2)) {
    if (!inputs[2]->constant || inputs[2]->constant->numel() != 1)
      return error() << "constant_value must be a constant scalar";
    value = inputs[2]->constant->getF(0);
  } else {
    value = attrFloat(node, "value", 0.0f);
  }
  Type et = typeOf(x).getElementType();
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t axis = axes[k], before = pads[k], after = pads[k + axes.size()];
    SmallVector<int64_t> shape(typeOf(x).getShape());
    if (before < 0 || after < 0) { // crop first
      int64_t begin = std::max<int64_t>(0, -before),
              end = shape[axis] - std::max<int64_t>(0, -after);
      if (end <= begin)
        return error() << "pads crop all of axis " << axis;
      SmallVector<int64_t> start(rank, 0), limit(shape), step(rank, 1);
      start[axis] = begin, limit[axis] = end;
      x = zero::SliceOp::create(b, loc, x, b.getDenseI64ArrayAttr(start),
                                b.getDenseI64ArrayAttr(limit), b.getDenseI64ArrayAttr(step));
      shape[axis] = end - begin;
    }
    if (mode != "constant") {
      // Reflect (mirrored without the edge: PyTorch's reflect), edge
      // (replicate) or wrap (circular): one gather of the positions along
      // the axis, whose gradient sums back into the rows each one read.
      if (before <= 0 && after <= 0)
        continue;
      int64_t len = shape[axis], period = 2 * (len - 1);
      SmallVector<int64_t> rows;
      for (int64_t p = -std::max<int64_t>(0, before); p < len + std::max<int64_t>(0, after); ++p) {
        int64_t r = mode == "edge"   ? std::clamp<int64_t>(p, 0, len - 1)
                    : mode == "wrap" ? ((p % len) + len) % len
                    : period == 0    ? 0
                                     : ((p % period) + period) % period;
        rows.push_back(mode == "reflect" && r >= len ? period - r : r);
      }
      x = takeAlong(x, axis, rows);
      continue;
    }
    SmallVector<Value> parts;
    auto fill = [&](int64_t n) {
      SmallVector<int64_t> s(shape);
      s[axis] = n;
      parts.push_back(splat(et, s, value));
    };
    if (before > 0)
      fill(before);
    parts.push_back(x);
    if (after > 0)
      fill(after);
    if (parts.size() > 1)
      x = zero::ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(axis));
  }
  results.push_back(x);
  return success();
}

/// OneHot: where(unsqueeze(indices, axis) == range(depth), on, off), with
/// the range shaped to broadcast along |axis|. Indices must be in [0, depth)
/// (a negative one, which ONNX counts from the end, selects nothing).
LogicalResult NodeEmitter::oneHot() {
  Value idx = in(0);
  if (failed(requireIndices(idx)))
    return failure();
  if (!has(1) || !inputs[1]->constant || inputs[1]->constant->numel() != 1)
    return error() << "depth must be a constant scalar";
  int64_t depth = (int64_t)inputs[1]->constant->getF(0);
  if (depth < 1)
    return error() << "depth " << depth << " is not positive";
  Value values = in(2);
  if (typeOf(values).getNumElements() != 2)
    return error() << "values must hold [off, on], got " << values.getType();
  int64_t rank = typeOf(idx).getRank() + 1, axis = attrInt(node, "axis", -1);
  if (!normalizeAxis(axis, rank))
    return error() << "axis " << attrInt(node, "axis", -1) << " is out of range for rank " << rank;
  Value hit = oneHotMask(idx, axis, depth);
  auto pick = [&](int64_t k) {
    Value flat = reshape(values, {2});
    return reshape(zero::SliceOp::create(b, loc, flat, b.getDenseI64ArrayAttr({k}),
                                         b.getDenseI64ArrayAttr({k + 1}),
                                         b.getDenseI64ArrayAttr({1})),
                   {});
  };
  results.push_back(zero::WhereOp::create(b, loc, hit, pick(1), pick(0)));
  return success();
}

/// ScatterElements: each update compared with every position along |axis|
/// (a one-hot [indices..., n]), the hits summed over the indices' |axis| and
/// moved back into place; `add` adds the sums to the data, `none` replaces
/// the positions hit (ONNX leaves duplicate indices undefined for `none`:
/// here they add up). Integer tensors (torch.bincount's counts) are scattered
/// in float32, exact up to 2^24, and cast back. Indices and updates must span
/// the data along every other axis; negative indices count from the end.
LogicalResult NodeEmitter::scatterElements() {
  Value data = in(0), idx = in(1), upd = in(2);
  Type it = typeOf(idx).getElementType(), dt = typeOf(data).getElementType();
  if (failed(requireIndices(idx)))
    return failure();
  FailureOr<bool> adds = scatterAdds();
  if (failed(adds))
    return failure();
  if (typeOf(upd).getElementType() != dt || typeOf(upd).getShape() != typeOf(idx).getShape())
    return error() << "updates " << upd.getType() << " must have the data's element type and "
                   << "the indices' shape " << idx.getType();
  int64_t rank = typeOf(data).getRank(), axis = attrInt(node, "axis", 0);
  if (typeOf(idx).getRank() != rank)
    return error() << "indices " << idx.getType() << " must have the data's rank " << rank;
  if (!normalizeAxis(axis, rank))
    return error() << "axis " << attrInt(node, "axis", 0) << " is out of range for rank " << rank;
  ArrayRef<int64_t> ds = typeOf(data).getShape(), is = typeOf(idx).getShape();
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && is[d] != ds[d])
      return error() << "indices " << idx.getType() << " must span data " << data.getType()
                     << " along axis " << d << " (only the scatter axis " << axis << " may differ)";
  int64_t n = ds[axis];
  // Negative indices count from the end (not needed where the importer knows
  // they are not negative: a router's top-k positions).
  if (!(inputs[1]->range && inputs[1]->range->first >= 0)) {
    Value zeroI = splat(it, {}, 0), nI = splat(it, {}, (double)n);
    Value neg = zero::CmpOp::create(b, loc, zero::CmpPredicate::lt, idx, zeroI);
    idx = zero::WhereOp::create(b, loc, neg, zero::AddOp::create(b, loc, idx, nI), idx);
  }
  // hit[p..., j] = (idx[p...] == j), shape is + [n].
  SmallVector<int64_t> idxShape(is);
  idxShape.push_back(1);
  Value hit = oneHotMask(idx, rank, n);
  Type ft = isa<FloatType>(dt) ? dt : b.getF32Type();
  Value u = reshape(castTo(upd, ft), idxShape);
  Value contrib = zero::WhereOp::create(b, loc, hit, u, splat(ft, {}, 0));
  // Sum over the indices' |axis|, then put the new last dimension (n) there.
  auto sumAxis = [&](Value v) {
    Value s = zero::ReduceOp::create(b, loc, zero::ReduceKind::sum, v, {axis}, false);
    SmallVector<int64_t> perm;
    for (int64_t d = 0; d < rank; ++d)
      perm.push_back(d == axis ? rank - 1 : d < axis ? d : d - 1);
    return transposed(s, perm);
  };
  Value summed = sumAxis(contrib);
  Value x = castTo(data, ft), out;
  if (*adds) {
    out = zero::AddOp::create(b, loc, x, summed);
  } else {
    Value any = sumAxis(castTo(hit, ft));
    Value some = zero::CmpOp::create(b, loc, zero::CmpPredicate::gt, any, splat(ft, {}, 0));
    out = zero::WhereOp::create(b, loc, some, summed, x);
  }
  results.push_back(castTo(out, dt));
  return success();
}

/// Mod of tensors computed from the data: r = a - b x trunc(a / b), the
/// truncation a cast to int64 and back; with fmod = 0 (integers only, by the
/// ONNX rule) a remainder whose sign differs from the divisor's gets the
/// divisor added (Python's %). Integers are computed in float32: exact for
/// magnitudes below 2^24.
LogicalResult NodeEmitter::mod() {
  Value a = in(0), d = in(1);
  Type et = typeOf(a).getElementType();
  if (typeOf(d).getElementType() != et ||
      failed(zcc::zero::broadcastShapes(typeOf(a).getShape(), typeOf(d).getShape())))
    return error() << "operands " << a.getType() << " and " << d.getType()
                   << " must have one element type and broadcast";
  bool fmod = attrInt(node, "fmod", 0) != 0, isFloat = isa<FloatType>(et);
  if (isFloat && !fmod)
    return error() << "Mod of floating-point tensors needs fmod = 1 (the ONNX rule)";
  if (!isFloat && !et.isInteger(64) && !et.isInteger(32))
    return error() << "operates on float, int32 or int64 tensors, got " << a.getType();
  Type ft = isFloat ? et : b.getF32Type();
  Value x = castTo(a, ft), y = castTo(d, ft);
  Value q = zero::DivOp::create(b, loc, x, y);
  Value t = castTo(castTo(q, b.getI64Type()), ft);
  Value r = zero::SubOp::create(b, loc, x, zero::MulOp::create(b, loc, y, t));
  if (!fmod) {
    Value wrongSign = zero::CmpOp::create(b, loc, zero::CmpPredicate::lt,
                                          zero::MulOp::create(b, loc, r, y), splat(ft, {}, 0));
    r = zero::WhereOp::create(b, loc, wrongSign, zero::AddOp::create(b, loc, r, y), r);
  }
  results.push_back(castTo(r, et));
  return success();
}

/// ScatterND (reduction none or add): the data as [M, R] (M the positions its
/// first k dimensions index, R the rest), each index tuple as a linear
/// position (in float32, exact below 2^24), a one-hot [N, M] of the N updates'
/// positions, and the updates [N, R] scattered by one matmul (hitᵀ x
/// updates). `none` replaces the rows hit (duplicates, undefined in ONNX,
/// add up), `add` adds to them. Negative indices count from the end.
LogicalResult NodeEmitter::scatterND() {
  Value data = in(0), idx = in(1), upd = in(2);
  Type dt = typeOf(data).getElementType();
  if (failed(requireIndices(idx)))
    return failure();
  FailureOr<bool> adds = scatterAdds();
  if (failed(adds))
    return failure();
  ArrayRef<int64_t> ds = typeOf(data).getShape(), is = typeOf(idx).getShape(),
                    us = typeOf(upd).getShape();
  if (is.empty())
    return error() << "indices must have rank >= 1, got " << idx.getType();
  int64_t k = is.back(), rank = ds.size();
  if (k < 1 || k > rank)
    return error() << "indices' last dimension " << k << " must be in [1, " << rank << "]";
  SmallVector<int64_t> want(is.drop_back());
  want.append(ds.begin() + k, ds.end());
  if (us != ArrayRef<int64_t>(want) || typeOf(upd).getElementType() != dt)
    return error() << "updates " << upd.getType() << " must be indices' leading shape + data's "
                   << "trailing shape, of the data's element type";
  int64_t n = 1, m = 1, r = 1;
  for (int64_t d : is.drop_back())
    n *= d;
  for (int64_t d = 0; d < k; ++d)
    m *= ds[d];
  for (int64_t d = k; d < rank; ++d)
    r *= ds[d];
  if (m > (int64_t(1) << 24))
    return error() << "the " << m << " positions the indices address are more than 2^24";
  Type ft = isa<FloatType>(dt) ? dt : b.getF32Type();
  Type f32 = b.getF32Type();
  // Linear positions: sum_j (idx_j, from the end when negative) x stride_j.
  Value fi = reshape(castTo(idx, f32), {n, k});
  HostTensor dims(kFloat, {1, k}), strides(kFloat, {1, k});
  for (int64_t d = k - 1, stride = 1; d >= 0; stride *= ds[d], --d) {
    dims.set(d, (double)ds[d]);
    strides.set(d, (double)stride);
  }
  Value dimsV = zero::ConstantOp::create(b, loc, imp.toAttr(dims));
  Value neg = zero::CmpOp::create(b, loc, zero::CmpPredicate::lt, fi, splat(f32, {}, 0));
  fi = zero::WhereOp::create(b, loc, neg, zero::AddOp::create(b, loc, fi, dimsV), fi);
  Value lin =
      zero::MulOp::create(b, loc, fi, zero::ConstantOp::create(b, loc, imp.toAttr(strides)));
  lin = zero::ReduceOp::create(b, loc, zero::ReduceKind::sum, lin, {1}, true); // [n, 1]
  HostTensor range(kFloat, {1, m});
  for (int64_t j = 0; j < m; ++j)
    range.set(j, (double)j);
  Value hit = zero::CmpOp::create(b, loc, zero::CmpPredicate::eq, lin,
                                  zero::ConstantOp::create(b, loc, imp.toAttr(range))); // [n, m]
  Value hitF = castTo(hit, ft);
  Value u = reshape(castTo(upd, ft), {n, r});
  Value summed = zero::MatmulOp::create(b, loc, hitF, u, /*transpose_lhs=*/true, false); // [m, r]
  Value x = reshape(castTo(data, ft), {m, r}), out;
  if (*adds) {
    out = zero::AddOp::create(b, loc, x, summed);
  } else {
    Value any = zero::ReduceOp::create(b, loc, zero::ReduceKind::sum, hitF, {0}, false); // [m]
    Value some =
        zero::CmpOp::create(b, loc, zero::CmpPredicate::gt, reshape(any, {m, 1}), splat(ft, {}, 0));
    out = zero::WhereOp::create(b, loc, some, summed, x);
  }
  results.push_back(castTo(reshape(out, ds), dt));
  return success();
}

/// CumSum of a tensor computed from the data (a constant one is folded): a
/// log-step scan, ceil(log2 n) rounds of x + x shifted by 1, 2, 4, ... along
/// the axis (concatenations of zeros and slices, so the gradient follows);
/// `exclusive` shifts the result by one more, `reverse` shifts the other way.
/// Integers (OPT's positions from an attention mask) are summed in float32,
/// exact up to 2^24, and cast back. The sums associate differently from a
/// sequential loop: float results may differ from PyTorch's in the last bits.
LogicalResult NodeEmitter::cumSum() {
  Value x = in(0);
  Type et = typeOf(x).getElementType();
  auto axisV = constInts(1, "axis");
  if (failed(axisV))
    return failure();
  if (axisV->size() != 1)
    return error() << "axis must hold one value";
  int64_t rank = typeOf(x).getRank(), axis = (*axisV)[0];
  if (!normalizeAxis(axis, rank))
    return error() << "axis " << (*axisV)[0] << " is out of range for rank " << rank;
  bool reverse = attrInt(node, "reverse", 0) != 0, exclusive = attrInt(node, "exclusive", 0) != 0;
  Type ft = isa<FloatType>(et) ? et : b.getF32Type();
  if (!isa<FloatType>(et) && !et.isInteger(64) && !et.isInteger(32))
    return error() << "operates on float, int32 or int64 tensors, got " << x.getType();
  x = castTo(x, ft);
  ArrayRef<int64_t> shape = typeOf(x).getShape();
  int64_t n = shape[axis];
  // x shifted by s along the axis (towards the end, or the start if reverse),
  // zeros filling in.
  auto shifted = [&](Value v, int64_t s) -> Value {
    SmallVector<int64_t> zshape(shape), start(rank, 0), limit(shape), step(rank, 1);
    zshape[axis] = s;
    Value zeros = splat(ft, zshape, 0);
    if (reverse)
      start[axis] = s;
    else
      limit[axis] = n - s;
    Value kept = zero::SliceOp::create(b, loc, v, b.getDenseI64ArrayAttr(start),
                                       b.getDenseI64ArrayAttr(limit), b.getDenseI64ArrayAttr(step));
    SmallVector<Value> parts =
        reverse ? SmallVector<Value>{kept, zeros} : SmallVector<Value>{zeros, kept};
    return zero::ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(axis));
  };
  Value y = x;
  for (int64_t s = 1; s < n; s *= 2)
    y = zero::AddOp::create(b, loc, y, shifted(y, s));
  if (exclusive && n > 0)
    y = n == 1 ? splat(ft, shape, 0) : shifted(y, 1);
  results.push_back(castTo(y, et));
  return success();
}

/// |v| ([C] values of channel axis 1) shaped to broadcast over |rank|
/// dimensions: [C, 1, ...].
static SmallVector<int64_t> channelShape(int64_t c, int64_t rank) {
  SmallVector<int64_t> s = {c};
  s.append(rank - 2, 1);
  return s;
}

/// GroupNormalization: x [N, C, ...] as [N, G, C/G ...], a layer norm over
/// the last axis (zero.layer_norm, unit scale), back to [N, C, ...], then
/// the per-channel scale and bias (opset 21; opset 18's per-group ones are
/// repeated over each group's channels). InstanceNormalization (|instance|)
/// is the same with a group per channel.
LogicalResult NodeEmitter::groupNorm(bool instance) {
  Value x = in(0), scale = in(1), bias = in(2);
  if (failed(requireFloat(x)))
    return failure();
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  int64_t groups = instance ? (rank > 1 ? xt.getDimSize(1) : 0) : attrInt(node, "num_groups", 0);
  if (rank < 3 || groups < 1 || xt.getDimSize(1) % groups != 0)
    return error() << "expects x [N, C, ...] with C divisible by num_groups " << groups << ", got "
                   << x.getType();
  int64_t n = xt.getDimSize(0), c = xt.getDimSize(1), per = xt.getNumElements() / (n * groups);
  Type et = xt.getElementType();
  Value grouped = reshape(x, {n, groups, per});
  Value normed = zero::LayerNormOp::create(b, loc, grouped.getType(), grouped,
                                           splat(et, {per}, 1.0), Value(), b.getI64IntegerAttr(2),
                                           b.getF64FloatAttr(attrFloat(node, "epsilon", 1e-5f)));
  Value y = reshape(normed, xt.getShape());
  auto perChannel = [&](Value p) -> FailureOr<Value> {
    int64_t k = typeOf(p).getNumElements();
    if (k == c)
      return reshape(castTo(p, et), channelShape(c, rank));
    if (k == groups) { // opset 18: one value per group
      Value g = reshape(castTo(p, et), {groups, 1});
      auto t = RankedTensorType::get({groups, c / groups}, et);
      return reshape(zero::ExpandOp::create(b, loc, t, g), channelShape(c, rank));
    }
    return error() << "scale/bias " << p.getType() << " hold neither " << c << " channels nor "
                   << groups << " groups";
  };
  auto s = perChannel(scale), bb = perChannel(bias);
  if (failed(s) || failed(bb))
    return failure();
  results.push_back(zero::AddOp::create(b, loc, zero::MulOp::create(b, loc, y, *s), *bb));
  return success();
}

/// BatchNormalization, as PyTorch's BatchNorm (zcc --batch-norm,
/// OnnxImportOptions::BatchNorm):
///  - eval: (x - mean) / sqrt(var + eps) * scale + bias with the given
///    statistics, fixed;
///  - train (default) and sync: the batch's statistics over every axis but
///    the channels (this rank's micro-batch; sync: every data-parallel
///    rank's, two all-reduces of [C]). The running statistics, when they
///    are frozen buffers, are updated in @micro_step as ONNX (and PyTorch,
///    whose momentum is 1 - ONNX's) does: r = momentum r + (1 - momentum) s,
///    with the unbiased batch variance (PyTorch's; ONNX's reference takes
///    the biased one). Evaluation (@forward) normalizes with the running
///    statistics, unless the node itself says training_mode = 1.
/// The optional outputs are the updated running statistics.
LogicalResult NodeEmitter::batchNorm() {
  using Mode = OnnxImportOptions::BatchNorm;
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  if (rank < 2)
    return error() << "expects x [N, C, ...], got " << x.getType();
  int64_t c = xt.getDimSize(1), count = xt.getNumElements() / c;
  Type et = xt.getElementType();
  double eps = attrFloat(node, "epsilon", 1e-5f), momentum = attrFloat(node, "momentum", 0.9f);
  Mode mode = imp.options.batchNorm;
  bool nodeTrains = attrInt(node, "training_mode", 0) != 0;
  SmallVector<Value> params;
  for (size_t k = 1; k < 5; ++k) {
    Value p = in(k);
    if (typeOf(p).getNumElements() != c)
      return error() << "input " << k << " " << p.getType() << " does not hold " << c
                     << " channels";
    params.push_back(reshape(castTo(p, et), channelShape(c, rank)));
  }
  auto affine = [&](Value normed) -> Value {
    return zero::AddOp::create(b, loc, zero::MulOp::create(b, loc, normed, params[0]), params[1]);
  };
  auto evaluated = [&]() -> Value {
    Value inv =
        zero::RsqrtOp::create(b, loc, zero::AddOp::create(b, loc, params[3], splat(et, {}, eps)));
    return affine(zero::MulOp::create(b, loc, zero::SubOp::create(b, loc, x, params[2]), inv));
  };
  if (mode == Mode::Eval) {
    results.push_back(evaluated());
    for (int k = 1; k < node.output_size() && k < 3; ++k)
      results.push_back(in(k + 2));
    return success();
  }
  int64_t ranks = mode == Mode::Sync ? imp.options.worldSize : 1;
  if (count * ranks < 2)
    return error() << "training needs more than one value per channel, got x " << x.getType()
                   << " (PyTorch refuses it too): use a larger micro-batch, or --batch-norm eval";

  // The batch statistics, [1, C, 1, ...]: the mean, then the mean square
  // deviation from it (two passes, as exact as the local ones).
  SmallVector<int64_t> axes = {0};
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  auto overBatch = [&](Value v) -> Value {
    Value local = zero::ReduceOp::create(b, loc, zero::ReduceKind::mean, v, axes, true);
    if (ranks == 1)
      return local;
    return zero::AllReduceOp::create(b, loc, local, zero::CollectiveReduce::avg, ranks);
  };
  Value mean, centered, var;
  auto batchVar = [&] {
    if (!var) {
      mean = overBatch(x);
      centered = zero::SubOp::create(b, loc, x, mean);
      var = overBatch(zero::MulOp::create(b, loc, centered, centered));
    }
    return var;
  };
  Value trained;
  if (ranks == 1) {
    // Channels first, everything else as one row: [C, N S], a layer norm per
    // row (unit scale; its backward is one fused kernel), back.
    SmallVector<int64_t> perm = {1, 0};
    for (int64_t d = 2; d < rank; ++d)
      perm.push_back(d);
    Value t = transposed(x, perm);
    Value rows = reshape(t, {c, count});
    Value normed =
        zero::LayerNormOp::create(b, loc, rows.getType(), rows, splat(et, {count}, 1.0), Value(),
                                  b.getI64IntegerAttr(1), b.getF64FloatAttr(eps));
    trained = affine(transposed(reshape(normed, typeOf(t).getShape()), perm));
  } else {
    Value invBatch =
        zero::RsqrtOp::create(b, loc, zero::AddOp::create(b, loc, batchVar(), splat(et, {}, eps)));
    trained = affine(zero::MulOp::create(b, loc, centered, invBatch));
  }
  results.push_back(nodeTrains ? trained
                               : Value(zero::TrainOrEvalOp::create(b, loc, trained, evaluated())));

  // The running statistics' update. Only buffers are stored: a constant stays
  // as it is; a trainable initializer is a mistake to say.
  SmallVector<Value, 2> updated;
  for (int k = 3; k < 5; ++k) {
    Value old = in(k);
    auto load = old.getDefiningOp<zero::LoadOp>();
    zero::GlobalOp global = load ? imp.globals.lookup(load.getGlobal()) : zero::GlobalOp();
    if (global && global.getTrainable())
      return error() << "its running " << (k == 3 ? "mean" : "variance") << " '"
                     << global.getSymName()
                     << "' is a trainable parameter (the model has no export record saying it is a "
                        "buffer): freeze it with --frozen 'running_(mean|var)', or keep the "
                        "statistics fixed with --batch-norm eval";
    if (!global && node.output_size() <= k - 2)
      continue; // neither stored nor an output
    Value stat = (batchVar(), mean);
    if (k == 4) {
      double n = double(count) * double(ranks);
      stat = zero::MulOp::create(b, loc, var, splat(et, {}, n / (n - 1)));
    }
    Value r = reshape(castTo(old, et), {c});
    Value next = zero::AddOp::create(
        b, loc, zero::MulOp::create(b, loc, r, splat(et, {}, momentum)),
        zero::MulOp::create(b, loc, reshape(stat, {c}), splat(et, {}, 1.0 - momentum)));
    Value stored = reshape(castTo(next, typeOf(old).getElementType()), typeOf(old).getShape());
    if (global) {
      if (!imp.updatedBuffers.insert(global.getSymName()).second)
        return error() << "its running statistics '" << global.getSymName()
                       << "' are updated by an earlier BatchNormalization too; PyTorch updates a "
                          "module's buffers once per forward (give each node its own)";
      zero::StoreOp::create(b, loc, stored, load.getGlobalAttr());
    }
    updated.push_back(stored);
  }
  for (int k = 1; k < node.output_size() && k < 3; ++k)
    results.push_back(updated[k - 1]);
  return success();
}

/// k rounds along |axis| of x (of -x unless |largest|): each finds the
/// extreme, the first position holding it (the last with |last|), the value
/// there as a masked sum (so that the gradient goes to that position only:
/// where and sum have gradients, the selection needs none), and masks the
/// position out for the next round. Positions are float (exact below 2^24),
/// each of x's shape with 1 at |axis|.
void NodeEmitter::selectRounds(Value x, int64_t axis, int64_t k, bool largest, bool last,
                               SmallVectorImpl<Value> &values, SmallVectorImpl<Value> &positions) {
  auto xt = typeOf(x);
  Type et = xt.getElementType();
  int64_t n = xt.getDimSize(axis), rank = xt.getRank();
  SmallVector<int64_t> rangeShape(rank, 1);
  rangeShape[axis] = n;
  HostTensor range(kFloat, {n});
  for (int64_t j = 0; j < n; ++j)
    range.set(j, (double)j);
  Value positionsOf =
      castTo(reshape(zero::ConstantOp::create(b, loc, imp.toAttr(range)), rangeShape), et);
  Value scores = largest ? x : Value(zero::NegOp::create(b, loc, x));
  for (int64_t j = 0; j < k; ++j) {
    Value best = zero::ReduceOp::create(b, loc, zero::ReduceKind::max, scores, {axis}, true);
    Value atBest = zero::CmpOp::create(b, loc, zero::CmpPredicate::eq, scores, best);
    Value candidates =
        zero::WhereOp::create(b, loc, atBest, positionsOf, splat(et, {}, last ? -1.0 : (double)n));
    Value position = zero::ReduceOp::create(
        b, loc, last ? zero::ReduceKind::max : zero::ReduceKind::min, candidates, {axis}, true);
    Value hit = zero::CmpOp::create(b, loc, zero::CmpPredicate::eq, positionsOf, position);
    values.push_back(zero::ReduceOp::create(
        b, loc, zero::ReduceKind::sum, zero::WhereOp::create(b, loc, hit, x, splat(et, {}, 0.0)),
        {axis}, true));
    positions.push_back(position);
    if (j + 1 < k)
      scores = zero::WhereOp::create(b, loc, hit, splat(et, {}, -INFINITY), scores);
  }
}

/// TopK: values and int64 indices, sorted, ties to the lower index (ONNX's
/// order), by k rounds of selectRounds: for the small k of a router (top-2
/// of 8 experts), not for sorting a vocabulary.
LogicalResult NodeEmitter::topK() {
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  auto kv = constInts(1, "K");
  if (failed(kv))
    return failure();
  if (kv->size() != 1)
    return error() << "K must hold one value";
  int64_t rank = typeOf(x).getRank(), axis = attrInt(node, "axis", -1), k = (*kv)[0];
  if (!normalizeAxis(axis, rank))
    return error() << "axis " << attrInt(node, "axis", -1) << " is out of range for rank " << rank;
  int64_t n = typeOf(x).getDimSize(axis);
  if (k < 1 || k > n)
    return error() << "K " << k << " is not in [1, " << n << "]";
  if (k > 64)
    return error() << "K " << k << " is more than 64: TopK is built from K rounds of a max, for "
                   << "the small K of a router";
  if (!attrInt(node, "sorted", 1))
    return error() << "sorted = 0 is not supported";
  SmallVector<Value> values, positions;
  selectRounds(x, axis, k, attrInt(node, "largest", 1) != 0, false, values, positions);
  auto join = [&](SmallVector<Value> &parts) -> Value {
    return parts.size() == 1
               ? parts[0]
               : Value(zero::ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(axis)));
  };
  results.push_back(join(values));
  results.push_back(castTo(join(positions), b.getI64Type()));
  return success();
}

/// ArgMax / ArgMin: one round of selectRounds, int64.
LogicalResult NodeEmitter::argExtreme(bool max) {
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  int64_t rank = typeOf(x).getRank(), axis = attrInt(node, "axis", 0);
  if (!normalizeAxis(axis, rank))
    return error() << "axis " << attrInt(node, "axis", 0) << " is out of range for rank " << rank;
  SmallVector<Value> values, positions;
  selectRounds(x, axis, 1, max, attrInt(node, "select_last_index", 0) != 0, values, positions);
  Value idx = castTo(positions[0], b.getI64Type());
  if (!attrInt(node, "keepdims", 1)) {
    SmallVector<int64_t> shape(typeOf(idx).getShape());
    shape.erase(shape.begin() + axis);
    idx = reshape(idx, shape);
  }
  results.push_back(idx);
  return success();
}
