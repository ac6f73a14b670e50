//===- MoeDispatch.cpp - dense expert dispatch to dropless routing --------===//
//
// An exported mixture-of-experts block runs every expert on every token and
// weights expert e's output by the token's routing weight for e, zero for
// the experts it did not choose (tools/moe_dense.py: a static graph):
//
//   W = sum_s one_hot(experts[:, s], E) * weights[:, s]        [N, E]
//   y = sum_e F_e(x) * W[:, e]                                 [N, H]
//
// where F_e is one expert: the same row-wise function of the tokens x [N, H]
// for every e, reading matrix e of stacked expert parameters [E, ...]. Only
// the N k (token, choice) pairs with a non-zero weight contribute, so this
// pass computes those alone (dropless: no capacity, no token dropped):
//
//   tokens, positions, offsets = moe_route(experts)   rows sorted by expert
//   xs = gather(x, tokens)                            [N k, H]
//   ys = F(xs), each expert matmul a grouped_matmul over the offsets
//   y  = sum_s gather(ys, positions)[:, s] * weights[:, s]
//
// The gradients follow from those ops' rules: the experts' through the
// grouped GEMMs, the tokens' through the gathers, the router's through the
// weights (the dense form's only non-zero router gradients are those of the
// chosen experts, the same values). Expert FLOPs drop from E to k per token.
// See Passes.td and docs/models.md.
//
//===----------------------------------------------------------------------===//
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"

#include <algorithm>
#include <cmath>

namespace zcc {
#define GEN_PASS_DEF_ZEROMOEDISPATCH
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// |v| through any chain of casts.
Value throughCasts(Value v) {
  while (auto c = v.getDefiningOp<CastOp>())
    v = c.getInput();
  return v;
}

/// Whether |v| is a constant [E] holding 0, 1, ..., E - 1.
bool isIota(Value v, int64_t e) {
  auto c = v.getDefiningOp<ConstantOp>();
  auto values = c ? dyn_cast<DenseIntElementsAttr>(c.getValue()) : DenseIntElementsAttr();
  if (!values || values.getType().getRank() != 1 || values.getNumElements() != e)
    return false;
  int64_t i = 0;
  for (const APInt &x : values.getValues<APInt>())
    if (x.getSExtValue() != i++)
      return false;
  return true;
}

/// The dense combination W [N, E] = reduce_sum_s(one_hot(experts) [N, k, E]
/// * weights [N, k, 1]): its experts [N, k] (integer) and weights [N, k].
struct Combination {
  Value experts, weights;
  int64_t numExperts = 0;
};
std::optional<Combination> matchCombination(ReduceOp sum) {
  if (sum.getKind() != ReduceKind::sum || sum.getKeepdims() || sum.getAxes().size() != 1 ||
      sum.getAxes()[0] != 1)
    return std::nullopt;
  auto mul = sum.getInput().getDefiningOp<MulOp>();
  auto in = tensorType(sum.getInput());
  if (!mul || in.getRank() != 3)
    return std::nullopt;
  int64_t n = in.getDimSize(0), k = in.getDimSize(1), e = in.getDimSize(2);
  for (int side = 0; side < 2; ++side) {
    Value hot = throughCasts(mul->getOperand(side)), w = mul->getOperand(1 - side);
    auto cmp = hot.getDefiningOp<CmpOp>();
    auto wr = w.getDefiningOp<ReshapeOp>();
    if (!cmp || cmp.getPredicate() != CmpPredicate::eq || !wr ||
        tensorType(w).getShape() != ArrayRef<int64_t>{n, k, 1} ||
        tensorType(hot).getShape() != ArrayRef<int64_t>{n, k, e})
      continue;
    Value choice = cmp.getLhs(), iota = cmp.getRhs();
    if (!isIota(iota, e))
      std::swap(choice, iota);
    auto cr = choice.getDefiningOp<ReshapeOp>();
    if (!isIota(iota, e) || !cr || tensorType(choice).getShape() != ArrayRef<int64_t>{n, k, 1})
      continue;
    Value experts = cr.getInput(), weights = wr.getInput();
    if (tensorType(experts).getShape() != ArrayRef<int64_t>{n, k} ||
        !tensorType(experts).getElementType().isInteger() ||
        tensorType(weights).getShape() != ArrayRef<int64_t>{n, k})
      continue;
    return Combination{experts, weights, e};
  }
  return std::nullopt;
}

/// Matrix |e| of stacked expert parameters: reshape(slice(W [E, ...], e)).
struct ExpertMatrix {
  Value stacked;
  int64_t index;
};
std::optional<ExpertMatrix> expertMatrix(Value v, int64_t numExperts) {
  auto r = v.getDefiningOp<ReshapeOp>();
  auto s = r ? r.getInput().getDefiningOp<SliceOp>() : SliceOp();
  if (!s)
    return std::nullopt;
  auto w = tensorType(s.getInput());
  if (w.getRank() != 3 || w.getDimSize(0) != numExperts ||
      tensorType(s.getResult()).getDimSize(0) != 1 ||
      tensorType(v).getShape() != w.getShape().drop_front() ||
      llvm::any_of(s.getStride(), [](int64_t x) { return x != 1; }) ||
      llvm::any_of(s.getStart().drop_front(), [](int64_t x) { return x != 0; }))
    return std::nullopt;
  return ExpertMatrix{s.getInput(), s.getStart()[0]};
}

/// One expert's function of the tokens: the ops between the tokens x [N, H]
/// and its output, each row-wise (results [N, ...] computed row by row), and
/// the expert matrices it multiplies by.
struct Expert {
  Value x, out;
  int64_t index = -1;
  SmallVector<Operation *> ops; // in program order
};

/// Collects the expert computing |out| from |x|: elementwise ops, casts,
/// splits and slices along columns, and matmuls of rows by one expert
/// matrix; constants without rows may feed them. Fails on anything else.
LogicalResult collectExpert(Value out, int64_t numExperts, Expert &ex) {
  int64_t n = tensorType(ex.x).getDimSize(0);
  llvm::SetVector<Operation *> seen;
  SmallVector<Value> work = {out};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (v == ex.x)
      continue;
    Operation *op = v.getDefiningOp();
    if (!op)
      return failure();
    if (seen.contains(op))
      continue;
    if (isa<ConstantOp>(op)) {
      if (tensorType(v).getRank() >= 1 && tensorType(v).getDimSize(0) == n && n != 1)
        return failure(); // a table with a row per token: not the experts' own
      continue;
    }
    for (Value r : op->getResults())
      if (tensorType(r).getRank() < 2 || tensorType(r).getDimSize(0) != n)
        return failure();
    if (auto m = dyn_cast<MatmulOp>(op)) {
      auto w = expertMatrix(m.getRhs(), numExperts);
      if (m.getTransposeLhs() || !w || tensorType(m.getLhs()).getRank() != 2 ||
          (ex.index >= 0 && w->index != ex.index))
        return failure();
      ex.index = w->index;
      seen.insert(op);
      work.push_back(m.getLhs());
      continue;
    }
    bool rowWise = isElementwise(op) || isa<CastOp>(op);
    if (auto s = dyn_cast<SplitOp>(op))
      rowWise = s.getAxis() != 0 && s.getAxis() != -tensorType(s.getInput()).getRank();
    if (auto s = dyn_cast<SliceOp>(op))
      rowWise = s.getStart()[0] == 0 && s.getStride()[0] == 1 &&
                tensorType(s.getInput()).getDimSize(0) == n;
    if (!rowWise)
      return failure();
    seen.insert(op);
    for (Value operand : op->getOperands())
      work.push_back(operand);
  }
  if (ex.index < 0)
    return failure();
  ex.ops.assign(seen.begin(), seen.end());
  llvm::sort(ex.ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  ex.out = out;
  return success();
}

/// Whether experts |a| and |b| compute the same function of their matrices:
/// op for op the same kinds, attributes and types, the matmuls reading the
/// same stacked parameters, the constants equal.
bool sameExpert(const Expert &a, const Expert &b, int64_t numExperts) {
  if (a.ops.size() != b.ops.size())
    return false;
  DenseMap<Value, Value> map = {{a.x, b.x}};
  for (auto [oa, ob] : llvm::zip(a.ops, b.ops)) {
    if (oa->getName() != ob->getName() || oa->getNumOperands() != ob->getNumOperands() ||
        oa->getResultTypes() != ob->getResultTypes())
      return false;
    auto ma = dyn_cast<MatmulOp>(oa);
    if (!ma && oa->getAttrDictionary() != ob->getAttrDictionary())
      return false;
    for (auto [va, vb] : llvm::zip(oa->getOperands(), ob->getOperands())) {
      if (ma && va == ma.getRhs()) {
        auto wa = expertMatrix(va, numExperts), wb = expertMatrix(vb, numExperts);
        if (!wb || wa->stacked != wb->stacked ||
            ma.getTransposeRhs() != cast<MatmulOp>(ob).getTransposeRhs())
          return false;
        continue;
      }
      if (Value mapped = map.lookup(va)) {
        if (mapped != vb)
          return false;
        continue;
      }
      auto ca = va.getDefiningOp<ConstantOp>(), cb = vb.getDefiningOp<ConstantOp>();
      if (!ca || !cb || ca.getValue() != cb.getValue())
        return false;
    }
    for (auto [ra, rb] : llvm::zip(oa->getResults(), ob->getResults()))
      map[ra] = rb;
  }
  return map.lookup(a.out) == b.out;
}

/// The block's sum over experts: for expert e, out_e * W[:, e] (W's column
/// e a slice), added up in one chain. On success |experts| holds one Expert
/// per e (out and index set) and |last| the chain's final add.
LogicalResult matchExpertSum(Value combination, int64_t numExperts, SmallVector<Expert> &experts,
                             Operation *&last) {
  int64_t n = tensorType(combination).getDimSize(0);
  experts.assign(numExperts, Expert());
  SmallVector<Operation *> terms(numExperts, nullptr);
  for (Operation *user : combination.getUsers()) {
    auto s = dyn_cast<SliceOp>(user);
    if (!s || tensorType(s.getResult()).getShape() != ArrayRef<int64_t>{n, 1} ||
        s.getStart()[0] != 0 || !s->hasOneUse())
      return failure();
    int64_t e = s.getStart()[1];
    auto mul = dyn_cast<MulOp>(*s->getUsers().begin());
    if (!mul || terms[e] || !mul->hasOneUse())
      return failure();
    terms[e] = mul;
    experts[e].out = mul.getLhs() == s.getResult() ? mul.getRhs() : mul.getLhs();
  }
  if (llvm::is_contained(terms, nullptr))
    return failure();
  // The chain: adds whose operands are both terms or adds of the chain (a
  // later add of something else, such as a shared expert, is not part of it).
  llvm::SmallPtrSet<Operation *, 16> inSum(terms.begin(), terms.end());
  SmallVector<Operation *> frontier(terms.begin(), terms.end());
  last = nullptr;
  while (!frontier.empty()) {
    Operation *op = frontier.pop_back_val();
    if (!op->hasOneUse())
      continue;
    Operation *user = *op->getUsers().begin();
    if (!isa<AddOp>(user) || inSum.contains(user))
      continue;
    Operation *a = user->getOperand(0).getDefiningOp(), *b = user->getOperand(1).getDefiningOp();
    if (a && b && inSum.contains(a) && inSum.contains(b)) {
      inSum.insert(user);
      frontier.push_back(user);
    }
  }
  // Exactly E - 1 adds, one of them (the last) used outside the chain.
  if (inSum.size() != 2 * (size_t)numExperts - 1)
    return failure();
  for (Operation *op : inSum) {
    bool inner = op->hasOneUse() && inSum.contains(*op->getUsers().begin());
    if (!inner && last)
      return failure();
    if (!inner)
      last = op;
  }
  if (!last)
    return failure();
  return success();
}

/// The tokens every expert reads: the value at the bottom of expert 0's ops
/// that is no op of it, [N, H].
Value expertInput(Value out, int64_t n) {
  // Walk down the rows' operands (not matrices or constants) to the first
  // value that is no row-wise op's result.
  Value v = out;
  while (Operation *op = v.getDefiningOp()) {
    Value rows;
    if (auto m = dyn_cast<MatmulOp>(op))
      rows = m.getLhs();
    else if (isElementwise(op) || isa<CastOp, SplitOp, SliceOp>(op))
      for (Value operand : op->getOperands())
        if (!operand.getDefiningOp<ConstantOp>() && tensorType(operand).getRank() >= 2 &&
            tensorType(operand).getDimSize(0) == n) {
          rows = operand;
          break;
        }
    if (!rows)
      return v;
    v = rows;
  }
  return v;
}

/// |table| [R, H] with a zero row after its last: what a gather at index R
/// (moe_route's index for an unused row or a dropped choice) reads.
Value withZeroRow(OpBuilder &b, Location loc, Value table) {
  auto t = tensorType(table);
  auto rowType = RankedTensorType::get({1, t.getDimSize(1)}, t.getElementType());
  Value zero = ConstantOp::create(
      b, loc, DenseElementsAttr::get(rowType, b.getZeroAttr(t.getElementType())));
  return ConcatOp::create(b, loc, ValueRange{table, zero}, b.getI64IntegerAttr(0));
}

/// Expert parallelism: the EP group's ranks and which collective group they
/// are (the world, or the mesh's groups of consecutive ranks).
struct ExpertParallel {
  int64_t ranks = 1;
  CommGroup group = CommGroup::world;
};

/// [n, ...] on every rank of |ep| laid end to end in rank order: [P n, ...].
Value gatherRows(OpBuilder &b, Location loc, Value v, const ExpertParallel &ep) {
  auto t = tensorType(v);
  SmallVector<int64_t> shape(t.getShape());
  shape[0] *= ep.ranks;
  Value flat =
      ReshapeOp::create(b, loc, RankedTensorType::get({t.getNumElements()}, t.getElementType()), v);
  Value all = AllGatherOp::create(
      b, loc, RankedTensorType::get({t.getNumElements() * ep.ranks}, t.getElementType()), flat,
      ep.ranks, /*async=*/false, ep.group);
  return ReshapeOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()), all);
}

/// The sum over the ranks of |ep| of [P n, ...], rank r keeping rows
/// [r n, (r + 1) n): [n, ...].
Value reduceScatterRows(OpBuilder &b, Location loc, Value v, const ExpertParallel &ep) {
  auto t = tensorType(v);
  SmallVector<int64_t> shape(t.getShape());
  shape[0] /= ep.ranks;
  Value flat =
      ReshapeOp::create(b, loc, RankedTensorType::get({t.getNumElements()}, t.getElementType()), v);
  Value mine = ReduceScatterOp::create(
      b, loc, RankedTensorType::get({t.getNumElements() / ep.ranks}, t.getElementType()), flat,
      CollectiveReduce::sum, ep.ranks, /*async=*/false, ep.group);
  return ReshapeOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()), mine);
}

/// This rank's E / P experts of stacked expert parameters [E, ...]: its
/// chunk of the (replicated) stack, [E / P, ...].
Value localExperts(OpBuilder &b, Location loc, Value stacked, const ExpertParallel &ep) {
  auto t = tensorType(stacked);
  SmallVector<int64_t> shape(t.getShape());
  shape[0] /= ep.ranks;
  int64_t n = t.getNumElements();
  Value flat = ReshapeOp::create(b, loc, RankedTensorType::get({n}, t.getElementType()), stacked);
  Value mine = LocalShardOp::create(
      b, loc, RankedTensorType::get({n / ep.ranks}, t.getElementType()), flat, ep.ranks, ep.group);
  return ReshapeOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()), mine);
}

/// Rewrites one block whose combination is |sum| (the reduce forming W);
/// |capacityFactor| > 0 gives each expert ceil(factor N k / E) rows. Under
/// expert parallelism (|ep| of several ranks) the block routes the group's
/// tokens to this rank's experts (docs/zero.md, the all-gather dispatch).
LogicalResult rewriteBlock(ReduceOp sum, double capacityFactor, const ExpertParallel &ep) {
  auto comb = matchCombination(sum);
  if (!comb)
    return failure();
  SmallVector<Expert> experts;
  Operation *last = nullptr;
  if (failed(matchExpertSum(sum.getResult(), comb->numExperts, experts, last)))
    return failure();
  int64_t n = tensorType(sum.getResult()).getDimSize(0);
  // The tokens: whatever expert 0 reads that is not its own op's result, the
  // same value for every expert.
  Value x;
  for (Expert &ex : experts) {
    Value input = expertInput(ex.out, n);
    if (x && input != x)
      return failure();
    x = input;
  }
  if (!x || tensorType(x).getRank() != 2 || tensorType(x).getDimSize(0) != n)
    return failure();
  for (Expert &ex : experts) {
    ex.x = x;
    if (failed(collectExpert(ex.out, comb->numExperts, ex)))
      return failure();
  }
  for (int64_t e = 0; e < comb->numExperts; ++e)
    if (experts[e].index != e || !sameExpert(experts[0], experts[e], comb->numExperts))
      return failure();

  int64_t numExperts = comb->numExperts;

  // Route, run expert 0's ops once over the N k routed rows, combine.
  OpBuilder b(last);
  Location loc = last->getLoc();
  MLIRContext *ctx = b.getContext();
  int64_t k = tensorType(comb->experts).getDimSize(1), rows = n * k, capacity = 0;
  auto i64 = IntegerType::get(ctx, 64);
  Value choices = comb->experts, weights = comb->weights;
  if (tensorType(choices).getElementType() != i64)
    choices = CastOp::create(b, loc, RankedTensorType::get({n, k}, i64), choices);
  Value first; // expert parallelism: this rank's first expert
  if (ep.ranks > 1) {
    // The group's tokens, choices and weights; this rank's experts.
    x = gatherRows(b, loc, x, ep);
    choices = gatherRows(b, loc, choices, ep);
    weights = gatherRows(b, loc, weights, ep);
    numExperts /= ep.ranks;
    n *= ep.ranks;
    rows = n * std::min(k, numExperts);
    SmallVector<int64_t> starts;
    for (int64_t r = 0; r < ep.ranks; ++r)
      starts.push_back(r * numExperts);
    auto startsType = RankedTensorType::get({ep.ranks}, i64);
    Value table = ConstantOp::create(b, loc, DenseIntElementsAttr::get(startsType, starts));
    first =
        LocalShardOp::create(b, loc, RankedTensorType::get({1}, i64), table, ep.ranks, ep.group);
  }
  if (capacityFactor > 0) {
    capacity = (int64_t)std::ceil(capacityFactor * (double)(n * k) / (double)comb->numExperts);
    capacity = std::clamp<int64_t>(capacity, 1, n); // a token takes an expert once
    rows = capacity * comb->numExperts;
  }
  auto route = MoeRouteOp::create(
      b, loc, RankedTensorType::get({rows}, i64), RankedTensorType::get({n, k}, i64),
      RankedTensorType::get({numExperts + 1}, i64), choices, first, b.getI64IntegerAttr(numExperts),
      b.getI64IntegerAttr(capacity), b.getI64IntegerAttr(first ? comb->numExperts : 0));
  IRMapping map;
  // Unused rows (a capacity's, a rank's) read token N, a zero row.
  Value tokensTable = capacity || first ? withZeroRow(b, loc, x) : x;
  map.map(experts[0].x,
          GatherOp::create(b, loc, tokensTable, route.getTokens(), int64_t(0), IntegerAttr())
              .getResult());
  auto routed = [&](Type t) {
    auto rt = cast<RankedTensorType>(t);
    SmallVector<int64_t> shape(rt.getShape());
    shape[0] = rows;
    return RankedTensorType::get(shape, rt.getElementType());
  };
  const Expert &e0 = experts[0];
  DenseMap<Value, Value> local; // stacked parameters -> this rank's experts
  for (Operation *op : e0.ops) {
    if (auto m = dyn_cast<MatmulOp>(op)) {
      Value stacked = expertMatrix(m.getRhs(), comb->numExperts)->stacked;
      if (first) {
        Value &mine = local[stacked];
        if (!mine)
          mine = localExperts(b, loc, stacked, ep);
        stacked = mine;
      }
      Value lhs = map.lookup(m.getLhs());
      map.map(m.getResult(), GroupedMatmulOp::create(b, loc, routed(m.getType()), lhs, stacked,
                                                     route.getOffsets(), m.getTransposeRhs())
                                 .getResult());
      continue;
    }
    Operation *copy = b.clone(*op, map);
    for (Value r : copy->getResults())
      r.setType(routed(r.getType()));
  }
  Value ys = map.lookup(e0.out); // [N k, H]
  auto yt = tensorType(ys);
  int64_t h = yt.getDimSize(1);
  Type et = yt.getElementType();
  // Dropped choices (another rank's expert, past a capacity) read row R: zero.
  Value rowsTable = capacity || first ? withZeroRow(b, loc, ys) : ys;
  Value picked =
      GatherOp::create(b, loc, rowsTable, route.getPositions(), int64_t(0), IntegerAttr());
  Value w = weights;
  if (tensorType(w).getElementType() != et)
    w = CastOp::create(b, loc, RankedTensorType::get({n, k}, et), w);
  w = ReshapeOp::create(b, loc, RankedTensorType::get({n, k, 1}, et), w);
  Value weighted = MulOp::create(b, loc, picked, w);
  Value y = ReduceOp::create(b, loc, ReduceKind::sum, weighted, ArrayRef<int64_t>{1},
                             /*keepdims=*/false);
  if (first) // each token's sum over the group's ranks, back on its own rank
    y = reduceScatterRows(b, loc, y, ep);
  (void)h;
  if (y.getType() != last->getResult(0).getType())
    return last->emitError("zero-moe-dispatch: the routed sum's type ")
           << y.getType() << " is not the block's " << last->getResult(0).getType();
  last->getResult(0).replaceAllUsesWith(y);
  return success();
}

struct ZeroMoeDispatch : zcc::impl::ZeroMoeDispatchBase<ZeroMoeDispatch> {
  using ZeroMoeDispatchBase::ZeroMoeDispatchBase;

  void runOnOperation() override {
    if (capacityFactor < 0) {
      getOperation().emitError("zero-moe-dispatch: capacity-factor ")
          << capacityFactor << " must be >= 0 (0: dropless)";
      return signalPassFailure();
    }
    ModuleOp module = getOperation();
    // Expert parallelism: the world, or the mesh's groups (which are
    // consecutive ranks, as EP groups are: a node's GPUs).
    ExpertParallel ep{epSize, CommGroup::world};
    if (epSize > 1) {
      int64_t mesh = micsShardSize > 0 ? micsShardSize : hpzPartitionSize;
      if (epSize != worldSize && !(mesh > 1 && mesh < worldSize && epSize == mesh)) {
        module.emitError("zero-moe-dispatch: --moe-ep-size ")
            << epSize << " must be the world size (" << worldSize
            << ") or the mesh's group size (--mics-shard-size or --hpz-partition-size"
            << (mesh > 1 ? ", here " + std::to_string(mesh) : std::string()) << ")";
        return signalPassFailure();
      }
      if (capacityFactor > 0) {
        module.emitError("zero-moe-dispatch: --moe-ep-size ")
            << epSize << " routes dropless (the all-gather dispatch); --moe-capacity-factor "
            << capacityFactor << " is for one rank's experts: leave one of them out";
        return signalPassFailure();
      }
      if (epSize != worldSize)
        ep.group = CommGroup::group;
    }
    int64_t blocks = 0;
    SmallVector<ReduceOp> sums;
    module.walk([&](ReduceOp r) { sums.push_back(r); });
    bool failed = false;
    for (ReduceOp r : sums) {
      // A block that matches but cannot be split over the ranks is an error
      // (the plan would silently run every expert on every rank otherwise).
      auto comb = matchCombination(r);
      if (comb && ep.ranks > 1 && comb->numExperts % ep.ranks) {
        r.emitError("zero-moe-dispatch: --moe-ep-size ")
            << ep.ranks << " does not divide this block's " << comb->numExperts
            << " experts: use a divisor of " << comb->numExperts;
        failed = true;
        continue;
      }
      if (succeeded(rewriteBlock(r, capacityFactor, ep)))
        ++blocks;
    }
    if (failed)
      return signalPassFailure();
    if (blocks == 0 && ep.ranks > 1) {
      module.emitError("zero-moe-dispatch: --moe-ep-size ")
          << ep.ranks << " but no mixture-of-experts block was recognised (docs/models.md says "
          << "what the exporter must emit)";
      return signalPassFailure();
    }
    if (blocks == 0)
      return;
    // The dense experts are dead now.
    IRRewriter rewriter(module.getContext());
    module.walk([&](func::FuncOp f) { (void)runRegionDCE(rewriter, f.getBody()); });
    zcc::zero::attrs(module).getMoeBlocksAttrHelper().setAttr(
        module, Builder(module.getContext()).getI64IntegerAttr(blocks));
  }
};

} // namespace
