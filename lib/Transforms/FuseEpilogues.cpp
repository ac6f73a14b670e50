//===- FuseEpilogues.cpp - a matmul's bias add into the GEMM -------------===//
//
// nn.Linear exports as a GEMM and a broadcast add of its bias; cuBLASLt adds
// the bias in the GEMM's epilogue, saving a pass over the output. Runs after
// autodiff, so the gradient rules never see the fused op. See Passes.td.
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
  void runOnOperation() override {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    for (AddOp add : adds) {
      auto out = cast<RankedTensorType>(add.getType());
      for (auto [product, bias] : {std::pair{add.getLhs(), add.getRhs()},
                                   std::pair{add.getRhs(), add.getLhs()}}) {
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
  }
};

} // namespace
