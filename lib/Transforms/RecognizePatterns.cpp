//===- RecognizePatterns.cpp - fuse GELU, SiLU, RMSNorm, masked softmax ---===//
//
// PyTorch's exporter spells F.gelu, F.silu and LlamaRMSNorm as chains of
// elementwise ops. A product node is flattened into its factors (through
// nested multiplications), and the factor set is matched against each
// pattern; constants are compared with a relative tolerance so that float32
// spellings of 1/sqrt(2) or sqrt(2/pi) match.
//
//===----------------------------------------------------------------------===//
#include "zcc/Transforms/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace zcc {
#define GEN_PASS_DEF_ZERORECOGNIZEPATTERNS
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

/// Returns the splat value of a constant |v|, if it is one.
static std::optional<double> splatValue(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

static bool isSplat(Value v, double expected) {
  auto s = splatValue(v);
  return s && std::fabs(*s - expected) <= 1e-6 * std::max(1.0, std::fabs(expected));
}

/// Collects the factors of a product tree rooted at |v|.
static void collectFactors(Value v, SmallVectorImpl<Value> &factors, int depth = 0) {
  auto mul = v.getDefiningOp<MulOp>();
  if (mul && depth < 4 && (depth == 0 || mul->hasOneUse())) {
    collectFactors(mul.getLhs(), factors, depth + 1);
    collectFactors(mul.getRhs(), factors, depth + 1);
    return;
  }
  factors.push_back(v);
}

/// Removes the first factor equal to |v| or satisfying |pred|; true if found.
template <typename Pred> static bool takeFactor(SmallVectorImpl<Value> &factors, Pred pred) {
  for (auto it = factors.begin(); it != factors.end(); ++it)
    if (pred(*it)) {
      factors.erase(it);
      return true;
    }
  return false;
}

/// Returns the other operand of the commutative binary op |op| if one operand
/// satisfies |pred|.
template <typename OpTy, typename Pred> static Value otherOperand(OpTy op, Pred pred) {
  if (!op)
    return {};
  if (pred(op.getLhs()))
    return op.getRhs();
  if (pred(op.getRhs()))
    return op.getLhs();
  return {};
}

/// Matches erf(x / sqrt(2)) or erf(x * (1/sqrt(2))) and returns x.
static Value matchGeluErfArg(Value v) {
  auto erf = v.getDefiningOp<ErfOp>();
  if (!erf)
    return {};
  Value in = erf.getInput();
  if (auto div = in.getDefiningOp<DivOp>(); div && isSplat(div.getRhs(), std::sqrt(2.0)))
    return div.getLhs();
  return otherOperand(in.getDefiningOp<MulOp>(),
                      [](Value c) { return isSplat(c, 1.0 / std::sqrt(2.0)); });
}

/// Matches tanh(sqrt(2/pi) * (x + 0.044715 * x^3)) and returns x.
static Value matchGeluTanhArg(Value v) {
  auto tanh = v.getDefiningOp<TanhOp>();
  if (!tanh)
    return {};
  Value inner = otherOperand(tanh.getInput().getDefiningOp<MulOp>(),
                             [](Value c) { return isSplat(c, std::sqrt(2.0 / M_PI)); });
  auto add = inner ? inner.getDefiningOp<AddOp>() : AddOp();
  if (!add)
    return {};
  for (auto [x, cube] : {std::pair{add.getLhs(), add.getRhs()}, {add.getRhs(), add.getLhs()}}) {
    Value cubed =
        otherOperand(cube.getDefiningOp<MulOp>(), [](Value c) { return isSplat(c, 0.044715); });
    if (!cubed)
      continue;
    if (auto pow = cubed.getDefiningOp<PowOp>();
        pow && pow.getLhs() == x && isSplat(pow.getRhs(), 3.0))
      return x;
  }
  return {};
}

namespace {
/// x * 0.5 * (1 + erf(x/sqrt2))  or  x * 0.5 * (1 + tanh(...))  ->  zero.gelu
struct FuseGelu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp root, PatternRewriter &rewriter) const override {
    SmallVector<Value> factors;
    collectFactors(root, factors);
    if (factors.size() != 3 || !takeFactor(factors, [](Value v) { return isSplat(v, 0.5); }))
      return failure();
    for (int k = 0; k < 2; ++k) {
      auto add = factors[k].getDefiningOp<AddOp>();
      Value x = factors[1 - k];
      Value t = otherOperand(add, [](Value c) { return isSplat(c, 1.0); });
      if (!t || x.getType() != root.getType())
        continue;
      if (matchGeluErfArg(t) == x) {
        rewriter.replaceOpWithNewOp<GeluOp>(root, x, GeluApprox::none);
        return success();
      }
      if (matchGeluTanhArg(t) == x) {
        rewriter.replaceOpWithNewOp<GeluOp>(root, x, GeluApprox::tanh);
        return success();
      }
    }
    return failure();
  }
};

/// x * sigmoid(x) -> zero.silu
struct FuseSilu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp root, PatternRewriter &rewriter) const override {
    for (auto [x, s] : {std::pair{root.getLhs(), root.getRhs()}, {root.getRhs(), root.getLhs()}}) {
      auto sig = s.getDefiningOp<SigmoidOp>();
      if (sig && sig.getInput() == x && x.getType() == root.getType()) {
        rewriter.replaceOpWithNewOp<SiluOp>(root, x);
        return success();
      }
    }
    return failure();
  }
};

/// w * (x * rsqrt(mean(x^2, last axis) + eps)) -> zero.rms_norm
struct FuseRmsNorm : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// Matches 1/sqrt(mean(x^2) + eps) over the last axis; returns x and eps.
  static std::optional<std::pair<Value, double>> matchInvRms(Value r) {
    Value sqrtIn;
    if (auto rs = r.getDefiningOp<RsqrtOp>())
      sqrtIn = rs.getInput();
    else if (auto rec = r.getDefiningOp<ReciprocalOp>()) {
      auto sq = rec.getInput().getDefiningOp<SqrtOp>();
      if (!sq)
        return std::nullopt;
      sqrtIn = sq.getInput();
    } else if (auto div = r.getDefiningOp<DivOp>(); div && isSplat(div.getLhs(), 1.0)) {
      auto sq = div.getRhs().getDefiningOp<SqrtOp>();
      if (!sq)
        return std::nullopt;
      sqrtIn = sq.getInput();
    } else {
      return std::nullopt;
    }
    auto add = sqrtIn.getDefiningOp<AddOp>();
    if (!add)
      return std::nullopt;
    for (auto [m, e] : {std::pair{add.getLhs(), add.getRhs()}, {add.getRhs(), add.getLhs()}}) {
      auto eps = splatValue(e);
      auto mean = m.getDefiningOp<ReduceOp>();
      if (!eps || !mean || mean.getKind() != ReduceKind::mean || !mean.getKeepdims())
        continue;
      auto inType = cast<RankedTensorType>(mean.getInput().getType());
      if (mean.getAxes().size() != 1 || mean.getAxes()[0] != inType.getRank() - 1)
        continue;
      Value sq = mean.getInput(), x;
      if (auto pow = sq.getDefiningOp<PowOp>(); pow && isSplat(pow.getRhs(), 2.0))
        x = pow.getLhs();
      else if (auto mul = sq.getDefiningOp<MulOp>(); mul && mul.getLhs() == mul.getRhs())
        x = mul.getLhs();
      if (x)
        return std::pair{x, *eps};
    }
    return std::nullopt;
  }

  LogicalResult matchAndRewrite(MulOp root, PatternRewriter &rewriter) const override {
    SmallVector<Value> factors;
    collectFactors(root, factors);
    if (factors.size() != 3)
      return failure();
    for (int k = 0; k < 3; ++k) {
      auto match = matchInvRms(factors[k]);
      if (!match)
        continue;
      auto [x, eps] = *match;
      auto xType = cast<RankedTensorType>(x.getType());
      SmallVector<Value> rest;
      for (int j = 0; j < 3; ++j)
        if (j != k)
          rest.push_back(factors[j]);
      for (int j = 0; j < 2; ++j) {
        Value w = rest[1 - j];
        auto wType = cast<RankedTensorType>(w.getType());
        if (rest[j] != x || root.getType() != xType || wType.getRank() != 1 ||
            wType.getDimSize(0) != xType.getShape().back() ||
            wType.getElementType() != xType.getElementType())
          continue;
        rewriter.replaceOpWithNewOp<RmsNormOp>(root, xType, x, w,
                                               rewriter.getI64IntegerAttr(xType.getRank() - 1),
                                               rewriter.getF64FloatAttr(eps));
        return success();
      }
    }
    return failure();
  }
};

/// softmax(x + bias) over the last axis -> bias_softmax(x, bias), taking the
/// NaN guard that PyTorch's exported scaled_dot_product_attention puts after
/// it (where(p != p, 0, p)) along: attention's mask, softmax and guard in one
/// pass over the scores instead of four.
struct FuseBiasSoftmax : OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxOp softmax, PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(softmax.getType());
    auto add = softmax.getInput().getDefiningOp<AddOp>();
    if (softmax.getAxis() != type.getRank() - 1 || !add || !add->hasOneUse())
      return failure();
    Value x = add.getLhs(), bias = add.getRhs();
    if (x.getType() != type)
      std::swap(x, bias);
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (x.getType() != type || biasType.getElementType() != type.getElementType())
      return failure();
    // The guard, when the softmax's only users are cmp ne(p, p) and
    // where(that, 0, p); other users keep the unguarded values.
    WhereOp guard;
    CmpOp isNan;
    bool others = false;
    for (Operation *user : softmax->getUsers()) {
      if (auto c = dyn_cast<CmpOp>(user); c && c.getPredicate() == CmpPredicate::ne &&
                                          c.getLhs() == softmax && c.getRhs() == softmax)
        isNan = c;
      else if (auto w = dyn_cast<WhereOp>(user);
               w && w.getRhs() == softmax && isSplat(w.getLhs(), 0))
        guard = w;
      else
        others = true;
    }
    bool nanToZero = guard && isNan && !others && guard.getCondition() == isNan.getResult() &&
                     isNan->hasOneUse() && guard.getType() == type;
    auto fused = BiasSoftmaxOp::create(rewriter, softmax.getLoc(), type, x, bias,
                                       nanToZero ? rewriter.getUnitAttr() : UnitAttr());
    if (nanToZero) {
      rewriter.replaceOp(guard, fused.getResult());
      rewriter.eraseOp(isNan);
    }
    rewriter.replaceOp(softmax, fused.getResult());
    rewriter.eraseOp(add);
    return success();
  }
};

struct ZeroRecognizePatternsPass : zcc::impl::ZeroRecognizePatternsBase<ZeroRecognizePatternsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseGelu, FuseSilu, FuseRmsNorm, FuseBiasSoftmax>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
