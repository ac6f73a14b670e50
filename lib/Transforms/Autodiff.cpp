//===- Autodiff.cpp - reverse-mode differentiation ------------------------===//
//
// @micro_step = forward ops of @forward, then their adjoints in reverse
// order. Only values that depend on a trainable global get adjoints. Each
// rule receives the adjoint of the op's result(s) and adds the adjoints of
// its operands; broadcasting operands get their adjoint summed back to their
// shape.
//
//===----------------------------------------------------------------------===//
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace zcc {
#define GEN_PASS_DEF_ZEROAUTODIFF
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Builds the backward pass of one function.
class Differentiator {
public:
  Differentiator(OpBuilder &b) : b(b) {}

  /// A splat constant of |type| (or a scalar of |type|'s element type when
  /// |type| is an element type).
  Value splat(Location loc, RankedTensorType type, double value) {
    Attribute element = isa<FloatType>(type.getElementType())
                            ? Attribute(b.getFloatAttr(type.getElementType(), value))
                            : Attribute(b.getIntegerAttr(type.getElementType(), (int64_t)value));
    return ConstantOp::create(b, loc, DenseElementsAttr::get(type, element));
  }
  Value scalar(Location loc, Value like, double value) {
    return splat(loc, RankedTensorType::get({}, tensorType(like).getElementType()), value);
  }

  /// Sums |g| over the dimensions that broadcasting added to reach |target|.
  Value sumTo(Location loc, Value g, RankedTensorType target) {
    RankedTensorType gt = tensorType(g);
    if (gt.getShape() == target.getShape())
      return g;
    int64_t lead = gt.getRank() - target.getRank();
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d < gt.getRank(); ++d)
      if (d < lead || (target.getDimSize(d - lead) == 1 && gt.getDimSize(d) != 1))
        axes.push_back(d);
    Value r = g;
    if (!axes.empty())
      r = ReduceOp::create(b, loc, ReduceKind::sum, g, axes, /*keepdims=*/true);
    return ReshapeOp::create(b, loc, target, r);
  }

  /// Adds |g| to the adjoint of |v| (if |v| needs one).
  void accumulate(Location loc, Value v, Value g) {
    if (!needsGrad.contains(v))
      return;
    g = sumTo(loc, g, tensorType(v));
    auto it = adjoint.find(v);
    if (it == adjoint.end())
      adjoint[v] = g;
    else if (Value joined = joinSliceGrads(loc, it->second, g))
      it->second = joined;
    else
      it->second = AddOp::create(b, loc, it->second, g);
  }

  /// slice_grad(x) + slice_grad(y) as one slice_grad of concat(x, y) when
  /// the two slices are adjacent along one axis and whole along the others,
  /// or as concat(x, y) itself where they cover that axis (the backward of a
  /// tensor cut in parts: RoPE's rotate-half, Phi-3's fused qkv projection
  /// cut in three as the parts' gradients arrive): each position takes its
  /// one value instead of a sum with the others' zeros, and no padded tensor
  /// is written. Null otherwise.
  Value joinSliceGrads(Location loc, Value p, Value q) {
    auto x = p.getDefiningOp<SliceGradOp>(), y = q.getDefiningOp<SliceGradOp>();
    if (!x || !y || !p.use_empty() || !q.use_empty() || p.getType() != q.getType())
      return Value();
    auto full = tensorType(p);
    auto xt = tensorType(x.getGrad()), yt = tensorType(y.getGrad());
    int64_t axis = -1;
    for (int64_t d = 0; d < full.getRank(); ++d) {
      if (x.getStride()[d] != 1 || y.getStride()[d] != 1)
        return Value();
      if (xt.getDimSize(d) == full.getDimSize(d) && yt.getDimSize(d) == full.getDimSize(d))
        continue; // whole in both (so both start at 0)
      if (axis >= 0)
        return Value();
      axis = d;
    }
    if (axis < 0)
      return Value();
    int64_t xs = x.getStart()[axis], ys = y.getStart()[axis];
    bool xFirst = xs + xt.getDimSize(axis) == ys, yFirst = ys + yt.getDimSize(axis) == xs;
    if (!xFirst && !yFirst)
      return Value();
    SmallVector<Value> parts;
    for (Value part : {xFirst ? x.getGrad() : y.getGrad(), xFirst ? y.getGrad() : x.getGrad()}) {
      auto inner = part.getDefiningOp<ConcatOp>(); // an earlier join's parts, in order
      if (inner && part.hasOneUse() && inner.getAxis() == axis)
        llvm::append_range(parts, inner.getInputs());
      else
        parts.push_back(part);
    }
    Value joined = ConcatOp::create(b, loc, parts, axis);
    SmallVector<int64_t> start(x.getStart());
    start[axis] = std::min(xs, ys);
    bool whole = start[axis] == 0 && tensorType(joined).getDimSize(axis) == full.getDimSize(axis);
    Value result = whole ? joined
                         : SliceGradOp::create(b, loc, full, joined, b.getDenseI64ArrayAttr(start),
                                               x.getStrideAttr())
                               .getResult();
    Value grads[2] = {x.getGrad(), y.getGrad()};
    x.erase();
    y.erase();
    for (Value part : grads) // a flattened earlier join
      if (auto inner = part.getDefiningOp<ConcatOp>(); inner && inner->use_empty())
        inner.erase();
    return result;
  }

  /// Emits the adjoint rule of |op| given the adjoints of its results.
  LogicalResult backward(Operation *op);

  DenseSet<Value> needsGrad;
  DenseMap<Value, Value> adjoint;

private:
  OpBuilder &b;
};

LogicalResult Differentiator::backward(Operation *op) {
  Location loc = op->getLoc();
  if (op->getNumResults() == 0)
    return success();
  // Adjoints of the results; ops whose results have none contribute nothing.
  SmallVector<Value> dy;
  bool any = false;
  for (Value r : op->getResults()) {
    dy.push_back(adjoint.lookup(r));
    any |= (bool)dy.back();
  }
  if (!any)
    return success();
  Value g = dy[0];
  auto x = [&](unsigned i) { return op->getOperand(i); };
  auto y = [&]() { return op->getResult(0); };

  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](AddOp) {
        accumulate(loc, x(0), g);
        accumulate(loc, x(1), g);
        return success();
      })
      .Case([&](SubOp) {
        accumulate(loc, x(0), g);
        if (needsGrad.contains(x(1)))
          accumulate(loc, x(1), NegOp::create(b, loc, g));
        return success();
      })
      .Case([&](MulOp) {
        if (needsGrad.contains(x(0)))
          accumulate(loc, x(0), MulOp::create(b, loc, g, x(1)));
        if (needsGrad.contains(x(1)))
          accumulate(loc, x(1), MulOp::create(b, loc, g, x(0)));
        return success();
      })
      .Case([&](DivOp) {
        if (needsGrad.contains(x(0)))
          accumulate(loc, x(0), DivOp::create(b, loc, g, x(1)));
        if (needsGrad.contains(x(1))) // -g * y / b
          accumulate(
              loc, x(1),
              NegOp::create(b, loc, DivOp::create(b, loc, MulOp::create(b, loc, g, y()), x(1))));
        return success();
      })
      .Case([&](PowOp) {
        if (needsGrad.contains(x(0))) { // g * e * a^(e-1)
          Value em1 = SubOp::create(b, loc, x(1), scalar(loc, x(1), 1.0));
          Value d = MulOp::create(b, loc, x(1), PowOp::create(b, loc, x(0), em1));
          accumulate(loc, x(0), MulOp::create(b, loc, g, d));
        }
        if (needsGrad.contains(x(1))) // g * y * log(a)
          accumulate(
              loc, x(1),
              MulOp::create(b, loc, MulOp::create(b, loc, g, y()), LogOp::create(b, loc, x(0))));
        return success();
      })
      .Case<MaxOp, MinOp>([&](Operation *m) {
        // The gradient goes to the selected operand (the first on ties).
        auto pred = isa<MaxOp>(m) ? CmpPredicate::ge : CmpPredicate::le;
        Value pick = CmpOp::create(b, loc, pred, x(0), x(1));
        Value zero = scalar(loc, g, 0.0);
        accumulate(loc, x(0), WhereOp::create(b, loc, pick, g, zero));
        accumulate(loc, x(1), WhereOp::create(b, loc, pick, zero, g));
        return success();
      })
      .Case([&](WhereOp) {
        Value zero = scalar(loc, g, 0.0);
        if (needsGrad.contains(x(1)))
          accumulate(loc, x(1), WhereOp::create(b, loc, x(0), g, zero));
        if (needsGrad.contains(x(2)))
          accumulate(loc, x(2), WhereOp::create(b, loc, x(0), zero, g));
        return success();
      })
      .Case([&](NegOp) {
        accumulate(loc, x(0), NegOp::create(b, loc, g));
        return success();
      })
      .Case([&](DropoutOp d) { // the same mask on g (the same rng and key)
        accumulate(loc, x(0),
                   DropoutOp::create(b, loc, g.getType(), g, d.getRng(), d.getRatioAttr(),
                                     d.getKeyAttr(), d.getSamplesAttr()));
        return success();
      })
      .Case([&](ExpOp) {
        accumulate(loc, x(0), MulOp::create(b, loc, g, y()));
        return success();
      })
      .Case([&](LogOp) {
        accumulate(loc, x(0), DivOp::create(b, loc, g, x(0)));
        return success();
      })
      .Case([&](SqrtOp) { // g / (2 y)
        accumulate(loc, x(0),
                   DivOp::create(b, loc, g, MulOp::create(b, loc, y(), scalar(loc, g, 2.0))));
        return success();
      })
      .Case([&](RsqrtOp) { // -0.5 g y^3
        Value y3 = MulOp::create(b, loc, y(), MulOp::create(b, loc, y(), y()));
        accumulate(loc, x(0),
                   MulOp::create(b, loc, MulOp::create(b, loc, g, y3), scalar(loc, g, -0.5)));
        return success();
      })
      .Case([&](ReciprocalOp) { // -g y^2
        accumulate(
            loc, x(0),
            NegOp::create(b, loc, MulOp::create(b, loc, g, MulOp::create(b, loc, y(), y()))));
        return success();
      })
      .Case([&](TanhOp) { // g (1 - y^2)
        Value d = SubOp::create(b, loc, scalar(loc, g, 1.0), MulOp::create(b, loc, y(), y()));
        accumulate(loc, x(0), MulOp::create(b, loc, g, d));
        return success();
      })
      .Case([&](ErfOp) { // g 2/sqrt(pi) exp(-x^2)
        Value e = ExpOp::create(b, loc, NegOp::create(b, loc, MulOp::create(b, loc, x(0), x(0))));
        Value d = MulOp::create(b, loc, e, scalar(loc, g, 2.0 / std::sqrt(M_PI)));
        accumulate(loc, x(0), MulOp::create(b, loc, g, d));
        return success();
      })
      .Case([&](SigmoidOp) { // g y (1 - y)
        Value d = MulOp::create(b, loc, y(), SubOp::create(b, loc, scalar(loc, g, 1.0), y()));
        accumulate(loc, x(0), MulOp::create(b, loc, g, d));
        return success();
      })
      .Case([&](ReluOp) {
        Value positive = CmpOp::create(b, loc, CmpPredicate::gt, x(0), scalar(loc, g, 0.0));
        accumulate(loc, x(0), WhereOp::create(b, loc, positive, g, scalar(loc, g, 0.0)));
        return success();
      })
      .Case([&](SiluOp) { // g s (1 + x (1 - s)), s = sigmoid(x)
        Value s = SigmoidOp::create(b, loc, x(0));
        Value oneMinus = SubOp::create(b, loc, scalar(loc, g, 1.0), s);
        Value inner =
            AddOp::create(b, loc, scalar(loc, g, 1.0), MulOp::create(b, loc, x(0), oneMinus));
        accumulate(loc, x(0), MulOp::create(b, loc, g, MulOp::create(b, loc, s, inner)));
        return success();
      })
      .Case([&](AbsOp) {
        Value nonneg = CmpOp::create(b, loc, CmpPredicate::ge, x(0), scalar(loc, g, 0.0));
        accumulate(loc, x(0), WhereOp::create(b, loc, nonneg, g, NegOp::create(b, loc, g)));
        return success();
      })
      .Case([&](CosOp) {
        accumulate(loc, x(0),
                   NegOp::create(b, loc, MulOp::create(b, loc, g, SinOp::create(b, loc, x(0)))));
        return success();
      })
      .Case([&](SinOp) {
        accumulate(loc, x(0), MulOp::create(b, loc, g, CosOp::create(b, loc, x(0))));
        return success();
      })
      .Case([&](GeluOp gelu) {
        accumulate(loc, x(0), GeluGradOp::create(b, loc, x(0), g, gelu.getApproximate()));
        return success();
      })
      .Case([&](CastOp) {
        if (isa<FloatType>(tensorType(x(0)).getElementType()))
          accumulate(loc, x(0), CastOp::create(b, loc, x(0).getType(), g));
        return success();
      })
      .Case([&](ReshapeOp) {
        accumulate(loc, x(0), ReshapeOp::create(b, loc, x(0).getType(), g));
        return success();
      })
      .Case([&](TransposeOp t) {
        ArrayRef<int64_t> perm = t.getPermutation();
        SmallVector<int64_t> inverse(perm.size());
        for (auto [i, p] : llvm::enumerate(perm))
          inverse[p] = i;
        accumulate(loc, x(0), TransposeOp::create(b, loc, g, b.getDenseI64ArrayAttr(inverse)));
        return success();
      })
      .Case([&](ExpandOp) {
        accumulate(loc, x(0), g); // summed back to the input's shape
        return success();
      })
      .Case([&](SliceOp s) {
        accumulate(
            loc, x(0),
            SliceGradOp::create(b, loc, x(0).getType(), g, s.getStartAttr(), s.getStrideAttr()));
        return success();
      })
      .Case([&](ConcatOp c) {
        int64_t axis = c.getAxis(), rank = tensorType(g).getRank(), at = 0;
        axis = axis < 0 ? axis + rank : axis;
        for (Value in : c.getInputs()) {
          RankedTensorType t = tensorType(in);
          SmallVector<int64_t> start(rank, 0), limit(tensorType(g).getShape()), stride(rank, 1);
          start[axis] = at;
          limit[axis] = at + t.getDimSize(axis);
          at = limit[axis];
          if (needsGrad.contains(in))
            accumulate(loc, in,
                       SliceOp::create(b, loc, g, b.getDenseI64ArrayAttr(start),
                                       b.getDenseI64ArrayAttr(limit),
                                       b.getDenseI64ArrayAttr(stride)));
        }
        return success();
      })
      .Case([&](SplitOp s) {
        SmallVector<Value> pieces;
        for (auto [r, d] : llvm::zip(s.getResults(), dy))
          pieces.push_back(d ? d : splat(loc, tensorType(r), 0.0));
        int64_t rank = tensorType(x(0)).getRank(), axis = s.getAxis();
        accumulate(
            loc, x(0),
            ConcatOp::create(b, loc, pieces, b.getI64IntegerAttr(axis < 0 ? axis + rank : axis)));
        return success();
      })
      .Case([&](GatherOp gather) {
        if (needsGrad.contains(x(0)))
          accumulate(loc, x(0),
                     GatherGradOp::create(b, loc, x(0).getType(), x(1), g, Value(),
                                          gather.getAxisAttr(), gather.getPaddingIdxAttr()));
        return success();
      })
      .Case([&](MatmulOp m) {
        bool ta = m.getTransposeLhs(), tb = m.getTransposeRhs();
        Value a = x(0), bb = x(1);
        if (needsGrad.contains(a)) {
          Value da = ta ? MatmulOp::create(b, loc, bb, g, tb, true)
                        : MatmulOp::create(b, loc, g, bb, false, !tb);
          accumulate(loc, a, da);
        }
        if (needsGrad.contains(bb)) {
          RankedTensorType at = tensorType(a), gt = tensorType(g);
          if (tensorType(bb).getRank() == 2 && at.getRank() > 2 && !ta &&
              at.getShape().drop_back(2) == gt.getShape().drop_back(2)) {
            // A weight shared by every batch (a linear layer): its gradient is one GEMM
            // that contracts over the batch and the rows together, [B*M, K]^T [B*M, N],
            // instead of B GEMMs and a reduction over B (and a B-times-larger temporary).
            int64_t rows = at.getNumElements() / at.getShape().back();
            auto flat = [&](Value v, RankedTensorType t) {
              return ReshapeOp::create(
                  b, loc, RankedTensorType::get({rows, t.getShape().back()}, t.getElementType()),
                  v);
            };
            Value a2 = flat(a, at), g2 = flat(g, gt);
            accumulate(loc, bb,
                       tb ? MatmulOp::create(b, loc, g2, a2, true, false)
                          : MatmulOp::create(b, loc, a2, g2, true, false));
          } else {
            Value db = tb ? MatmulOp::create(b, loc, g, a, true, ta)
                          : MatmulOp::create(b, loc, a, g, !ta, false);
            accumulate(loc, bb, db);
          }
        }
        return success();
      })
      .Case([&](ConvOp conv) { // the input's and the filter's gradients, cuDNN's dgrad, wgrad
        Value xv = x(0), w = x(1);
        if (needsGrad.contains(xv))
          accumulate(loc, xv,
                     ConvInputGradOp::create(b, loc, xv.getType(), g, w, conv.getStridesAttr(),
                                             conv.getDilationsAttr(), conv.getPadsAttr(),
                                             conv.getGroupsAttr()));
        if (needsGrad.contains(w))
          accumulate(loc, w,
                     ConvFilterGradOp::create(b, loc, w.getType(), xv, g, conv.getStridesAttr(),
                                              conv.getDilationsAttr(), conv.getPadsAttr(),
                                              conv.getGroupsAttr()));
        return success();
      })
      .Case([&](ConvInputGradOp t) { // ConvTranspose: its transpose is the convolution
        Value gv = x(0), w = x(1);
        if (needsGrad.contains(gv))
          accumulate(loc, gv,
                     ConvOp::create(b, loc, gv.getType(), g, w, t.getStridesAttr(),
                                    t.getDilationsAttr(), t.getPadsAttr(), t.getGroupsAttr()));
        if (needsGrad.contains(w))
          accumulate(loc, w,
                     ConvFilterGradOp::create(b, loc, w.getType(), g, gv, t.getStridesAttr(),
                                              t.getDilationsAttr(), t.getPadsAttr(),
                                              t.getGroupsAttr()));
        return success();
      })
      .Case([&](GroupedMatmulOp m) { // y_r = x_r W_e (W_e^T): per expert, as matmul's rule
        bool tb = m.getTransposeRhs();
        Value a = x(0), w = x(1), offsets = x(2);
        if (needsGrad.contains(a))
          accumulate(loc, a, GroupedMatmulOp::create(b, loc, a.getType(), g, w, offsets, !tb));
        if (needsGrad.contains(w))
          accumulate(loc, w,
                     GroupedMatmulRhsGradOp::create(b, loc, w.getType(), a, g, offsets, tb));
        return success();
      })
      // Expert parallelism's collectives in the forward (zero-moe-dispatch
      // --moe-ep-size): the backward swaps them. Every rank's adjoints are of
      // its own loss; zero-partition's average over the ranks sums them.
      .Case([&](AllGatherOp a) {
        if (needsGrad.contains(x(0)))
          accumulate(loc, x(0),
                     ReduceScatterOp::create(b, loc, x(0).getType(), g, CollectiveReduce::sum,
                                             a.getWorldSize(), /*async=*/false, a.getGroup()));
        return success();
      })
      .Case([&](ReduceScatterOp r) {
        Value gathered = AllGatherOp::create(b, loc, x(0).getType(), g, r.getWorldSize(),
                                             /*async=*/false, r.getGroup());
        if (r.getReduce() == CollectiveReduce::avg)
          gathered = MulOp::create(b, loc, gathered, scalar(loc, g, 1.0 / r.getWorldSize()));
        accumulate(loc, x(0), gathered);
        return success();
      })
      .Case([&](AllReduceOp r) {
        // SyncBatchNorm's statistics (--batch-norm sync): every rank's result
        // reads every rank's input, so the adjoint is the same reduction of
        // the ranks' adjoints (the sum for a sum; for an average, the
        // average, which zero-partition's average over the ranks scales to
        // the mean loss's).
        accumulate(loc, x(0),
                   AllReduceOp::create(b, loc, g.getType(), g, r.getReduce(), r.getWorldSize(),
                                       /*async=*/false, r.getGroup()));
        return success();
      })
      .Case([&](LocalShardOp l) {
        // A replicated tensor whose ranks each read their own chunk: every
        // rank's adjoint holds every chunk's, divided by the ranks that read
        // one, so that the average over the ranks is the mean loss's.
        Value gathered = AllGatherOp::create(b, loc, x(0).getType(), g, l.getWorldSize(),
                                             /*async=*/false, l.getGroup());
        accumulate(loc, x(0),
                   MulOp::create(b, loc, gathered, scalar(loc, g, 1.0 / l.getWorldSize())));
        return success();
      })
      .Case([&](ReduceOp r) -> LogicalResult {
        if (r.getKind() != ReduceKind::sum && r.getKind() != ReduceKind::mean &&
            r.getKind() != ReduceKind::sum_squares)
          return r.emitError("no gradient rule for reduce ")
                 << stringifyReduceKind(r.getKind()) << " yet";
        RankedTensorType in = tensorType(x(0));
        SmallVector<int64_t> kept(in.getShape());
        int64_t count = 1;
        for (int64_t a : r.getAxes()) {
          count *= kept[a];
          kept[a] = 1;
        }
        Value gk = ReshapeOp::create(b, loc, RankedTensorType::get(kept, in.getElementType()), g);
        if (r.getKind() == ReduceKind::mean)
          gk = MulOp::create(b, loc, gk, scalar(loc, g, 1.0 / count));
        if (r.getKind() == ReduceKind::sum_squares) { // d(x^2) = 2 x dy
          accumulate(loc, x(0),
                     MulOp::create(b, loc, MulOp::create(b, loc, x(0), scalar(loc, g, 2.0)), gk));
          return success();
        }
        accumulate(loc, x(0), ExpandOp::create(b, loc, in, gk));
        return success();
      })
      .Case([&](SoftmaxOp s) {
        accumulate(loc, x(0), SoftmaxGradOp::create(b, loc, y(), g, s.getAxisAttr()));
        return success();
      })
      .Case([&](BiasSoftmaxOp s) {
        // d(x + bias) = softmax_grad(y, dy); the bias (a mask, usually
        // constant) sums it over the broadcast dimensions.
        auto last = b.getI64IntegerAttr(tensorType(y()).getRank() - 1);
        Value dx = SoftmaxGradOp::create(b, loc, y(), g, last);
        accumulate(loc, x(0), dx);
        accumulate(loc, x(1), dx);
        return success();
      })
      .Case([&](LogSoftmaxOp s) {
        accumulate(loc, x(0), LogSoftmaxGradOp::create(b, loc, y(), g, s.getAxisAttr()));
        return success();
      })
      .Case([&](LayerNormOp ln) {
        auto grad =
            LayerNormGradOp::create(b, loc, x(0).getType(), ln.getScale().getType(),
                                    ln.getScale().getType(), x(0), ln.getScale(), g,
                                    /*residual=*/Value(), ln.getAxisAttr(), ln.getEpsilonAttr());
        accumulate(loc, x(0), grad.getDinput());
        accumulate(loc, ln.getScale(), grad.getDscale());
        if (ln.getBias())
          accumulate(loc, ln.getBias(), grad.getDbias());
        return success();
      })
      .Case([&](RmsNormOp rn) {
        auto grad = RmsNormGradOp::create(b, loc, x(0).getType(), rn.getScale().getType(), x(0),
                                          rn.getScale(), g, /*residual=*/Value(), rn.getAxisAttr(),
                                          rn.getEpsilonAttr());
        accumulate(loc, x(0), grad.getDinput());
        accumulate(loc, rn.getScale(), grad.getDscale());
        return success();
      })
      .Case([&](AttentionOp att) -> LogicalResult {
        if (!dy[0])
          return success();
        Value bias = att.getBias();
        if (bias && needsGrad.contains(bias))
          return att.emitError("zero.attention: no gradient for a mask that depends on a "
                               "trainable parameter");
        auto grads = AttentionGradOp::create(
            b, loc, TypeRange{x(0).getType(), x(1).getType(), x(2).getType()}, x(0), x(1), x(2),
            bias, att.getResult(), att.getLse(), dy[0], att.getPositions(), att.getScaleAttr(),
            att.getCausalAttr(), att.getWindowAttr(), att.getSoftcapAttr());
        for (int i = 0; i < 3; ++i)
          accumulate(loc, x(i), grads->getResult(i));
        return success();
      })
      .Case([&](AttentionPackedOp att) -> LogicalResult {
        if (!dy[0])
          return success();
        Value bias = att.getBias();
        if (bias && needsGrad.contains(bias))
          return att.emitError("zero.attention_packed: no gradient for a mask that depends on "
                               "a trainable parameter");
        accumulate(loc, x(0),
                   AttentionPackedGradOp::create(
                       b, loc, x(0).getType(), x(0), bias, att.getResult(), att.getLse(), dy[0],
                       att.getPositions(), att.getScaleAttr(), att.getCausalAttr(),
                       att.getWindowAttr(), att.getSoftcapAttr()));
        return success();
      })
      .Case([&](CrossEntropyOp ce) {
        accumulate(loc, x(0),
                   CrossEntropyGradOp::create(b, loc, x(0).getType(), Type(), x(0), x(1), g,
                                              ce.getIgnoreIndexAttr(), ce.getClassesAttr())
                       .getResult());
        return success();
      })
      .Case<ConstantOp, LoadOp, StoreOp, CmpOp, AndOp, OrOp, NotOp>(
          [](Operation *) { return success(); })
      .Default([&](Operation *other) {
        return other->emitError("no gradient rule for '") << other->getName() << "' yet";
      });
}

struct ZeroAutodiffPass : zcc::impl::ZeroAutodiffBase<ZeroAutodiffPass> {
  using ZeroAutodiffBase::ZeroAutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError("zero-autodiff: the module has no @forward function");
      return signalPassFailure();
    }
    int lossIndex = -1;
    for (unsigned k = 0; k < forward.getNumResults(); ++k)
      if (forward.getResultAttr(k, zcc::zero::ZeroDialect::LossAttrHelper::getNameStr()))
        lossIndex = k;
    if (lossIndex < 0) {
      forward.emitError("zero-autodiff: @forward has no loss (run zero-attach-loss)");
      return signalPassFailure();
    }
    if (gradAccum < 1) {
      forward.emitError("grad-accum must be >= 1");
      return signalPassFailure();
    }

    // @micro_step starts as a copy of @forward that returns only the loss.
    OpBuilder mb(module.getBodyRegion());
    mb.setInsertionPointAfter(forward);
    auto step = cast<func::FuncOp>(mb.clone(*forward));
    step.setSymName("micro_step");
    // @forward evaluates (dropout off, BatchNorm's running statistics);
    // @micro_step trains (batch statistics, which update them).
    selectMode(forward, /*training=*/false);
    selectMode(step, /*training=*/true);
    Block &block = step.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    Value loss = ret.getOperand(lossIndex);

    Differentiator diff(mb);
    // Values that depend on a trainable global need adjoints.
    SmallVector<LoadOp> trainableLoads;
    for (Operation &op : block) {
      if (auto load = dyn_cast<LoadOp>(op)) {
        auto global = module.lookupSymbol<GlobalOp>(load.getGlobalAttr());
        if (global && global.getTrainable()) {
          diff.needsGrad.insert(load);
          trainableLoads.push_back(load);
        }
        continue;
      }
      for (Value operand : op.getOperands())
        if (diff.needsGrad.contains(operand)) {
          for (Value r : op.getResults())
            if (isa<FloatType>(tensorType(r).getElementType()))
              diff.needsGrad.insert(r);
          break;
        }
    }
    if (trainableLoads.empty()) {
      forward.emitError("the model has no trainable parameters (check --trainable/--frozen)");
      return signalPassFailure();
    }
    if (!diff.needsGrad.contains(loss)) {
      forward.emitError("the loss does not depend on any trainable parameter");
      return signalPassFailure();
    }

    // Backward, in reverse order, before the return.
    mb.setInsertionPoint(ret);
    Value seed = diff.splat(loss.getLoc(), tensorType(loss), 1.0 / gradAccum);
    if (zcc::zero::attrs(module).getLossScalingAttrHelper().isAttrPresent(module)) {
      // fp16: the backward starts from loss_scale / grad-accum.
      auto scalarF32 = RankedTensorType::get({}, mb.getF32Type());
      if (tensorType(loss) != scalarF32) {
        forward.emitError("zero-autodiff: loss scaling needs a float32 scalar loss");
        return signalPassFailure();
      }
      unsigned index = step.getNumArguments();
      if (failed(step.insertArgument(index, scalarF32,
                                     mb.getDictionaryAttr(mb.getNamedAttr(
                                         zcc::zero::ZeroDialect::InputAttrHelper::getNameStr(),
                                         mb.getStringAttr("loss_scale"))),
                                     loss.getLoc())))
        return signalPassFailure();
      seed = MulOp::create(mb, loss.getLoc(), block.getArgument(index), seed);
    }
    diff.adjoint[loss] = seed;
    SmallVector<Operation *> ops;
    for (Operation &op : block)
      if (&op != ret)
        ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops))
      if (failed(diff.backward(op)))
        return signalPassFailure();

    // Accumulate into @p.grad.
    OpBuilder gb(module.getBodyRegion());
    for (LoadOp load : trainableLoads) {
      auto global = module.lookupSymbol<GlobalOp>(load.getGlobalAttr());
      Value g = diff.adjoint.lookup(load.getResult());
      std::string gradName = (global.getSymName() + ".grad").str();
      auto gradGlobal = module.lookupSymbol<GlobalOp>(gradName);
      if (!gradGlobal) {
        gb.setInsertionPointAfter(global);
        auto type = global.getTensorType();
        gradGlobal = GlobalOp::create(
            gb, global.getLoc(), gradName, GlobalRole::grad, /*trainable=*/false, type,
            DenseElementsAttr::get(type, gb.getFloatAttr(type.getElementType(), 0.0)));
      }
      if (!g)
        continue; // no path from this parameter to the loss: its gradient is 0
      Location loc = load.getLoc();
      Value acc = LoadOp::create(mb, loc, gradGlobal.getTensorType(),
                                 FlatSymbolRefAttr::get(gradGlobal.getSymNameAttr()));
      StoreOp::create(mb, loc, AddOp::create(mb, loc, acc, g),
                      FlatSymbolRefAttr::get(gradGlobal.getSymNameAttr()));
    }

    // @micro_step returns the loss only.
    ret->setOperands(ValueRange{loss});
    DictionaryAttr lossAttrs = step.getResultAttrDict(lossIndex);
    step.setFunctionType(mb.getFunctionType(step.getArgumentTypes(), {loss.getType()}));
    step.setAllResultAttrs(ArrayRef<DictionaryAttr>{lossAttrs});

    // What only @forward's other results needed (the logits, when the loss
    // reads them through another op, e.g. padded) is dead here.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (&op != ret && op.use_empty() && isMemoryEffectFree(&op))
        op.erase();
  }
};
} // namespace
