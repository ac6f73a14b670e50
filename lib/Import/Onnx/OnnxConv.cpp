//===- OnnxConv.cpp - ONNX Conv as zero ops -----------------------------===//
//
// Conv as a patch embedding (one GEMM) or, in general, as a sum over the
// kernel's taps of strided slices times the tap's filters: slices,
// concatenations (padding) and matmuls, whose gradients train it.
// Dispatched from OnnxOps.cpp through OnnxOps.def.
//
//===----------------------------------------------------------------------===//
#include "OnnxNodeEmitter.h"

#include <algorithm>

using namespace mlir;
using namespace zcc;
using namespace zcc::onnx_import;
namespace zero = zcc::zero;

/// Conv as a patch embedding (a vision transformer's): strides equal to the
/// kernel, no padding or dilation, one group. x [N, C, S1.., Sk] is cut into
/// patches ([N, S1/K1, .., C, K1, ..] as rows of C K1..Kk values), one
/// matmul with the weights [M, C K1..Kk] (+ bias), and laid back as
/// [N, M, S1/K1, ..].
LogicalResult NodeEmitter::conv() {
  Value x = in(0), w = in(1);
  if (failed(requireFloat(x)) || failed(requireFloat(w)))
    return failure();
  auto xt = typeOf(x), wt = typeOf(w);
  int64_t spatial = xt.getRank() - 2;
  if (spatial < 1 || wt.getRank() != xt.getRank())
    return error() << "expects x [N, C, spatial...] and w [M, C, kernel...], got " << x.getType()
                   << " and " << w.getType();
  SmallVector<int64_t> kernel(wt.getShape().drop_front(2));
  auto strides = attrInts(node, "strides"), pads = attrInts(node, "pads"),
       dilations = attrInts(node, "dilations");
  std::string autoPad = attrString(node, "auto_pad", "NOTSET");
  bool patches = attrInt(node, "group", 1) == 1 && (autoPad == "NOTSET" || autoPad == "VALID") &&
                 wt.getDimSize(1) == xt.getDimSize(1);
  for (int64_t d = 0; d < spatial && patches; ++d) {
    int64_t k = kernel[d], s = strides ? (*strides)[d] : 1;
    patches &= s == k && xt.getDimSize(2 + d) % k == 0 && (!dilations || (*dilations)[d] == 1) &&
               (!pads || ((*pads)[d] == 0 && (*pads)[d + spatial] == 0));
  }
  if (!patches)
    return convTaps();
  int64_t n = xt.getDimSize(0), c = xt.getDimSize(1), m = wt.getDimSize(0);
  // x -> [N, C, S1/K1, K1, S2/K2, K2, ..] -> [N, S1/K1, S2/K2, .., C, K1, K2, ..]
  SmallVector<int64_t> cut = {n, c}, grid, permX = {0};
  for (int64_t d = 0; d < spatial; ++d) {
    cut.append({xt.getDimSize(2 + d) / kernel[d], kernel[d]});
    grid.push_back(xt.getDimSize(2 + d) / kernel[d]);
    permX.push_back(2 + 2 * d);
  }
  permX.push_back(1);
  for (int64_t d = 0; d < spatial; ++d)
    permX.push_back(3 + 2 * d);
  int64_t cells = 1, patch = c;
  for (int64_t d = 0; d < spatial; ++d)
    cells *= grid[d], patch *= kernel[d];
  Value rows = reshape(transposed(reshape(x, cut), permX), {n * cells, patch});
  Value y = zero::MatmulOp::create(b, loc, rows, reshape(w, {m, patch}), false, true);
  if (has(2)) {
    Value bias = in(2);
    if (typeOf(bias).getNumElements() != m)
      return error() << "bias " << bias.getType() << " does not have " << m << " values";
    y = zero::AddOp::create(b, loc, y, reshape(castTo(bias, typeOf(y).getElementType()), {m}));
  }
  // [N cells, M] -> [N, S1/K1, .., M] -> [N, M, S1/K1, ..]
  SmallVector<int64_t> out = {n}, permY = {0, spatial + 1};
  out.append(grid.begin(), grid.end());
  out.push_back(m);
  for (int64_t d = 0; d < spatial; ++d)
    permY.push_back(1 + d);
  results.push_back(transposed(reshape(y, out), permY));
  return success();
}

/// Conv in general (1-D, 2-D, 3-D; explicit or auto_pad padding, stride,
/// dilation, groups, bias) as a sum over the kernel's taps: x in channels-last
/// [N, S.., C], zero-padded (concatenations), then for each tap a strided
/// slice [N, O.., C] as rows [N O.., C] times the tap's weights [M, C/G]:
/// one GEMM with one group, a per-channel product for a depthwise filter
/// (C/G = 1, one output a group), a batched GEMM over the groups otherwise.
/// The gradients are those ops' own (slices, concatenations, matmuls), so
/// input, weight and bias train with no rule of their own; the result goes
/// back to [N, M, O..].
LogicalResult NodeEmitter::convTaps() {
  Value x = in(0), w = in(1);
  auto xt = typeOf(x), wt = typeOf(w);
  Type et = xt.getElementType();
  if (wt.getElementType() != et)
    return error() << "x and w differ in element type: " << x.getType() << ", " << w.getType();
  const int64_t spatial = xt.getRank() - 2, n = xt.getDimSize(0), c = xt.getDimSize(1),
                m = wt.getDimSize(0), cg = wt.getDimSize(1), groups = attrInt(node, "group", 1);
  if (groups < 1 || c % groups || m % groups || cg * groups != c)
    return error() << "group " << groups << " does not split x's " << c << " channels into w's "
                   << cg << " per group and its " << m << " filters evenly";
  auto strides = attrInts(node, "strides"), pads = attrInts(node, "pads"),
       dilations = attrInts(node, "dilations"), shapeAttr = attrInts(node, "kernel_shape");
  std::string autoPad = attrString(node, "auto_pad", "NOTSET");
  SmallVector<int64_t> kernel(wt.getShape().drop_front(2)), stride(spatial, 1), dil(spatial, 1),
      before(spatial, 0), after(spatial, 0), out(spatial);
  if (shapeAttr && ArrayRef<int64_t>(*shapeAttr) != ArrayRef<int64_t>(kernel))
    return error() << "kernel_shape does not match w " << w.getType();
  for (int64_t d = 0; d < spatial; ++d) {
    if (strides)
      stride[d] = (*strides)[d];
    if (dilations)
      dil[d] = (*dilations)[d];
    if (pads)
      before[d] = (*pads)[d], after[d] = (*pads)[d + spatial];
    int64_t size = xt.getDimSize(2 + d), span = dil[d] * (kernel[d] - 1) + 1;
    if (stride[d] < 1 || dil[d] < 1 || before[d] < 0 || after[d] < 0)
      return error() << "strides, dilations and pads must be positive (pads >= 0)";
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t o = (size + stride[d] - 1) / stride[d];
      int64_t total = std::max<int64_t>(0, (o - 1) * stride[d] + span - size);
      before[d] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      after[d] = total - before[d];
    } else if (autoPad == "VALID") {
      before[d] = after[d] = 0;
    } else if (autoPad != "NOTSET") {
      return error() << "auto_pad '" << autoPad
                     << "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID";
    }
    out[d] = (size + before[d] + after[d] - span) / stride[d] + 1;
    if (size + before[d] + after[d] < span)
      return error() << "the kernel (" << span << " wide with dilation) is larger than spatial "
                     << "axis " << d << " with its padding (" << size + before[d] + after[d] << ")";
  }
  // x [N, C, S..] -> [N, S.., C], padded with zeros.
  SmallVector<int64_t> toLast = {0}, shape = {n};
  for (int64_t d = 0; d < spatial; ++d)
    toLast.push_back(2 + d), shape.push_back(xt.getDimSize(2 + d));
  toLast.push_back(1), shape.push_back(c);
  Value xl = transposed(x, toLast);
  for (int64_t d = 0; d < spatial; ++d) {
    if (!before[d] && !after[d])
      continue;
    SmallVector<Value> parts;
    for (int64_t pad : {before[d], int64_t(-1), after[d]}) {
      if (pad < 0) {
        parts.push_back(xl);
        continue;
      }
      SmallVector<int64_t> s(shape);
      s[1 + d] = pad;
      if (pad)
        parts.push_back(splat(et, s, 0.0));
    }
    xl = zero::ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(1 + d));
    shape[1 + d] += before[d] + after[d];
  }
  // w [M, C/G, K..] -> [K.., M, C/G]: a tap's weights are contiguous.
  SmallVector<int64_t> tapsFirst;
  for (int64_t d = 0; d < spatial; ++d)
    tapsFirst.push_back(2 + d);
  tapsFirst.append({0, 1});
  Value wl = transposed(w, tapsFirst);
  int64_t rows = n, taps = 1;
  for (int64_t d = 0; d < spatial; ++d)
    rows *= out[d], taps *= kernel[d];
  const int64_t mg = m / groups;
  const bool depthwise = cg == 1 && mg == 1;
  Value y;
  for (int64_t t = 0; t < taps; ++t) {
    SmallVector<int64_t> k(spatial); // tap t's kernel position, last axis fastest
    for (int64_t d = spatial - 1, r = t; d >= 0; --d)
      k[d] = r % kernel[d], r /= kernel[d];
    SmallVector<int64_t> start(1 + spatial + 1, 0), end(shape), step(1 + spatial + 1, 1);
    for (int64_t d = 0; d < spatial; ++d) {
      start[1 + d] = k[d] * dil[d];
      end[1 + d] = start[1 + d] + (out[d] - 1) * stride[d] + 1;
      step[1 + d] = stride[d];
    }
    Value tap = zero::SliceOp::create(b, loc, xl, b.getDenseI64ArrayAttr(start),
                                      b.getDenseI64ArrayAttr(end), b.getDenseI64ArrayAttr(step));
    Value lhs = reshape(tap, {rows, c});
    SmallVector<int64_t> wStart(spatial + 2, 0), wEnd(typeOf(wl).getShape()), wStep(spatial + 2, 1);
    for (int64_t d = 0; d < spatial; ++d)
      wStart[d] = k[d], wEnd[d] = k[d] + 1;
    Value wTap = zero::SliceOp::create(b, loc, wl, b.getDenseI64ArrayAttr(wStart),
                                       b.getDenseI64ArrayAttr(wEnd), b.getDenseI64ArrayAttr(wStep));
    Value term;
    if (groups == 1) {
      term = zero::MatmulOp::create(b, loc, lhs, reshape(wTap, {m, c}), false, true);
    } else if (depthwise) {
      term = zero::MulOp::create(b, loc, lhs, reshape(wTap, {m}));
    } else { // [G, rows, C/G] x [G, M/G, C/G]^T -> [G, rows, M/G] -> [rows, M]
      Value grouped = transposed(reshape(lhs, {rows, groups, cg}), {1, 0, 2});
      Value prod =
          zero::MatmulOp::create(b, loc, grouped, reshape(wTap, {groups, mg, cg}), false, true);
      term = reshape(transposed(prod, {1, 0, 2}), {rows, m});
    }
    y = y ? Value(zero::AddOp::create(b, loc, y, term)) : term;
  }
  if (has(2)) {
    Value bias = in(2);
    if (typeOf(bias).getNumElements() != m)
      return error() << "bias " << bias.getType() << " does not have " << m << " values";
    y = zero::AddOp::create(b, loc, y, reshape(castTo(bias, et), {m}));
  }
  // [N O.., M] -> [N, O.., M] -> [N, M, O..]
  SmallVector<int64_t> outShape = {n}, toFirst = {0, spatial + 1};
  outShape.append(out.begin(), out.end());
  outShape.push_back(m);
  for (int64_t d = 0; d < spatial; ++d)
    toFirst.push_back(1 + d);
  results.push_back(transposed(reshape(y, outShape), toFirst));
  return success();
}
