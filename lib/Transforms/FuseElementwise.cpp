//===- FuseElementwise.cpp - generated kernels for elementwise chains ----===//
//
// A tree of elementwise arithmetic whose intermediate values nothing else
// reads (Llama's rotary embedding q cos + rotate(q) sin, chains of residual
// and gradient adds) runs as one kernel that the compiler generates: the
// tree becomes zero.elementwise, and its kernel is built as a gpu.func,
// lowered through MLIR's GPU -> NVVM -> LLVM path and the NVPTX back end to
// PTX for sm_90, which the plan carries and zrun loads with the driver API.
// Only exactly rounded operations take part (add, sub, mul, div, neg, float
// casts), each step rounded to the element type its tensor had: the fused
// kernel gives the bits of the separate kernels, on the GPU and on the CPU.
// See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "kernels/KernelId.h"
#include "zcc/Transforms/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "llvm/ADT/SetVector.h"

namespace zcc {
#define GEN_PASS_DEF_ZEROFUSEELEMENTWISE
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

namespace {

// The step opcodes the CPU kernel and the generated kernels agree on.
using ::zrt::ElementwiseOpcode;

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The opcode of an op that may join a fused tree, or -1.
int64_t opcodeOf(Operation *op) {
  if (op->getNumResults() != 1 || !isa<FloatType>(tensorOf(op->getResult(0)).getElementType()))
    return -1;
  if (isa<AddOp>(op))
    return (int64_t)ElementwiseOpcode::Add;
  if (isa<SubOp>(op))
    return (int64_t)ElementwiseOpcode::Sub;
  if (isa<MulOp>(op))
    return (int64_t)ElementwiseOpcode::Mul;
  if (isa<DivOp>(op))
    return (int64_t)ElementwiseOpcode::Div;
  if (isa<NegOp>(op))
    return (int64_t)ElementwiseOpcode::Neg;
  if (auto c = dyn_cast<CastOp>(op); c && isa<FloatType>(tensorOf(c.getInput()).getElementType()))
    return (int64_t)ElementwiseOpcode::Cast;
  return -1;
}

/// The PTX of |op|'s kernel: zcc_elementwise(in_0, .., in_k, out, n), a
/// thread per result element; each input read at its broadcast offset
/// (static shapes: the strides are constants), the steps in f32, each
/// rounded to its type.
FailureOr<std::string> generatePtx(ElementwiseOp op) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  OpBuilder b(ctx);
  auto module = ModuleOp::create(loc);
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
  b.setInsertionPointToEnd(module.getBody());
  auto gpuModule = gpu::GPUModuleOp::create(b, loc, "zcc_kernels");
  b.setInsertionPointToStart(gpuModule.getBody());
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  int64_t inputs = op.getInputs().size();
  SmallVector<Type> args(inputs + 1, ptr);
  args.push_back(b.getI64Type());
  auto fn = gpu::GPUFuncOp::create(b, loc, "zcc_elementwise", b.getFunctionType(args, {}));
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  Block &body = fn.getBody().front();
  b.setInsertionPointToStart(&body);
  Type f32 = b.getF32Type(), i64 = b.getI64Type();
  auto toI64 = [&](Value index) { return arith::IndexCastOp::create(b, loc, i64, index); };
  Value i = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, toI64(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x)),
                            toI64(gpu::BlockDimOp::create(b, loc, gpu::Dimension::x))),
      toI64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x)));
  Value n = body.getArgument(inputs + 1);
  auto inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, n);
  auto guard = scf::IfOp::create(b, loc, inRange, /*withElseRegion=*/false);
  b.setInsertionPointToStart(&guard.getThenRegion().front());
  auto constant = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, i64, v); };
  auto widen = [&](Value v) -> Value {
    return v.getType() == f32 ? v : arith::ExtFOp::create(b, loc, f32, v).getResult();
  };
  auto narrow = [&](Value v, Type t) -> Value {
    return t == f32 ? v : arith::TruncFOp::create(b, loc, t, v).getResult();
  };
  auto out = op.getType();
  ArrayRef<int64_t> outShape = out.getShape();
  SmallVector<Value> values;
  for (int64_t k = 0; k < inputs; ++k) {
    auto in = tensorOf(op.getInputs()[k]);
    Value offset = i;
    if (in.getNumElements() == 1) {
      offset = constant(0);
    } else if (in.getNumElements() != out.getNumElements()) {
      // sum over kept dims d of ((i / outStride_d) % outDim_d) * inStride_d
      int64_t lead = out.getRank() - in.getRank(), outStride = 1, inStride = 1;
      SmallVector<int64_t> inStrides(out.getRank(), 0);
      for (int64_t d = in.getRank() - 1; d >= 0; --d) {
        inStrides[d + lead] = in.getDimSize(d) == 1 ? 0 : inStride;
        inStride *= in.getDimSize(d);
      }
      offset = constant(0);
      for (int64_t d = out.getRank() - 1; d >= 0; outStride *= outShape[d], --d) {
        if (!inStrides[d])
          continue;
        Value coord = arith::RemSIOp::create(
            b, loc, arith::DivSIOp::create(b, loc, i, constant(outStride)), constant(outShape[d]));
        offset = arith::AddIOp::create(
            b, loc, offset, arith::MulIOp::create(b, loc, coord, constant(inStrides[d])));
      }
    }
    Type elem = in.getElementType();
    auto at = LLVM::GEPOp::create(b, loc, ptr, elem, body.getArgument(k), ValueRange{offset});
    values.push_back(widen(LLVM::LoadOp::create(b, loc, elem, at)));
  }
  ArrayRef<int64_t> program = op.getProgram();
  for (int64_t s = 0; s < (int64_t)program.size() / 3; ++s) {
    Value x = values[program[3 * s + 1]];
    Value y = program[3 * s + 2] >= 0 ? values[program[3 * s + 2]] : Value();
    Value r;
    switch ((ElementwiseOpcode)program[3 * s]) {
    case ElementwiseOpcode::Add:
      r = arith::AddFOp::create(b, loc, x, y);
      break;
    case ElementwiseOpcode::Sub:
      r = arith::SubFOp::create(b, loc, x, y);
      break;
    case ElementwiseOpcode::Mul:
      r = arith::MulFOp::create(b, loc, x, y);
      break;
    case ElementwiseOpcode::Div:
      r = arith::DivFOp::create(b, loc, x, y);
      break;
    case ElementwiseOpcode::Neg:
      r = arith::NegFOp::create(b, loc, x);
      break;
    default:
      r = x;
      break; // cast: the rounding below
    }
    Type t = cast<TypeAttr>(op.getStepTypes()[s]).getValue();
    values.push_back(t == f32 ? r : widen(narrow(r, t)));
  }
  Type outElem = out.getElementType();
  auto dst = LLVM::GEPOp::create(b, loc, ptr, outElem, body.getArgument(inputs), ValueRange{i});
  LLVM::StoreOp::create(b, loc, narrow(values.back(), outElem), dst);
  b.setInsertionPointToEnd(&body);
  gpu::ReturnOp::create(b, loc);

  PassManager pm(ctx);
  GpuNVVMAttachTargetOptions target;
  target.chip = "sm_90";
  pm.addPass(createGpuNVVMAttachTarget(target));
  pm.addPass(createSCFToControlFlowPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps());
  pm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
  if (failed(pm.run(module))) {
    module->destroy();
    return op.emitOpError("could not generate its kernel (GPU -> NVVM -> PTX)");
  }
  std::string ptx;
  module.walk([&](gpu::BinaryOp bin) {
    for (Attribute a : bin.getObjects())
      if (auto obj = dyn_cast<gpu::ObjectAttr>(a))
        ptx = obj.getObject().str();
  });
  module->destroy();
  if (ptx.empty())
    return op.emitOpError("the GPU -> NVVM -> PTX path produced no PTX");
  return ptx;
}

struct ZeroFuseElementwise : zcc::impl::ZeroFuseElementwiseBase<ZeroFuseElementwise> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *b) { blocks.push_back(b); });
    for (Block *b : blocks)
      fuse(*b);
    if (!codegen)
      return;
    WalkResult r = getOperation().walk([&](ElementwiseOp op) {
      if (op.getPtxAttr())
        return WalkResult::advance();
      FailureOr<std::string> ptx = generatePtx(op);
      if (failed(ptx))
        return WalkResult::interrupt();
      op.setPtxAttr(StringAttr::get(op.getContext(), *ptx));
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      signalPassFailure();
  }

  /// From each not yet fused candidate (latest first), the tree of
  /// candidates below it whose values have one reader, in the tree, and the
  /// root's shape.
  void fuse(Block &block) {
    SmallVector<Operation *> ops;
    for (Operation &op : block)
      if (opcodeOf(&op) >= 0)
        ops.push_back(&op);
    llvm::SmallPtrSet<Operation *, 32> done;
    for (Operation *root : llvm::reverse(ops)) {
      if (done.contains(root))
        continue;
      auto shape = tensorOf(root->getResult(0));
      if (!shape.hasStaticShape())
        continue;
      llvm::SetVector<Operation *> tree;
      SmallVector<Operation *> work{root};
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        if (!tree.insert(op))
          continue;
        for (Value v : op->getOperands()) {
          Operation *def = v.getDefiningOp();
          if (def && def->getBlock() == &block && opcodeOf(def) >= 0 && !done.contains(def) &&
              def->hasOneUse() && tensorOf(v).getShape() == shape.getShape())
            work.push_back(def);
        }
      }
      if (tree.size() < 2)
        continue;
      SmallVector<Operation *> order(tree.begin(), tree.end());
      llvm::sort(order, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
      SmallVector<Value> inputs;
      DenseMap<Value, int64_t> ref;
      for (Operation *op : order)
        for (Value v : op->getOperands())
          if (!tree.contains(v.getDefiningOp()) && !ref.count(v)) {
            ref[v] = inputs.size();
            inputs.push_back(v);
          }
      SmallVector<int64_t> program;
      SmallVector<Attribute> types;
      for (Operation *op : order) {
        program.push_back(opcodeOf(op));
        program.push_back(ref.lookup(op->getOperand(0)));
        program.push_back(op->getNumOperands() > 1 ? ref.lookup(op->getOperand(1)) : -1);
        ref[op->getResult(0)] = inputs.size() + (int64_t)types.size();
        types.push_back(TypeAttr::get(tensorOf(op->getResult(0)).getElementType()));
      }
      OpBuilder b(root);
      auto fused =
          ElementwiseOp::create(b, root->getLoc(), shape, inputs, b.getDenseI64ArrayAttr(program),
                                b.getArrayAttr(types), StringAttr());
      root->getResult(0).replaceAllUsesWith(fused.getResult());
      for (Operation *op : llvm::reverse(order)) {
        done.insert(op);
        op->erase();
      }
    }
  }
};

} // namespace

void zcc::registerCodegenInterfaces(DialectRegistry &registry) {
  registerAllExtensions(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
}
