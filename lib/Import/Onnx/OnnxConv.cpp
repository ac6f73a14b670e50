//===- OnnxConv.cpp - ONNX Conv and pooling as zero ops -----------------===//
//
// Conv as a patch embedding (one GEMM) or, in general, zero.conv;
// ConvTranspose as zero.conv_input_grad; MaxPool and AveragePool over the
// kernel's taps: strided slices of the padded input (concatenations)
// combined by elementwise ops, whose gradients train them. Dispatched from
// OnnxOps.cpp through OnnxOps.def.
//
//===----------------------------------------------------------------------===//
#include "OnnxNodeEmitter.h"

#include <algorithm>
#include <cmath>

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
    return convGeneral();
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

namespace {
/// A sliding window over the spatial axes of [N, C, S..] (Conv's and the
/// pools' attributes): per axis the kernel, stride, dilation, padding before
/// and after (auto_pad and ceil_mode resolved) and the output size.
struct Window {
  int64_t spatial = 0;
  SmallVector<int64_t> kernel, stride, dil, before, after, out;
  SmallVector<int64_t> extra; ///< of |after|, what ceil_mode's last window adds
  int64_t taps() const {
    int64_t t = 1;
    for (int64_t k : kernel)
      t *= k;
    return t;
  }
  /// Tap |t|'s position in the kernel, the last axis fastest.
  SmallVector<int64_t> position(int64_t t) const {
    SmallVector<int64_t> k(spatial);
    for (int64_t d = spatial - 1; d >= 0; --d)
      k[d] = t % kernel[d], t /= kernel[d];
    return k;
  }
};

/// |e|'s node's window over |sizes| with |kernel|; ceil_mode (the pools')
/// rounds the output up, a last window that would start in the padding
/// after the input dropped (PyTorch's rule), padding |after| as it needs.
LogicalResult windowOf(NodeEmitter &e, ArrayRef<int64_t> sizes, ArrayRef<int64_t> kernel,
                       Window &w) {
  const int64_t spatial = sizes.size();
  const auto &node = e.node;
  auto strides = attrInts(node, "strides"), pads = attrInts(node, "pads"),
       dilations = attrInts(node, "dilations"), shapeAttr = attrInts(node, "kernel_shape");
  std::string autoPad = attrString(node, "auto_pad", "NOTSET");
  bool ceil = attrInt(node, "ceil_mode", 0) != 0;
  if (shapeAttr && ArrayRef<int64_t>(*shapeAttr) != kernel)
    return e.error() << "kernel_shape does not match the filters' shape";
  w.spatial = spatial;
  w.kernel.assign(kernel.begin(), kernel.end());
  w.stride.assign(spatial, 1), w.dil.assign(spatial, 1);
  w.before.assign(spatial, 0), w.after.assign(spatial, 0), w.out.assign(spatial, 0);
  w.extra.assign(spatial, 0);
  for (int64_t d = 0; d < spatial; ++d) {
    if (strides)
      w.stride[d] = (*strides)[d];
    if (dilations)
      w.dil[d] = (*dilations)[d];
    if (pads)
      w.before[d] = (*pads)[d], w.after[d] = (*pads)[d + spatial];
    int64_t size = sizes[d], span = w.dil[d] * (kernel[d] - 1) + 1;
    if (w.stride[d] < 1 || w.dil[d] < 1 || w.before[d] < 0 || w.after[d] < 0)
      return e.error() << "strides, dilations and pads must be positive (pads >= 0)";
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t o = (size + w.stride[d] - 1) / w.stride[d];
      int64_t total = std::max<int64_t>(0, (o - 1) * w.stride[d] + span - size);
      w.before[d] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.after[d] = total - w.before[d];
    } else if (autoPad == "VALID") {
      w.before[d] = w.after[d] = 0;
    } else if (autoPad != "NOTSET") {
      return e.error() << "auto_pad '" << autoPad
                       << "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID";
    }
    int64_t padded = size + w.before[d] + w.after[d];
    if (padded < span)
      return e.error() << "the kernel (" << span << " wide with dilation) is larger than spatial "
                       << "axis " << d << " with its padding (" << padded << ")";
    w.out[d] = (padded - span + (ceil ? w.stride[d] - 1 : 0)) / w.stride[d] + 1;
    if (ceil && (w.out[d] - 1) * w.stride[d] >= size + w.before[d])
      --w.out[d];
    w.extra[d] = std::max<int64_t>(0, (w.out[d] - 1) * w.stride[d] + span - padded);
    w.after[d] += w.extra[d];
  }
  return success();
}

/// x [N, C, S..] in channels-last [N, S.., C]; |shape| gets its shape.
Value channelsLast(NodeEmitter &e, Value x, SmallVector<int64_t> &shape) {
  auto xt = e.typeOf(x);
  SmallVector<int64_t> toLast = {0};
  shape = {xt.getDimSize(0)};
  for (int64_t d = 2; d < xt.getRank(); ++d)
    toLast.push_back(d), shape.push_back(xt.getDimSize(d));
  toLast.push_back(1), shape.push_back(xt.getDimSize(1));
  return e.transposed(x, toLast);
}

/// Channels-last |xl| (of |shape|, updated) padded with |value| as |w| says.
Value padded(NodeEmitter &e, Value xl, const Window &w, double value, SmallVector<int64_t> &shape) {
  for (int64_t d = 0; d < w.spatial; ++d) {
    if (!w.before[d] && !w.after[d])
      continue;
    SmallVector<Value> parts;
    for (int64_t side = 0; side < 2; ++side) {
      int64_t pad = side ? w.after[d] : w.before[d];
      if (side)
        parts.push_back(xl);
      if (!pad)
        continue;
      SmallVector<int64_t> s(shape);
      s[1 + d] = pad;
      parts.push_back(e.splat(e.typeOf(xl).getElementType(), s, value));
    }
    xl = zero::ConcatOp::create(e.b, e.loc, parts, e.b.getI64IntegerAttr(1 + d));
    shape[1 + d] += w.before[d] + w.after[d];
  }
  return xl;
}

/// x [N, C, S..] in channels-last [N, S.., C], padded with |value| as |w|
/// says; |shape| gets the padded shape.
Value paddedChannelsLast(NodeEmitter &e, Value x, const Window &w, double value,
                         SmallVector<int64_t> &shape) {
  return padded(e, channelsLast(e, x, shape), w, value, shape);
}

/// Tap |t| of |w| over the padded channels-last |xl| (of |shape|): the
/// strided slice [N, O.., C] it reads.
Value tapOf(NodeEmitter &e, Value xl, ArrayRef<int64_t> shape, const Window &w, int64_t t) {
  SmallVector<int64_t> k = w.position(t);
  SmallVector<int64_t> start(shape.size(), 0), end(shape), step(shape.size(), 1);
  for (int64_t d = 0; d < w.spatial; ++d) {
    start[1 + d] = k[d] * w.dil[d];
    end[1 + d] = start[1 + d] + (w.out[d] - 1) * w.stride[d] + 1;
    step[1 + d] = w.stride[d];
  }
  return zero::SliceOp::create(e.b, e.loc, xl, e.b.getDenseI64ArrayAttr(start),
                               e.b.getDenseI64ArrayAttr(end), e.b.getDenseI64ArrayAttr(step));
}

/// [N, O.., C] (or rows [N O.., C]) back to [N, C, O..].
Value channelsFirst(NodeEmitter &e, Value y, int64_t n, const Window &w, int64_t c) {
  SmallVector<int64_t> shape = {n}, toFirst = {0, w.spatial + 1};
  shape.append(w.out.begin(), w.out.end());
  shape.push_back(c);
  for (int64_t d = 0; d < w.spatial; ++d)
    toFirst.push_back(1 + d);
  return e.transposed(e.reshape(y, shape), toFirst);
}

} // namespace

/// Conv in general (1-D, 2-D, 3-D; explicit or auto_pad padding, stride,
/// dilation, groups, bias): zero.conv, channels first, whose kernels are
/// cuDNN's on the GPU and im2col GEMMs on the CPU, and whose gradients are
/// zero.conv_input_grad and zero.conv_filter_grad. Padding that differs
/// before and after an axis (auto_pad SAME, explicit asymmetric pads) is
/// the same on both sides inside the op (cuDNN's convolutions pad
/// symmetrically) and the rest zeros concatenated before it.
LogicalResult NodeEmitter::convGeneral() {
  Value x = in(0), w = in(1);
  auto xt = typeOf(x), wt = typeOf(w);
  Type et = xt.getElementType();
  if (wt.getElementType() != et)
    return error() << "x and w differ in element type: " << x.getType() << ", " << w.getType();
  const int64_t c = xt.getDimSize(1), m = wt.getDimSize(0), cg = wt.getDimSize(1),
                groups = attrInt(node, "group", 1);
  if (groups < 1 || c % groups || m % groups || cg * groups != c)
    return error() << "group " << groups << " does not split x's " << c << " channels into w's "
                   << cg << " per group and its " << m << " filters evenly";
  Window win;
  if (failed(windowOf(*this, xt.getShape().drop_front(2), wt.getShape().drop_front(2), win)))
    return failure();
  SmallVector<int64_t> pads(2 * win.spatial);
  for (int64_t d = 0; d < win.spatial; ++d) {
    int64_t inside = std::min(win.before[d], win.after[d]);
    pads[d] = pads[d + win.spatial] = inside;
    for (int64_t side = 0; side < 2; ++side) {
      int64_t extra = (side ? win.after[d] : win.before[d]) - inside;
      if (!extra)
        continue;
      SmallVector<int64_t> shape(typeOf(x).getShape());
      shape[2 + d] = extra;
      Value zeros = splat(et, shape, 0.0);
      x = zero::ConcatOp::create(b, loc,
                                 side ? SmallVector<Value>{x, zeros} : SmallVector<Value>{zeros, x},
                                 b.getI64IntegerAttr(2 + d));
    }
  }
  SmallVector<int64_t> out = {xt.getDimSize(0), m};
  out.append(win.out.begin(), win.out.end());
  Value y = zero::ConvOp::create(
      b, loc, RankedTensorType::get(out, et), x, w, b.getDenseI64ArrayAttr(win.stride),
      b.getDenseI64ArrayAttr(win.dil), b.getDenseI64ArrayAttr(pads), b.getI64IntegerAttr(groups));
  if (has(2)) {
    Value bias = in(2);
    if (typeOf(bias).getNumElements() != m)
      return error() << "bias " << bias.getType() << " does not have " << m << " values";
    SmallVector<int64_t> shape(win.spatial + 1, 1);
    shape[0] = m;
    y = zero::AddOp::create(b, loc, y, reshape(castTo(bias, et), shape));
  }
  results.push_back(y);
  return success();
}

/// ConvTranspose (a decoder's upsampling; 1-D to 3-D, pads, output_padding,
/// output_shape or auto_pad, stride, dilation, groups, bias): the input
/// gradient of the convolution it transposes, zero.conv_input_grad (cuDNN's
/// backward-data on the GPU), whose own gradients are that convolution and
/// its filter gradient. Padding that differs before and after an axis is the
/// same on both sides inside the op and the rest cropped after.
LogicalResult NodeEmitter::convTranspose() {
  Value x = in(0), w = in(1);
  if (failed(requireFloat(x)) || failed(requireFloat(w)))
    return failure();
  auto xt = typeOf(x), wt = typeOf(w);
  Type et = xt.getElementType();
  const int64_t spatial = xt.getRank() - 2, n = xt.getDimSize(0), c = xt.getDimSize(1),
                groups = attrInt(node, "group", 1);
  if (spatial < 1 || wt.getRank() != xt.getRank() || wt.getElementType() != et)
    return error() << "expects x [N, C, spatial...] and w [C, M/group, kernel...] of one type, got "
                   << x.getType() << " and " << w.getType();
  if (groups < 1 || wt.getDimSize(0) != c || c % groups)
    return error() << "w " << w.getType() << " must hold x's " << c << " channels, split into "
                   << groups << " groups";
  const int64_t m = wt.getDimSize(1) * groups;
  auto strides = attrInts(node, "strides"), pads = attrInts(node, "pads"),
       dilations = attrInts(node, "dilations"), outPad = attrInts(node, "output_padding"),
       outShape = attrInts(node, "output_shape");
  std::string autoPad = attrString(node, "auto_pad", "NOTSET");
  // The input gradient of the convolution of an [N, M, O..] input by w
  // ([C, M/G, K..] is its [M', C'/G, K..]) that outputs x's [N, C, S..].
  SmallVector<int64_t> stride(spatial), dil(spatial), inside(2 * spatial),
      out = {n, m}, full = {n, m}, start(spatial + 2, 0);
  for (int64_t d = 0; d < spatial; ++d) {
    int64_t size = xt.getDimSize(2 + d), k = wt.getDimSize(2 + d);
    int64_t s = strides ? (*strides)[d] : 1, dl = dilations ? (*dilations)[d] : 1;
    int64_t span = dl * (k - 1) + 1, extra = outPad ? (*outPad)[d] : 0;
    int64_t pb = pads ? (*pads)[d] : 0, pe = pads ? (*pads)[d + spatial] : 0;
    if (s < 1 || dl < 1 || pb < 0 || pe < 0 || extra < 0 || extra >= s)
      return error() << "strides and dilations must be positive, pads not negative and "
                        "output_padding below the stride";
    if (outShape || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t want = outShape ? (*outShape)[outShape->size() - spatial + d] : size * s;
      int64_t total = s * (size - 1) + extra + span - want;
      if (total < 0)
        return error() << "output_shape " << want << " on spatial axis " << d
                       << " is larger than the transposed convolution makes";
      pb = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe = total - pb;
    } else if (autoPad != "NOTSET" && autoPad != "VALID") {
      return error() << "auto_pad '" << autoPad
                     << "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID";
    }
    int64_t o = s * (size - 1) + extra + span - pb - pe;
    if (o < 1)
      return error() << "the pads leave spatial axis " << d << " empty";
    // Symmetric padding inside the op (cuDNN's); the rest cropped after.
    int64_t sym = std::min(pb, pe);
    stride[d] = s, dil[d] = dl, inside[d] = inside[d + spatial] = sym;
    out.push_back(o);
    full.push_back(o + (pb - sym) + (pe - sym));
    start[2 + d] = pb - sym;
  }
  Value y = zero::ConvInputGradOp::create(
      b, loc, RankedTensorType::get(full, et), x, w, b.getDenseI64ArrayAttr(stride),
      b.getDenseI64ArrayAttr(dil), b.getDenseI64ArrayAttr(inside), b.getI64IntegerAttr(groups));
  if (full != out) {
    SmallVector<int64_t> end(out), step(spatial + 2, 1);
    for (int64_t d = 0; d < spatial + 2; ++d)
      end[d] += start[d];
    y = zero::SliceOp::create(b, loc, y, b.getDenseI64ArrayAttr(start), b.getDenseI64ArrayAttr(end),
                              b.getDenseI64ArrayAttr(step));
  }
  if (has(2)) {
    Value bias = in(2);
    if (typeOf(bias).getNumElements() != m)
      return error() << "bias " << bias.getType() << " does not have " << m << " values";
    SmallVector<int64_t> shape(spatial + 1, 1);
    shape[0] = m;
    y = zero::AddOp::create(b, loc, y, reshape(castTo(bias, et), shape));
  }
  results.push_back(y);
  return success();
}

/// MaxPool and AveragePool over [N, C, S..]: the maximum (the first of equal
/// values gets the gradient, zero.max's rule: PyTorch's argmax in window
/// order) or the mean over each window's taps, strided slices of the
/// channels-last input padded with -inf (max) or zeros (average). The
/// average divides by the window's elements inside the input, or inside the
/// explicit padding with count_include_pad (never the ceil_mode extension),
/// as PyTorch does: a constant computed here.
LogicalResult NodeEmitter::pool(bool max) {
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  auto xt = typeOf(x);
  const int64_t spatial = xt.getRank() - 2, n = xt.getDimSize(0), c = xt.getDimSize(1);
  auto kernel = attrInts(node, "kernel_shape");
  if (spatial < 1 || !kernel || (int64_t)kernel->size() != spatial)
    return error() << "expects x [N, C, spatial...] and a kernel_shape of one size per spatial "
                   << "axis, got " << x.getType();
  if (max && node.output_size() > 1 && !node.output(1).empty())
    return error() << "the Indices output is not supported (use the pooled values only)";
  Window win;
  if (failed(windowOf(*this, xt.getShape().drop_front(2), *kernel, win)))
    return failure();
  SmallVector<int64_t> shape;
  Value xl = paddedChannelsLast(*this, x, win, max ? -INFINITY : 0.0, shape);
  Value y;
  for (int64_t t = 0; t < win.taps(); ++t) {
    Value tap = tapOf(*this, xl, shape, win, t);
    y = !y    ? tap
        : max ? Value(zero::MaxOp::create(b, loc, y, tap))
              : Value(zero::AddOp::create(b, loc, y, tap));
  }
  if (!max) {
    bool includePad = attrInt(node, "count_include_pad", 0) != 0;
    // count[o..] = the product over axes of the window's elements counted.
    SmallVector<int64_t> countShape = {1};
    countShape.append(win.out.begin(), win.out.end());
    countShape.push_back(1);
    int64_t cells = 1;
    for (int64_t o : win.out)
      cells *= o;
    HostTensor count(kFloat, countShape);
    for (int64_t i = 0; i < cells; ++i) {
      double total = 1;
      for (int64_t d = spatial - 1, r = i; d >= 0; --d) {
        int64_t o = r % win.out[d], size = xt.getDimSize(2 + d);
        r /= win.out[d];
        int64_t lo = 0, hi = size; // the counted range, in unpadded coordinates
        if (includePad)
          lo = -win.before[d], hi = size + win.after[d] - win.extra[d];
        int64_t first = o * win.stride[d] - win.before[d], k = 0;
        for (int64_t j = 0; j < win.kernel[d]; ++j) {
          int64_t at = first + j * win.dil[d];
          k += at >= lo && at < hi;
        }
        total *= k;
      }
      count.set(i, total);
    }
    Value divisor =
        castTo(zero::ConstantOp::create(b, loc, imp.toAttr(count)), xt.getElementType());
    y = zero::DivOp::create(b, loc, y, divisor);
  }
  results.push_back(channelsFirst(*this, y, n, win, c));
  return success();
}

/// GlobalAveragePool and GlobalMaxPool: the mean or maximum over the
/// spatial axes, kept as size 1.
LogicalResult NodeEmitter::globalPool(bool max) {
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < typeOf(x).getRank(); ++d)
    axes.push_back(d);
  if (axes.empty())
    return error() << "expects x [N, C, spatial...], got " << x.getType();
  results.push_back(zero::ReduceOp::create(
      b, loc, max ? zero::ReduceKind::max : zero::ReduceKind::mean, x, axes, /*keepdims=*/true));
  return success();
}
