//===- PropagateTransposes.cpp - sink transposes until they cancel --------===//
//
// A transpose is a pass over memory that computes nothing. Exported models
// have many that a layout choice makes unnecessary: Llama transposes q and k
// to [B, H, S, D], applies RoPE there (slices, a negation, a concatenation,
// products with cos/sin, a sum) and, once attention is fused, transposes the
// result back to [B, S, H, D]. Sinking the first transpose below the
// layout-agnostic ops brings it next to the second, and the two compose to
// the identity. Autodiff then differentiates the transpose-free forward, so
// the backward has none either. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace zcc {
#define GEN_PASS_DEF_ZEROPROPAGATETRANSPOSES
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

namespace {

SmallVector<int64_t> inverse(ArrayRef<int64_t> perm) {
  SmallVector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[perm[i]] = i;
  return inv;
}

RankedTensorType permuted(RankedTensorType t, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(t.getDimSize(p));
  return RankedTensorType::get(shape, t.getElementType());
}

/// Whether permuting |t| by |perm| keeps its elements in memory order: only
/// dimensions of size 1 move relative to the others (then it is a reshape).
bool permutesOnlyUnitDims(RankedTensorType t, ArrayRef<int64_t> perm) {
  int64_t last = -1;
  for (int64_t p : perm) {
    if (t.getDimSize(p) == 1)
      continue;
    if (p < last)
      return false;
    last = p;
  }
  return true;
}

/// |v| in the layout permuted by |perm|, without moving data: the input of a
/// transpose by |perm|'s inverse, or a reshape where only unit dimensions
/// move. Null when neither applies.
Value cheaplyPermuted(PatternRewriter &rewriter, Location loc, Value v, ArrayRef<int64_t> perm) {
  auto t = cast<RankedTensorType>(v.getType());
  if (auto tr = v.getDefiningOp<TransposeOp>();
      tr && tr.getPermutation() == ArrayRef(inverse(perm)))
    return tr.getInput();
  if (t.getRank() != (int64_t)perm.size() || !permutesOnlyUnitDims(t, perm))
    return Value();
  return ReshapeOp::create(rewriter, loc, permuted(t, perm), v);
}

/// op(..., transpose(x, P), ...) -> transpose(op(..., x, ...), P) for an
/// elementwise op (or a cast) whose other operands are transposed by P too or
/// can be permuted without moving data (cos/sin tables [1, 1, S, D]).
struct SinkThroughElementwise : RewritePattern {
  SinkThroughElementwise(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    if ((!isElementwise(op) && !isa<CastOp>(op)) || op->getNumResults() != 1 ||
        op->getNumRegions() != 0)
      return failure();
    auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!resultType)
      return failure();
    // P: the permutation of an operand that is a transpose of the result's
    // full shape.
    TransposeOp anchor;
    for (Value v : op->getOperands())
      if (auto t = v.getDefiningOp<TransposeOp>();
          t && cast<RankedTensorType>(v.getType()).getShape() == resultType.getShape()) {
        anchor = t;
        break;
      }
    if (!anchor)
      return failure();
    ArrayRef<int64_t> perm = anchor.getPermutation();
    SmallVector<int64_t> inv = inverse(perm);
    SmallVector<Value> operands;
    for (Value v : op->getOperands()) {
      auto t = cast<RankedTensorType>(v.getType());
      if (t.getNumElements() == 1 && t.getRank() <= resultType.getRank()) {
        operands.push_back(v); // a scalar broadcasts in any layout
        continue;
      }
      if (t.getRank() != resultType.getRank())
        return failure();
      Value p = cheaplyPermuted(rewriter, op->getLoc(), v, inv);
      if (!p)
        return failure();
      operands.push_back(p);
    }
    OperationState state(op->getLoc(), op->getName().getIdentifier(), operands,
                         TypeRange{permuted(resultType, inv)}, op->getAttrs());
    Operation *moved = rewriter.create(state);
    rewriter.replaceOpWithNewOp<TransposeOp>(op, moved->getResult(0),
                                             rewriter.getDenseI64ArrayAttr(perm));
    return success();
  }
};

/// slice(transpose(x, P)) -> transpose(slice'(x), P), the bounds permuted.
struct SinkThroughSlice : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SliceOp op, PatternRewriter &rewriter) const override {
    auto t = op.getInput().getDefiningOp<TransposeOp>();
    if (!t)
      return failure();
    ArrayRef<int64_t> perm = t.getPermutation();
    size_t n = perm.size();
    SmallVector<int64_t> start(n), limit(n), stride(n);
    for (size_t i = 0; i < n; ++i) {
      start[perm[i]] = op.getStart()[i];
      limit[perm[i]] = op.getLimit()[i];
      stride[perm[i]] = op.getStride()[i];
    }
    Value inner = SliceOp::create(rewriter, op.getLoc(), t.getInput(), start, limit, stride);
    rewriter.replaceOpWithNewOp<TransposeOp>(op, inner, rewriter.getDenseI64ArrayAttr(perm));
    return success();
  }
};

/// concat(transpose(a, P), transpose(b, P), axis) -> transpose(concat(a, b,
/// P[axis]), P).
struct SinkThroughConcat : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op, PatternRewriter &rewriter) const override {
    SmallVector<Value> inputs;
    ArrayRef<int64_t> perm;
    for (Value v : op.getInputs()) {
      auto t = v.getDefiningOp<TransposeOp>();
      if (!t || (!perm.empty() && t.getPermutation() != perm))
        return failure();
      perm = t.getPermutation();
      inputs.push_back(t.getInput());
    }
    if (perm.empty())
      return failure();
    int64_t rank = perm.size(), axis = op.getAxis() < 0 ? op.getAxis() + rank : op.getAxis();
    Value inner = ConcatOp::create(rewriter, op.getLoc(), inputs, perm[axis]);
    rewriter.replaceOpWithNewOp<TransposeOp>(op, inner, rewriter.getDenseI64ArrayAttr(perm));
    return success();
  }
};

/// Elements every transpose in |f| moves (one that only moves unit
/// dimensions moves none: it is a reshape).
int64_t transposedElements(func::FuncOp f) {
  int64_t n = 0;
  f.walk([&](TransposeOp t) {
    auto in = cast<RankedTensorType>(t.getInput().getType());
    if (!permutesOnlyUnitDims(in, t.getPermutation()))
      n += in.getNumElements();
  });
  return n;
}

struct ZeroPropagateTransposes : zcc::impl::ZeroPropagateTransposesBase<ZeroPropagateTransposes> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward)
      return;
    // Sinking is kept only where it pays: a transpose that meets no inverse
    // would merely have moved (or been duplicated over several users).
    OpBuilder builder(forward);
    auto trial = cast<func::FuncOp>(builder.clone(*forward));
    trial.setSymName("forward.trial");
    int64_t before = transposedElements(forward);
    RewritePatternSet patterns(&getContext());
    patterns.add<SinkThroughElementwise, SinkThroughSlice, SinkThroughConcat>(&getContext());
    GreedyRewriteConfig config;
    config.setUseTopDownTraversal(true);
    if (failed(applyPatternsGreedily(trial, std::move(patterns), config))) {
      trial.erase();
      return;
    }
    int64_t after = transposedElements(trial);
    if (after >= before) {
      trial.erase();
      return;
    }
    forward.getBody().takeBody(trial.getBody());
    trial.erase();
    zcc::zero::attrs(module).getTransposedElementsAttrHelper().setAttr(
        module, Builder(module.getContext()).getDenseI64ArrayAttr({before, after}));
  }
};

} // namespace
