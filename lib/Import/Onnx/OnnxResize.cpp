//===- OnnxResize.cpp - ONNX Resize as gathers along each axis -----------===//
//
// Resize (nearest and linear upsampling or downsampling: PyTorch's
// F.interpolate and nn.Upsample) is separable: along each resized axis,
// every output position reads one input row (nearest) or two rows blended
// by constant weights (linear). Both positions and weights are known at
// compile time, so each axis is one or two zero.gathers with constant
// indices (and a multiply-add); the gathers' gradients add every output
// row's adjoint back into the rows it read. Dispatched from OnnxOps.cpp
// through OnnxOps.def.
//
//===----------------------------------------------------------------------===//
#include "OnnxNodeEmitter.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace zcc;
using namespace zcc::onnx_import;
namespace zero = zcc::zero;

Value NodeEmitter::takeAlong(Value x, int64_t axis, ArrayRef<int64_t> rows) {
  HostTensor idx(kInt64, {(int64_t)rows.size()});
  idx.i.assign(rows.begin(), rows.end());
  Value indices = zero::ConstantOp::create(b, loc, imp.toAttr(idx));
  return zero::GatherOp::create(b, loc, x, indices, b.getI64IntegerAttr(axis), nullptr);
}

namespace {
/// Where output position |out| of |outLen| reads along an axis of |inLen|
/// (ONNX's coordinate_transformation_mode; |scale| is the given scale, or
/// outLen / inLen when sizes were given).
double sourceCoordinate(StringRef mode, int64_t out, int64_t inLen, int64_t outLen, double scale) {
  double x = (double)out;
  if (mode == "asymmetric")
    return x / scale;
  if (mode == "align_corners")
    return outLen == 1 ? 0.0 : x * double(inLen - 1) / double(outLen - 1);
  if (mode == "pytorch_half_pixel")
    return outLen > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (mode == "half_pixel_symmetric") {
    double adjustment = double(outLen) / (scale * double(inLen));
    double center = double(inLen) / 2;
    return center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
  }
  return (x + 0.5) / scale - 0.5; // half_pixel
}

/// ONNX's nearest_mode rounding of a source coordinate.
int64_t nearestRow(StringRef mode, double x) {
  double f = std::floor(x);
  bool half = x - f == 0.5;
  if (mode == "floor")
    return (int64_t)f;
  if (mode == "ceil")
    return (int64_t)std::ceil(x);
  if (mode == "round_prefer_ceil")
    return half ? (int64_t)f + 1 : (int64_t)std::floor(x + 0.5);
  return half ? (int64_t)f : (int64_t)std::floor(x + 0.5); // round_prefer_floor
}
} // namespace

/// Resize: mode nearest or linear; scales or sizes (with `axes`, opset 18);
/// coordinate_transformation_mode half_pixel, pytorch_half_pixel,
/// align_corners, asymmetric, half_pixel_symmetric; every nearest_mode.
/// Source positions outside the input read its edge (ONNX's reference and
/// PyTorch's clamping agree). Cubic, tf_crop_and_resize, antialiased
/// downsampling and aspect-ratio policies other than stretch are refused.
LogicalResult NodeEmitter::resize() {
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  std::string mode = attrString(node, "mode", "nearest");
  std::string coord = attrString(node, "coordinate_transformation_mode", "half_pixel");
  std::string nearest = attrString(node, "nearest_mode", "round_prefer_floor");
  if (mode != "nearest" && mode != "linear")
    return error() << "mode '" << mode << "' is not supported: nearest and linear are "
                   << "(bicubic upsampling is not implemented)";
  if (coord != "half_pixel" && coord != "pytorch_half_pixel" && coord != "align_corners" &&
      coord != "asymmetric" && coord != "half_pixel_symmetric")
    return error() << "coordinate_transformation_mode '" << coord
                   << "' is not supported (half_pixel, pytorch_half_pixel, align_corners, "
                      "asymmetric and half_pixel_symmetric are)";
  if (nearest != "round_prefer_floor" && nearest != "round_prefer_ceil" && nearest != "floor" &&
      nearest != "ceil")
    return error() << "nearest_mode '" << nearest << "' is not an ONNX nearest mode";
  std::string policy = attrString(node, "keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch")
    return error() << "keep_aspect_ratio_policy '" << policy << "' is not supported (stretch is)";

  // The axes the scales or sizes name (all of them by default).
  SmallVector<int64_t> axes;
  if (auto a = attrInts(node, "axes")) {
    for (int64_t axis : *a) {
      if (!normalizeAxis(axis, rank))
        return error() << "axis " << axis << " is out of range for rank " << rank;
      axes.push_back(axis);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  // Opset 10 reads scales from input 1; later opsets from 2, sizes from 3.
  // An empty tensor stands for an absent input.
  auto given = [&](size_t k) { return has(k) && typeOf(in(k)).getNumElements() > 0; };
  size_t scalesInput = imp.opset >= 11 ? 2 : 1;
  SmallVector<double> scales(rank, 1.0);
  SmallVector<int64_t> outShape(xt.getShape());
  if (imp.opset >= 11 && given(3)) {
    auto sizes = constInts(3, "sizes");
    if (failed(sizes))
      return failure();
    if (sizes->size() != axes.size())
      return error() << "sizes has " << sizes->size() << " values for " << axes.size() << " axes";
    for (size_t k = 0; k < axes.size(); ++k) {
      if ((*sizes)[k] < 1)
        return error() << "size " << (*sizes)[k] << " of axis " << axes[k] << " is not positive";
      outShape[axes[k]] = (*sizes)[k];
      scales[axes[k]] = double((*sizes)[k]) / double(xt.getDimSize(axes[k]));
    }
  } else if (given(scalesInput)) {
    if (!inputs[scalesInput]->constant)
      return error() << "scales (input " << scalesInput
                     << ") must be known at compile time; zcc compiles static shapes";
    const HostTensor &s = *inputs[scalesInput]->constant;
    if ((size_t)s.numel() != axes.size())
      return error() << "scales has " << s.numel() << " values for " << axes.size() << " axes";
    for (size_t k = 0; k < axes.size(); ++k) {
      double v = s.getF(k);
      if (!(v > 0))
        return error() << "scale " << v << " of axis " << axes[k] << " is not positive";
      scales[axes[k]] = v;
      outShape[axes[k]] = (int64_t)std::floor(double(xt.getDimSize(axes[k])) * v);
      if (outShape[axes[k]] < 1)
        return error() << "scale " << v << " leaves axis " << axes[k] << " empty";
    }
  } else {
    return error() << "needs scales or sizes";
  }
  if (attrInt(node, "antialias", 0))
    for (int64_t d = 0; d < rank; ++d)
      if (outShape[d] < xt.getDimSize(d))
        return error() << "antialiased downsampling is not supported";

  Type et = xt.getElementType();
  for (int64_t d = 0; d < rank; ++d) {
    int64_t inLen = xt.getDimSize(d), outLen = outShape[d];
    SmallVector<int64_t> lo(outLen), hi(outLen);
    SmallVector<double> weightHi(outLen);
    bool identity = inLen == outLen;
    for (int64_t o = 0; o < outLen; ++o) {
      double src = sourceCoordinate(coord, o, inLen, outLen, scales[d]);
      if (mode == "nearest") {
        lo[o] = std::clamp<int64_t>(nearestRow(nearest, src), 0, inLen - 1);
        identity &= lo[o] == o;
        continue;
      }
      double f = std::floor(src);
      lo[o] = std::clamp<int64_t>((int64_t)f, 0, inLen - 1);
      hi[o] = std::clamp<int64_t>((int64_t)f + 1, 0, inLen - 1);
      weightHi[o] = lo[o] == hi[o] ? 0.0 : src - f;
      identity &= lo[o] == o && weightHi[o] == 0.0;
    }
    if (identity)
      continue;
    Value low = takeAlong(x, d, lo);
    if (mode == "nearest") {
      x = low;
      continue;
    }
    // x[lo] (1 - w) + x[hi] w, as PyTorch blends.
    SmallVector<int64_t> wShape(rank, 1);
    wShape[d] = outLen;
    HostTensor w0(kFloat, {outLen}), w1(kFloat, {outLen});
    for (int64_t o = 0; o < outLen; ++o)
      w0.set(o, 1.0 - weightHi[o]), w1.set(o, weightHi[o]);
    auto weights = [&](const HostTensor &w) {
      return castTo(reshape(zero::ConstantOp::create(b, loc, imp.toAttr(w)), wShape), et);
    };
    Value high = takeAlong(x, d, hi);
    x = zero::AddOp::create(b, loc, zero::MulOp::create(b, loc, low, weights(w0)),
                            zero::MulOp::create(b, loc, high, weights(w1)));
  }
  results.push_back(x);
  return success();
}
