//===- PadGemms.cpp - pad GEMMs with an odd number of output columns ------===//
//
// A vocabulary of 50257 leaves every row of a 16-bit logits matrix 2-byte
// aligned, which rules out cuBLASLt's fast kernels for the LM head's forward
// GEMM and both of its backward GEMMs. Padding the weight with zero columns
// to a multiple of 64 and slicing the real columns out of the product keeps
// the values and moves all three GEMMs to aligned shapes. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace zcc {
#define GEN_PASS_DEF_ZEROPADGEMMS
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

namespace {

struct ZeroPadGemms : zcc::impl::ZeroPadGemmsBase<ZeroPadGemms> {
  using ZeroPadGemmsBase::ZeroPadGemmsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || multiple < 1)
      return;
    SmallVector<MatmulOp> matmuls;
    forward.walk([&](MatmulOp mm) { matmuls.push_back(mm); });
    int64_t padded = 0;
    for (MatmulOp mm : matmuls) {
      auto out = cast<RankedTensorType>(mm.getType());
      auto rhs = cast<RankedTensorType>(mm.getRhs().getType());
      int64_t n = out.getShape().back();
      if (n < minColumns || n % multiple == 0 || !out.hasStaticShape() || !rhs.hasStaticShape())
        continue;
      int64_t extra = (n + multiple - 1) / multiple * multiple - n;
      // The axis of the right operand that holds the output's columns.
      int64_t axis = mm.getTransposeRhs() ? rhs.getRank() - 2 : rhs.getRank() - 1;
      OpBuilder b(mm);
      Location loc = mm.getLoc();
      SmallVector<int64_t> zerosShape(rhs.getShape());
      zerosShape[axis] = extra;
      auto zerosType = RankedTensorType::get(zerosShape, rhs.getElementType());
      Value zeros = ConstantOp::create(
          b, loc, DenseElementsAttr::get(zerosType, b.getZeroAttr(rhs.getElementType())));
      Value wide =
          ConcatOp::create(b, loc, ValueRange{mm.getRhs(), zeros}, b.getI64IntegerAttr(axis));
      auto product = MatmulOp::create(b, loc, mm.getLhs(), wide, mm.getTransposeLhsAttr(),
                                      mm.getTransposeRhsAttr());
      SmallVector<int64_t> start(out.getRank(), 0), limit(out.getShape()), stride(out.getRank(), 1);
      Value real = SliceOp::create(b, loc, product, b.getDenseI64ArrayAttr(start),
                                   b.getDenseI64ArrayAttr(limit), b.getDenseI64ArrayAttr(stride));
      mm.replaceAllUsesWith(real);
      mm.erase();
      // The loss reads the padded logits in place: no slice of the logits
      // and no zero-padding of their gradient (two copies of the largest
      // tensor of a language model's step).
      if (out.getRank() >= 1)
        for (Operation *user : llvm::to_vector(real.getUsers()))
          if (auto ce = dyn_cast<CrossEntropyOp>(user); ce && ce.getLogits() == real) {
            OpBuilder at(ce);
            auto wideCe =
                CrossEntropyOp::create(at, ce.getLoc(), ce.getType(), product, ce.getLabels(),
                                       ce.getIgnoreIndexAttr(), at.getI64IntegerAttr(n));
            ce.replaceAllUsesWith(wideCe.getResult());
            ce.erase();
          }
      if (real.use_empty())
        real.getDefiningOp()->erase();
      ++padded;
    }
    if (padded)
      zcc::zero::attrs(module).getPaddedGemmsAttrHelper().setAttr(
          module, Builder(module.getContext()).getI64IntegerAttr(padded));
  }
};

} // namespace
