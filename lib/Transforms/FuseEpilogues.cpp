//===- FuseEpilogues.cpp - bias, addend and bias gradient into the GEMM ---===//
//
// nn.Linear exports as a GEMM and a broadcast add of its bias; cuBLASLt adds
// the bias in the GEMM's epilogue, saving a pass over the output. Its
// backward's bias gradient (a column sum of dy) rides on the weight-gradient
// GEMM that reads the same dy. Runs after autodiff, so the gradient rules
// never see the fused ops. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace zcc {
#define GEN_PASS_DEF_ZEROFUSEEPILOGUES
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

namespace {

struct ZeroFuseEpilogues : zcc::impl::ZeroFuseEpiloguesBase<ZeroFuseEpilogues> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    for (AddOp add : adds) {
      auto out = cast<RankedTensorType>(add.getType());
      for (auto [product, bias] :
           {std::pair{add.getLhs(), add.getRhs()}, std::pair{add.getRhs(), add.getLhs()}}) {
        auto mm = product.getDefiningOp<MatmulOp>();
        auto biasType = cast<RankedTensorType>(bias.getType());
        if (!mm || !mm->hasOneUse() || mm.getType() != out || biasType.getRank() != 1 ||
            out.getRank() < 2 || biasType.getDimSize(0) != out.getShape().back())
          continue;
        // The bias must exist before the GEMM runs in its place.
        if (Operation *def = bias.getDefiningOp();
            def && def->getBlock() == mm->getBlock() && !def->isBeforeInBlock(mm))
          continue;
        OpBuilder b(mm);
        auto fused = MatmulBiasOp::create(b, add.getLoc(), out, mm.getLhs(), mm.getRhs(), bias,
                                          mm.getTransposeLhsAttr(), mm.getTransposeRhsAttr());
        add.replaceAllUsesWith(fused.getResult());
        add.erase();
        mm.erase();
        break;
      }
    }
    fuseBiasGradients();
    if (gelu)
      fuseGelu();
    if (add) {
      fuseAddends();
      fuseScatterAdds();
      fuseLossIntoGradient();
    }
  }

  /// cross_entropy(logits, labels) and cross_entropy_grad(logits, labels,
  /// dloss) of the same logits -> one cross_entropy_grad with the loss as its
  /// second result, at the forward's place: the logits (Llama's 4096 x
  /// 128256) are read once for both. dloss must exist there (a constant is
  /// moved up; fp16's scale, a load, is left alone).
  void fuseLossIntoGradient() {
    SmallVector<CrossEntropyOp> losses;
    getOperation().walk([&](CrossEntropyOp ce) { losses.push_back(ce); });
    for (CrossEntropyOp ce : losses) {
      CrossEntropyGradOp grad;
      for (Operation *user : ce.getLogits().getUsers())
        if (auto g = dyn_cast<CrossEntropyGradOp>(user);
            g && !g.getLoss() && g.getLabels() == ce.getLabels() &&
            g->getBlock() == ce->getBlock() && ce->isBeforeInBlock(g) &&
            g.getIgnoreIndexAttr() == ce.getIgnoreIndexAttr() &&
            g.getClassesAttr() == ce.getClassesAttr()) {
          grad = g;
          break;
        }
      if (!grad)
        continue;
      if (Operation *def = grad.getGrad().getDefiningOp();
          def && def->getBlock() == ce->getBlock() && !def->isBeforeInBlock(ce)) {
        if (!isa<ConstantOp>(def))
          continue;
        def->moveBefore(ce);
      }
      OpBuilder b(ce);
      auto fused = CrossEntropyGradOp::create(
          b, grad.getLoc(), grad.getResult().getType(), ce.getType(), ce.getLogits(),
          ce.getLabels(), grad.getGrad(), grad.getIgnoreIndexAttr(), grad.getClassesAttr());
      ce.getResult().replaceAllUsesWith(fused.getLoss());
      grad.getResult().replaceAllUsesWith(fused.getResult());
      grad.erase();
      ce.erase();
    }
  }

  /// add(x, gather_grad(i, dy)), the gather_grad read only there and x of the
  /// result's type -> gather_grad(i, dy, x) at the add: a tied embedding's
  /// two gradients (the output projection's GEMM and the embedding's
  /// scatter) without a pass writing the whole table's zeros and another
  /// adding them; zero-plan-memory runs it in place on x.
  void fuseScatterAdds() {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    for (AddOp add : adds) {
      for (auto [scatter, addend] :
           {std::pair{add.getLhs(), add.getRhs()}, std::pair{add.getRhs(), add.getLhs()}}) {
        auto gg = scatter.getDefiningOp<GatherGradOp>();
        if (!gg || gg.getAddend() || !gg->hasOneUse() || gg.getType() != add.getType() ||
            addend.getType() != add.getType() || addend == scatter ||
            gg->getBlock() != add->getBlock())
          continue;
        OpBuilder b(add);
        auto fused =
            GatherGradOp::create(b, add.getLoc(), add.getType(), gg.getIndices(), gg.getGrad(),
                                 addend, gg.getAxisAttr(), gg.getPaddingIdxAttr());
        add.replaceAllUsesWith(fused.getResult());
        add.erase();
        gg.erase();
        break;
      }
    }
  }

  /// add(matmul(a, b), r), r of the result's type and defined before the
  /// matmul, the matmul read only there -> matmul_add(a, b, r) in the
  /// matmul's place. Chains of gradient sums fold one GEMM at a time: the
  /// first matmul_add is the next one's addend.
  void fuseAddends() {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    for (AddOp add : adds) {
      for (auto [product, addend] :
           {std::pair{add.getLhs(), add.getRhs()}, std::pair{add.getRhs(), add.getLhs()}}) {
        auto mm = product.getDefiningOp<MatmulOp>();
        if (!mm || !mm->hasOneUse() || mm.getType() != add.getType() ||
            addend.getType() != add.getType() || addend == product)
          continue;
        if (Operation *def = addend.getDefiningOp();
            def && def->getBlock() == mm->getBlock() && !def->isBeforeInBlock(mm))
          continue;
        OpBuilder b(mm);
        auto fused =
            MatmulAddOp::create(b, add.getLoc(), add.getType(), mm.getLhs(), mm.getRhs(), addend,
                                mm.getTransposeLhsAttr(), mm.getTransposeRhsAttr());
        add.replaceAllUsesWith(fused.getResult());
        add.erase();
        mm.erase();
        break;
      }
    }
  }

  /// reshape(v) to |type| (v itself when it already has that type).
  static Value reshapedTo(OpBuilder &b, Location loc, Value v, Type type) {
    return v.getType() == type ? v : ReshapeOp::create(b, loc, type, v).getResult();
  }

  /// GPT-2's MLP: gelu_new after a linear layer, and in the backward the
  /// GEMM whose product is the GELU's output gradient. cuBLASLt computes the
  /// GELU (GELU_AUX_BIAS, keeping the pre-activation) and its derivative
  /// (DGELU, reading it) in the GEMMs' epilogues.
  void fuseGelu() {
    SmallVector<GeluOp> gelus;
    getOperation().walk([&](GeluOp g) { gelus.push_back(g); });
    for (GeluOp g : gelus) {
      if (g.getApproximate() != GeluApprox::tanh)
        continue;
      Value v = g.getInput();
      if (auto r = v.getDefiningOp<ReshapeOp>())
        v = r.getInput();
      auto mb = v.getDefiningOp<MatmulBiasOp>();
      if (!mb || mb.getType().getRank() != 2 ||
          mb.getType().getNumElements() != g.getType().getNumElements())
        continue;
      OpBuilder b(mb);
      auto fused = MatmulBiasGeluOp::create(b, mb.getLoc(), mb.getType(), mb.getType(), mb.getLhs(),
                                            mb.getRhs(), mb.getBias(), mb.getTransposeLhsAttr(),
                                            mb.getTransposeRhsAttr());
      mb.getResult().replaceAllUsesWith(fused.getPre());
      mb.erase();
      b.setInsertionPoint(g);
      g.getResult().replaceAllUsesWith(reshapedTo(b, g.getLoc(), fused.getResult(), g.getType()));
      g.erase();
    }
    SmallVector<GeluGradOp> grads;
    getOperation().walk([&](GeluGradOp g) { grads.push_back(g); });
    for (GeluGradOp g : grads) {
      if (g.getApproximate() != GeluApprox::tanh)
        continue;
      Value dh = g.getGrad();
      auto reshape = dh.getDefiningOp<ReshapeOp>();
      if (reshape) {
        if (!reshape->hasOneUse())
          continue;
        dh = reshape.getInput();
      }
      auto mm = dh.getDefiningOp<MatmulOp>();
      if (!mm || !mm->hasOneUse() || mm.getType().getRank() != 2 ||
          mm.getType().getNumElements() != g.getType().getNumElements() ||
          mm->getBlock() != g->getBlock())
        continue;
      OpBuilder b(g);
      Value pre = reshapedTo(b, g.getLoc(), g.getInput(), mm.getType());
      auto fused =
          MatmulGeluGradOp::create(b, mm.getLoc(), mm.getType(), mm.getLhs(), mm.getRhs(), pre,
                                   mm.getTransposeLhsAttr(), mm.getTransposeRhsAttr());
      g.getResult().replaceAllUsesWith(reshapedTo(b, g.getLoc(), fused.getResult(), g.getType()));
      g.erase();
      if (reshape)
        reshape.erase();
      mm.erase();
    }
  }

  /// A linear layer's backward: `matmul(x, dy) {transpose_lhs}` (the weight
  /// gradient over flattened rows) and `reduce sum dy [0]` (the bias
  /// gradient) read the same dy: one matmul_bgrad, placed where the first
  /// of the two was (x and dy exist there: both are operands of ops at or
  /// after it whose operands dominate them), or, where x is formed between
  /// the two (recomputed for the weight gradient), where the second was if
  /// nothing but reshapes reads the first's result before it (moved after it). A plan with
  /// recompute then fuses the same pairs as the plain plan: the bias gradients are the same bits
  /// (cuBLASLt's BGRADA epilogue and a column reduce add in different orders).
  void fuseBiasGradients() {
    SmallVector<ReduceOp> reduces;
    getOperation().walk([&](ReduceOp r) { reduces.push_back(r); });
    for (ReduceOp r : reduces) {
      auto dy = r.getInput();
      auto dyType = cast<RankedTensorType>(dy.getType());
      if (r.getKind() != ReduceKind::sum || dyType.getRank() != 2 ||
          r.getAxes() != ArrayRef<int64_t>{0})
        continue;
      // The weight gradient's GEMM: x^T dy with x available where the
      // first of the two ops is.
      MatmulOp mm;
      Operation *first = nullptr;
      SmallVector<Operation *> views; // reshapes of the sum moved after the fused op
      for (Operation *user : dy.getUsers()) {
        auto m = dyn_cast<MatmulOp>(user);
        if (!m || m.getRhs() != dy || !m.getTransposeLhs() || m.getTransposeRhs() ||
            m->getBlock() != r->getBlock() ||
            cast<RankedTensorType>(m.getLhs().getType()).getRank() != 2)
          continue;
        Operation *at = m->isBeforeInBlock(r) ? m.getOperation() : r.getOperation();
        Operation *later = at == m.getOperation() ? r.getOperation() : m.getOperation();
        if (Operation *def = m.getLhs().getDefiningOp();
            def && def->getBlock() == at->getBlock() && !def->isBeforeInBlock(at)) {
          views.clear();
          if (!def->isBeforeInBlock(later) || !readersFollow(at, later, views))
            continue;
          at = later;
        }
        mm = m;
        first = at;
        break;
      }
      if (!mm)
        continue;
      Value x = mm.getLhs();
      OpBuilder b(first);
      auto fused = MatmulBgradOp::create(b, mm.getLoc(), mm.getType(), r.getType(), x, dy);
      mm.replaceAllUsesWith(fused.getWeight());
      r.replaceAllUsesWith(fused.getBias());
      llvm::sort(views, [](Operation *a, Operation *c) { return a->isBeforeInBlock(c); });
      Operation *prev = fused;
      for (Operation *v : views) {
        v->moveAfter(prev);
        prev = v;
      }
      mm.erase();
      r.erase();
    }
  }

  /// Whether every reader of op's results comes after `later`, but for
  /// reshapes (views, nothing else) whose readers do, recursively: those are
  /// added to `views`, to move after the op that replaces `op` there (the
  /// bias gradient's reshape to the bias's shape sits right after the sum).
  static bool readersFollow(Operation *op, Operation *later, SmallVectorImpl<Operation *> &views) {
    for (Operation *u : op->getUsers()) {
      if (u->getBlock() != later->getBlock())
        return false;
      if (!u->isBeforeInBlock(later))
        continue;
      if (!isa<ReshapeOp>(u) || !readersFollow(u, later, views))
        return false;
      views.push_back(u);
    }
    return true;
  }
};

} // namespace
