//===- ZeroOpsMoe.cpp - verifiers of the mixture-of-experts ops -----------===//
//
// zero.moe_route, zero.grouped_matmul and its expert-matrix gradient
// (ZeroMoeOps.td): the shapes that tie routed rows, experts and offsets.
//
//===----------------------------------------------------------------------===//
#include "ZeroOpsSupport.h"

#include <algorithm>

using namespace mlir;
using namespace zcc::zero;

LogicalResult MoeRouteOp::verify() {
  auto experts = tensorOf(getExperts());
  int64_t e = getNumExperts();
  if (e < 1)
    return emitOpError("num_experts ") << e << " must be >= 1";
  if (experts.getRank() != 2)
    return emitOpError("experts ") << experts << " must be [tokens, k]";
  int64_t n = experts.getDimSize(0), k = experts.getDimSize(1), c = getCapacity();
  if (c < 0)
    return emitOpError("capacity ") << c << " must be >= 0 (0: dropless)";
  int64_t rows = c > 0 ? e * c : n * k;
  if (Value first = getFirstExpert()) { // expert parallelism: this rank's experts
    int64_t all = getAllExperts();
    if (c > 0)
      return emitOpError("routes a rank's experts (first_expert) without a capacity");
    if (tensorOf(first).getShape() != ArrayRef<int64_t>{1})
      return emitOpError("first_expert ") << first.getType() << " should hold one value";
    if (all < e || all % e)
      return emitOpError("all_experts ")
             << all << " must be a multiple of the rank's num_experts " << e;
    rows = n * std::min(k, e);
  } else if (getAllExperts() != 0 && getAllExperts() != e) {
    return emitOpError("all_experts ") << getAllExperts() << " needs first_expert";
  }
  auto expect = [&](Value v, ArrayRef<int64_t> shape, StringRef what) -> LogicalResult {
    if (tensorOf(v).getShape() != shape)
      return emitOpError(what) << " " << v.getType() << " should be " << shapeStr(shape);
    return success();
  };
  if (failed(expect(getTokens(), {rows}, "tokens")) ||
      failed(expect(getPositions(), {n, k}, "positions")) ||
      failed(expect(getOffsets(), {e + 1}, "offsets")))
    return failure();
  return success();
}

namespace {
/// The checks grouped_matmul and its gradient share: rows [M, K] against
/// offsets [E + 1] and expert matrices |rhs| [E, K, N] ([E, N, K] when
/// |transposed|); on success |k| and |n|.
LogicalResult verifyGrouped(Operation *op, RankedTensorType lhs, RankedTensorType rhs,
                            RankedTensorType offsets, bool transposed, int64_t &k, int64_t &n) {
  if (lhs.getRank() != 2)
    return op->emitOpError("rows ") << lhs << " must be [rows, K]";
  if (rhs.getRank() != 3)
    return op->emitOpError("expert matrices ") << rhs << " must be [experts, K, N]";
  if (offsets.getRank() != 1 || offsets.getDimSize(0) != rhs.getDimSize(0) + 1)
    return op->emitOpError("offsets ")
           << offsets << " should hold " << rhs.getDimSize(0) + 1 << " values (experts + 1)";
  k = rhs.getDimSize(transposed ? 2 : 1);
  n = rhs.getDimSize(transposed ? 1 : 2);
  if (lhs.getDimSize(1) != k)
    return op->emitOpError("rows ") << lhs << " do not multiply expert matrices " << rhs
                                    << (transposed ? " (transposed)" : "");
  if (lhs.getElementType() != rhs.getElementType())
    return op->emitOpError("rows and expert matrices differ in element type");
  return success();
}
} // namespace

LogicalResult GroupedMatmulOp::verify() {
  auto lhs = tensorOf(getLhs()), rhs = tensorOf(getRhs());
  int64_t k = 0, n = 0;
  if (failed(verifyGrouped(*this, lhs, rhs, tensorOf(getOffsets()), getTransposeRhs(), k, n)))
    return failure();
  SmallVector<int64_t> expected = {lhs.getDimSize(0), n};
  if (getType().getShape() != ArrayRef<int64_t>(expected) ||
      getType().getElementType() != lhs.getElementType())
    return emitOpError("result ") << getType() << " should be " << shapeStr(expected);
  return success();
}

LogicalResult GroupedMatmulRhsGradOp::verify() {
  auto lhs = tensorOf(getLhs()), grad = tensorOf(getGrad()), out = getType();
  int64_t k = 0, n = 0;
  if (failed(verifyGrouped(*this, lhs, out, tensorOf(getOffsets()), getTransposeRhs(), k, n)))
    return failure();
  if (grad.getShape() != ArrayRef<int64_t>{lhs.getDimSize(0), n} ||
      grad.getElementType() != lhs.getElementType())
    return emitOpError("grad ") << grad << " should be " << shapeStr({lhs.getDimSize(0), n});
  return success();
}
