//===- ZeroOpsConv.cpp - verifiers of the convolution ops -----------------===//
//
// zero.conv and its gradients (ZeroConvOps.td): one shape rule ties input
// [N, C, S..], filter [M, C / groups, K..] and output [N, M, O..].
//
//===----------------------------------------------------------------------===//
#include "ZeroOpsSupport.h"

using namespace mlir;
using namespace zcc::zero;

int64_t zcc::zero::convOutputSize(int64_t size, int64_t kernel, int64_t stride, int64_t dilation,
                                  int64_t before, int64_t after) {
  int64_t span = dilation * (kernel - 1) + 1, padded = size + before + after;
  return padded < span ? 0 : (padded - span) / stride + 1;
}

/// The shapes of a convolution whose input, filter and output are |x|, |w|
/// and |y|, with |op|'s attributes.
static LogicalResult verifyConv(Operation *op, RankedTensorType x, RankedTensorType w,
                                RankedTensorType y, ArrayRef<int64_t> strides,
                                ArrayRef<int64_t> dilations, ArrayRef<int64_t> pads,
                                int64_t groups) {
  int64_t rank = x.getRank(), spatial = rank - 2;
  if (spatial < 1 || spatial > 3 || w.getRank() != rank || y.getRank() != rank)
    return op->emitOpError("expects input, filter and output of rank 3 to 5 ([N, C, 1-3 "
                           "spatial axes]), got ")
           << x << ", " << w << ", " << y;
  if (x.getElementType() != w.getElementType() || x.getElementType() != y.getElementType())
    return op->emitOpError("input, filter and output differ in element type");
  if ((int64_t)strides.size() != spatial || (int64_t)dilations.size() != spatial ||
      (int64_t)pads.size() != 2 * spatial)
    return op->emitOpError("needs ")
           << spatial << " strides and dilations and " << 2 * spatial << " pads";
  for (int64_t d = 0; d < spatial; ++d)
    if (strides[d] < 1 || dilations[d] < 1 || pads[d] < 0 || pads[d + spatial] < 0)
      return op->emitOpError("strides and dilations must be >= 1 and pads >= 0");
  int64_t n = x.getDimSize(0), c = x.getDimSize(1), m = w.getDimSize(0);
  if (groups < 1 || c % groups || m % groups || w.getDimSize(1) * groups != c)
    return op->emitOpError("groups ")
           << groups << " do not split input channels " << c << " and filters " << m;
  SmallVector<int64_t> out = {n, m};
  for (int64_t d = 0; d < spatial; ++d) {
    int64_t o = convOutputSize(x.getDimSize(2 + d), w.getDimSize(2 + d), strides[d], dilations[d],
                               pads[d], pads[d + spatial]);
    if (o < 1)
      return op->emitOpError("the filter does not fit spatial axis ") << d << " with its padding";
    out.push_back(o);
  }
  if (y.getShape() != ArrayRef<int64_t>(out))
    return op->emitOpError("output ") << y << " should be " << shapeStr(out);
  return success();
}

LogicalResult ConvOp::verify() {
  return verifyConv(*this, tensorOf(getInput()), tensorOf(getFilter()), tensorOf(getResult()),
                    getStrides(), getDilations(), getPads(), getGroups());
}
LogicalResult ConvInputGradOp::verify() {
  return verifyConv(*this, tensorOf(getResult()), tensorOf(getFilter()), tensorOf(getGrad()),
                    getStrides(), getDilations(), getPads(), getGroups());
}
LogicalResult ConvFilterGradOp::verify() {
  return verifyConv(*this, tensorOf(getInput()), tensorOf(getResult()), tensorOf(getGrad()),
                    getStrides(), getDilations(), getPads(), getGroups());
}
