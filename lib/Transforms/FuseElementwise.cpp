//===- FuseElementwise.cpp - generated kernels for elementwise trees -----===//
//
// A tree of elementwise ops whose intermediate values nothing outside it
// reads runs as one kernel that the compiler generates: Llama's rotary
// embedding q cos + concat(-q[.., D/2:], q[.., :D/2]) sin and its backward,
// SwiGLU's silu(g) u and its gradient products, chains of residual and
// gradient adds. The tree becomes zero.elementwise: its leaves are loads
// at shifted coordinates (slices and concatenations are index arithmetic),
// a concatenation's seam a select, every other step one float operation
// rounded to the type its tensor had. Its kernel is built as a gpu.func,
// lowered through MLIR's GPU -> NVVM -> LLVM path (the unary functions
// through libdevice, as nvcc's math library computes them) and the NVPTX
// back end to PTX for sm_90, which the plan carries and zrun loads with the
// driver API. See Passes.td.
//
// Size: the pass (finding and rewriting the trees) and the kernel
// generation (gpu.func to PTX) are one file; moving the generation to its
// own file is open in issue 51, not done yet.
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
#include "mlir/Dialect/Math/IR/Math.h"
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
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"

#include <map>

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

/// The opcode of an elementwise op that may join (or root) a fused tree, or
/// -1. Slices and concatenations join too, as shifted loads and picks.
int64_t opcodeOf(Operation *op) {
  if (op->getNumResults() != 1 || !isa<FloatType>(tensorOf(op->getResult(0)).getElementType()))
    return -1;
  auto code = [](ElementwiseOpcode c) { return (int64_t)c; };
  return llvm::TypeSwitch<Operation *, int64_t>(op)
      .Case([&](AddOp) { return code(ElementwiseOpcode::Add); })
      .Case([&](SubOp) { return code(ElementwiseOpcode::Sub); })
      .Case([&](MulOp) { return code(ElementwiseOpcode::Mul); })
      .Case([&](DivOp) { return code(ElementwiseOpcode::Div); })
      .Case([&](NegOp) { return code(ElementwiseOpcode::Neg); })
      .Case([&](AbsOp) { return code(ElementwiseOpcode::Abs); })
      .Case([&](ExpOp) { return code(ElementwiseOpcode::Exp); })
      .Case([&](LogOp) { return code(ElementwiseOpcode::Log); })
      .Case([&](SqrtOp) { return code(ElementwiseOpcode::Sqrt); })
      .Case([&](RsqrtOp) { return code(ElementwiseOpcode::Rsqrt); })
      .Case([&](ReciprocalOp) { return code(ElementwiseOpcode::Reciprocal); })
      .Case([&](TanhOp) { return code(ElementwiseOpcode::Tanh); })
      .Case([&](ErfOp) { return code(ElementwiseOpcode::Erf); })
      .Case([&](SigmoidOp) { return code(ElementwiseOpcode::Sigmoid); })
      .Case([&](ReluOp) { return code(ElementwiseOpcode::Relu); })
      .Case([&](SiluOp) { return code(ElementwiseOpcode::Silu); })
      .Case([&](CosOp) { return code(ElementwiseOpcode::Cos); })
      .Case([&](SinOp) { return code(ElementwiseOpcode::Sin); })
      .Case([&](GeluOp g) {
        return code(g.getApproximate() == GeluApprox::tanh ? ElementwiseOpcode::GeluTanh
                                                           : ElementwiseOpcode::Gelu);
      })
      .Case([&](CastOp c) {
        return isa<FloatType>(tensorOf(c.getInput()).getElementType())
                   ? code(ElementwiseOpcode::Cast)
                   : -1;
      })
      .Default([](Operation *) { return -1; });
}

/// A slice of unit strides (a shifted read) or a concatenation (a pick), of
/// floats.
bool isShuffle(Operation *op) {
  if (op->getNumResults() != 1 || !isa<FloatType>(tensorOf(op->getResult(0)).getElementType()))
    return false;
  if (auto slice = dyn_cast<SliceOp>(op))
    return llvm::all_of(slice.getStride(), [](int64_t s) { return s == 1; });
  return isa<ConcatOp>(op);
}

/// The CUDA toolkit whose libdevice the unary functions link: $CUDA_HOME
/// (or CUDA_ROOT, CUDA_PATH, as MLIR reads them), else /usr/local/cuda.
std::string cudaToolkitPath() {
  for (const char *var : {"CUDA_HOME", "CUDA_ROOT", "CUDA_PATH"})
    if (const char *path = std::getenv(var); path && *path)
      return path;
  return "/usr/local/cuda";
}

/// Whether a step's function comes from libdevice (__nv_expf and the like).
bool usesLibdevice(int64_t code) {
  switch ((ElementwiseOpcode)code) {
  case ElementwiseOpcode::Exp:
  case ElementwiseOpcode::Log:
  case ElementwiseOpcode::Sqrt:
  case ElementwiseOpcode::Rsqrt:
  case ElementwiseOpcode::Tanh:
  case ElementwiseOpcode::Erf:
  case ElementwiseOpcode::Sigmoid:
  case ElementwiseOpcode::Silu:
  case ElementwiseOpcode::Cos:
  case ElementwiseOpcode::Sin:
  case ElementwiseOpcode::Gelu:
  case ElementwiseOpcode::GeluTanh:
    return true;
  default:
    return false;
  }
}

/// Elements per thread of the vectorized entry (16 bytes of bf16).
constexpr int64_t kLanes = 8;

/// Whether |op| gets the vectorized entry: its innermost dimension splits
/// into groups of kLanes (the lanes of a thread differ in that coordinate
/// only).
bool vectorizable(ElementwiseOp op) {
  auto out = op.getType();
  return out.getRank() >= 1 && out.getShape().back() % kLanes == 0;
}

/// Builds |op|'s kernel `name`(in_0, .., in_k, out, n) into the gpu.module
/// at |b|: each thread computes |lanes| consecutive elements (1, or kLanes
/// with 16-byte accesses), n the element count. The coordinates are
/// computed where a load or a pick needs them (static shapes: divisions by
/// constants); each load at its shifted, clamped offset, as a vector where
/// the lanes read consecutive elements, once where they all read one; the
/// steps in f32, each rounded to its type.
void emitKernel(ElementwiseOp op, OpBuilder &b, StringRef name, int64_t lanes) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  int64_t inputs = op.getInputs().size(), outputs = op.getNumResults();
  SmallVector<Type> args(inputs + outputs, ptr);
  args.push_back(b.getI64Type());
  auto fn = gpu::GPUFuncOp::create(b, loc, name, b.getFunctionType(args, {}));
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  Block &body = fn.getBody().front();
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(&body);
  Type f32 = b.getF32Type(), i64 = b.getI64Type(), i32 = b.getI32Type();
  auto toI64 = [&](Value index) { return arith::IndexCastOp::create(b, loc, i64, index); };
  Value thread = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, toI64(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x)),
                            toI64(gpu::BlockDimOp::create(b, loc, gpu::Dimension::x))),
      toI64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x)));
  auto constant = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, i64, v); };
  Value i = lanes == 1 ? thread : arith::MulIOp::create(b, loc, thread, constant(lanes));
  Value n = body.getArgument(inputs + outputs);
  auto inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, n);
  auto guard = scf::IfOp::create(b, loc, inRange, /*withElseRegion=*/false);
  b.setInsertionPointToStart(&guard.getThenRegion().front());
  auto fconst = [&](double v) {
    return arith::ConstantFloatOp::create(b, loc, b.getF32Type(), APFloat((float)v));
  };
  auto widen = [&](Value v) -> Value {
    return v.getType() == f32 ? v : arith::ExtFOp::create(b, loc, f32, v).getResult();
  };
  auto narrow = [&](Value v, Type t) -> Value {
    return t == f32 ? v : arith::TruncFOp::create(b, loc, t, v).getResult();
  };
  auto out = op.getType();
  ArrayRef<int64_t> outShape = out.getShape();
  int64_t rank = out.getRank();
  SmallVector<int64_t> outStrides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    outStrides[d] = outStrides[d + 1] * outShape[d + 1];
  // Lane 0's coordinates; lane j's differ by j in the innermost one.
  SmallVector<Value> coords(rank);
  auto coord = [&](int64_t d) {
    if (!coords[d])
      coords[d] =
          arith::RemSIOp::create(b, loc, arith::DivSIOp::create(b, loc, i, constant(outStrides[d])),
                                 constant(outShape[d]));
    return coords[d];
  };
  auto laneCoord = [&](int64_t d, int64_t lane) -> Value {
    return lane && d == rank - 1
               ? arith::AddIOp::create(b, loc, coord(d), constant(lane)).getResult()
               : coord(d);
  };
  ArrayRef<int64_t> program = op.getProgram(), offsets = op.getOffsets();
  auto one = [&] { return fconst(1.0); };
  using Lanes = SmallVector<Value, kLanes>;
  SmallVector<Lanes> values;
  for (int64_t s = 0; s < (int64_t)program.size() / 4; ++s) {
    int64_t code = program[4 * s], aux = program[4 * s + 3];
    Type t = cast<TypeAttr>(op.getStepTypes()[s]).getValue();
    Lanes result;
    if (code == (int64_t)ElementwiseOpcode::Load) {
      int64_t k = program[4 * s + 1];
      auto in = tensorOf(op.getInputs()[k]);
      Type elem = in.getElementType();
      bool shifted =
          aux >= 0 && llvm::any_of(offsets.slice(aux, rank), [](int64_t o) { return o; });
      auto shiftOf = [&](int64_t d) { return shifted ? offsets[aux + d] : 0; };
      int64_t lead = rank - in.getRank();
      // clamp(c + shift) into the input's dimension d (of the result's rank)
      auto clamped = [&](Value c, int64_t d, int64_t dim, int64_t shift, int64_t span) -> Value {
        if (shift)
          c = arith::AddIOp::create(b, loc, c, constant(shift));
        if (shift < 0)
          c = arith::MaxSIOp::create(b, loc, c, constant(0));
        if (outShape[d] - span + shift > dim - span)
          c = arith::MinSIOp::create(b, loc, c, constant(dim - span));
        return c;
      };
      // The offset of every dimension but the innermost (lane 0's).
      Value outer = constant(0);
      int64_t stride = in.getRank() ? in.getDimSize(in.getRank() - 1) : 1;
      for (int64_t d = rank - 2; d >= lead; --d) {
        int64_t dim = in.getDimSize(d - lead);
        if (dim != 1)
          outer = arith::AddIOp::create(
              b, loc, outer,
              arith::MulIOp::create(b, loc, clamped(coord(d), d, dim, shiftOf(d), 1),
                                    constant(stride)));
        stride *= dim;
      }
      int64_t inner = in.getRank() ? in.getDimSize(in.getRank() - 1) : 1;
      auto loadAt = [&](Value offset, Type type, int64_t align) -> Value {
        auto at = LLVM::GEPOp::create(b, loc, ptr, elem, body.getArgument(k), ValueRange{offset});
        return LLVM::LoadOp::create(b, loc, type, at, align);
      };
      int64_t size = elem.getIntOrFloatBitWidth() / 8;
      // |lanes| consecutive elements from |offset| (a multiple of lanes): one
      // vector load, each lane widened.
      auto loadLanes = [&](Value offset) {
        Value v =
            loadAt(offset, VectorType::get({lanes}, elem), std::min<int64_t>(size * lanes, 16));
        Lanes l;
        for (int64_t j = 0; j < lanes; ++j)
          l.push_back(widen(LLVM::ExtractElementOp::create(
              b, loc, v, arith::ConstantIntOp::create(b, loc, i32, j))));
        return l;
      };
      if (in.getShape() == outShape && !shifted) {
        // Element for element: the result's own offset.
        if (lanes == 1) {
          result.push_back(widen(loadAt(i, elem, size)));
        } else {
          result = loadLanes(i);
        }
      } else if (inner == 1 || lead == rank) {
        // Every lane reads one element (broadcast along the innermost).
        Value v = widen(loadAt(outer, elem, size));
        result.assign(lanes, v);
      } else if (lanes > 1 && inner % lanes == 0 && shiftOf(rank - 1) % lanes == 0) {
        // The lanes read consecutive, aligned elements: one vector load.
        Value c = clamped(coord(rank - 1), rank - 1, inner, shiftOf(rank - 1), lanes);
        result = loadLanes(arith::AddIOp::create(b, loc, outer, c));
      } else {
        for (int64_t j = 0; j < lanes; ++j) {
          Value c = clamped(laneCoord(rank - 1, j), rank - 1, inner, shiftOf(rank - 1), 1);
          result.push_back(widen(loadAt(arith::AddIOp::create(b, loc, outer, c), elem, size)));
        }
      }
    } else {
      for (int64_t j = 0; j < lanes; ++j) {
        Value x = values[program[4 * s + 1]][j];
        Value y = program[4 * s + 2] >= 0 ? values[program[4 * s + 2]][j] : Value();
        Value r;
        switch ((ElementwiseOpcode)code) {
        case ElementwiseOpcode::Load:
          break; // above
        case ElementwiseOpcode::Pick: {
          auto below =
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, laneCoord(offsets[aux], j),
                                    constant(offsets[aux + 1]));
          r = arith::SelectOp::create(b, loc, below, x, y);
          break;
        }
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
        case ElementwiseOpcode::Cast:
          r = x; // the rounding below
          break;
        // The unary functions as runtime/cuda/Elementwise.cu's kernels spell them.
        case ElementwiseOpcode::Abs:
          r = math::AbsFOp::create(b, loc, x);
          break;
        case ElementwiseOpcode::Exp:
          r = math::ExpOp::create(b, loc, x);
          break;
        case ElementwiseOpcode::Log:
          r = math::LogOp::create(b, loc, x);
          break;
        case ElementwiseOpcode::Sqrt:
          r = math::SqrtOp::create(b, loc, x);
          break;
        case ElementwiseOpcode::Rsqrt:
          r = arith::DivFOp::create(b, loc, one(), math::SqrtOp::create(b, loc, x));
          break;
        case ElementwiseOpcode::Reciprocal:
          r = arith::DivFOp::create(b, loc, one(), x);
          break;
        case ElementwiseOpcode::Tanh:
          r = math::TanhOp::create(b, loc, x);
          break;
        case ElementwiseOpcode::Erf:
          r = math::ErfOp::create(b, loc, x);
          break;
        case ElementwiseOpcode::Sigmoid:
        case ElementwiseOpcode::Silu: {
          Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
          r = arith::DivFOp::create(b, loc, code == (int64_t)ElementwiseOpcode::Silu ? x : one(),
                                    arith::AddFOp::create(b, loc, one(), e));
          break;
        }
        case ElementwiseOpcode::Relu: {
          auto negative = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, fconst(0.0));
          r = arith::SelectOp::create(b, loc, negative, fconst(0.0), x);
          break;
        }
        case ElementwiseOpcode::Cos:
          r = math::CosOp::create(b, loc, x);
          break;
        case ElementwiseOpcode::Sin:
          r = math::SinOp::create(b, loc, x);
          break;
        case ElementwiseOpcode::Gelu:
        case ElementwiseOpcode::GeluTanh: {
          Value inner;
          if (code == (int64_t)ElementwiseOpcode::Gelu) {
            inner = math::ErfOp::create(
                b, loc, arith::MulFOp::create(b, loc, x, fconst(0.70710678118654752)));
          } else {
            Value cube = arith::MulFOp::create(
                b, loc,
                arith::MulFOp::create(b, loc, arith::MulFOp::create(b, loc, fconst(0.044715), x),
                                      x),
                x);
            inner =
                math::TanhOp::create(b, loc,
                                     arith::MulFOp::create(b, loc, fconst(0.7978845608028654),
                                                           arith::AddFOp::create(b, loc, x, cube)));
          }
          r = arith::MulFOp::create(b, loc, arith::MulFOp::create(b, loc, fconst(0.5), x),
                                    arith::AddFOp::create(b, loc, one(), inner));
          break;
        }
        }
        result.push_back(r);
      }
    }
    for (Value &v : result)
      v = t == f32 ? v : widen(narrow(v, t));
    values.push_back(std::move(result));
  }
  for (int64_t k = 0; k < outputs; ++k) {
    Type outElem = cast<RankedTensorType>(op.getResult(k).getType()).getElementType();
    const Lanes &value = values[op.outputStep(k)];
    auto dst =
        LLVM::GEPOp::create(b, loc, ptr, outElem, body.getArgument(inputs + k), ValueRange{i});
    int64_t size = outElem.getIntOrFloatBitWidth() / 8;
    if (lanes == 1) {
      LLVM::StoreOp::create(b, loc, narrow(value[0], outElem), dst, size);
    } else {
      auto vecType = VectorType::get({lanes}, outElem);
      Value v = LLVM::PoisonOp::create(b, loc, vecType);
      for (int64_t j = 0; j < lanes; ++j)
        v = LLVM::InsertElementOp::create(b, loc, v, narrow(value[j], outElem),
                                          arith::ConstantIntOp::create(b, loc, i32, j));
      LLVM::StoreOp::create(b, loc, v, dst, std::min<int64_t>(size * lanes, 16));
    }
  }
  b.setInsertionPointToEnd(&body);
  gpu::ReturnOp::create(b, loc);
}

/// The PTX of |op|'s kernels: zcc_elementwise, a thread per element, and
/// where the shape allows zcc_elementwise_v8, kLanes elements per thread
/// with 16-byte accesses, which zrun launches when every tensor is 16-byte
/// aligned (runtime/cuda/Generated.cu).
FailureOr<std::string> generatePtx(ElementwiseOp op) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  OpBuilder b(ctx);
  auto module = ModuleOp::create(loc);
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
  b.setInsertionPointToEnd(module.getBody());
  auto gpuModule = gpu::GPUModuleOp::create(b, loc, "zcc_kernels");
  b.setInsertionPointToStart(gpuModule.getBody());
  emitKernel(op, b, "zcc_elementwise", 1);
  if (vectorizable(op))
    emitKernel(op, b, "zcc_elementwise_v8", kLanes);
  ArrayRef<int64_t> program = op.getProgram();

  PassManager pm(ctx);
  GpuNVVMAttachTargetOptions target;
  target.chip = "sm_90";
  pm.addPass(createGpuNVVMAttachTarget(target));
  pm.addPass(createSCFToControlFlowPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps());
  pm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  if (llvm::any_of(llvm::seq<size_t>(0, program.size() / 4),
                   [&](size_t s) { return usesLibdevice(program[4 * s]); })) {
    binary.toolkitPath = cudaToolkitPath();
    std::string libdevice = binary.toolkitPath + "/nvvm/libdevice/libdevice.10.bc";
    if (!llvm::sys::fs::is_regular_file(libdevice)) {
      module->destroy();
      return op.emitOpError() << "needs libdevice for its kernel's exp/log/tanh/erf/sqrt/sin/cos, "
                              << "and there is no " << libdevice
                              << ": set CUDA_HOME to the CUDA toolkit, or compile with "
                                 "--fuse-elementwise=false";
    }
  }
  pm.addPass(createGpuModuleToBinaryPass(binary));
  // The lowering's own errors say what failed; the kernel module's IR they
  // would print after them is the compiler's, not the user's.
  bool printOp = ctx->shouldPrintOpOnDiagnostic();
  ctx->printOpOnDiagnostic(false);
  LogicalResult lowered = pm.run(module);
  ctx->printOpOnDiagnostic(printOp);
  if (failed(lowered)) {
    module->destroy();
    return op.emitOpError("could not generate its kernel (GPU -> NVVM -> PTX); is CUDA_HOME "
                          "the CUDA toolkit? --fuse-elementwise=false compiles without");
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
  // A libdevice function left as a call (libdevice not found) would fail
  // only when zrun loads the plan on the GPU: say so here.
  if (size_t at = ptx.find(".extern .func"); at != std::string::npos) {
    size_t name = ptx.find("__nv_", at);
    return op.emitOpError() << "generated a kernel that calls "
                            << (name == std::string::npos
                                    ? "an external function"
                                    : ptx.substr(name, ptx.find_first_of(" ;(\n", name) - name))
                            << ", which libdevice should have provided: no " << binary.toolkitPath
                            << "/nvvm/libdevice/libdevice.10.bc; set CUDA_HOME to the CUDA "
                            << "toolkit, or compile with --fuse-elementwise=false";
  }
  return ptx;
}

struct ZeroFuseElementwise : zcc::impl::ZeroFuseElementwiseBase<ZeroFuseElementwise> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *b) { blocks.push_back(b); });
    for (Block *b : blocks) {
      foldResidualAdds(*b);
      splitToSlices(*b);
      duplicateUnary(*b);
      fuse(*b);
      mergeSiblings(*b);
    }
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

  /// The backward's residual-stream add `dx + r`, dx a norm gradient's
  /// dinput that nothing else reads and r computed before it: the norm
  /// gradient adds r as it writes dx (its `residual`), one pass over dx
  /// fewer (Llama: 2 per layer).
  static void foldResidualAdds(Block &block) {
    SmallVector<AddOp> adds;
    for (Operation &op : block)
      if (auto add = dyn_cast<AddOp>(op))
        adds.push_back(add);
    for (AddOp add : adds) {
      for (auto [dx, r] :
           {std::pair(add.getLhs(), add.getRhs()), std::pair(add.getRhs(), add.getLhs())}) {
        Operation *grad = dx.getDefiningOp();
        if (!grad || !isa<RmsNormGradOp, LayerNormGradOp>(grad) || dx != grad->getResult(0) ||
            !dx.hasOneUse() || dx.getType() != r.getType() || dx.getType() != add.getType() ||
            grad->getNumOperands() != 3 || grad->getBlock() != &block)
          continue;
        Operation *def = r.getDefiningOp();
        if (def ? def->getBlock() != &block || !def->isBeforeInBlock(grad)
                : cast<BlockArgument>(r).getOwner() != &block)
          continue;
        if (auto rms = dyn_cast<RmsNormGradOp>(grad))
          rms.getResidualMutable().assign(r);
        else
          cast<LayerNormGradOp>(grad).getResidualMutable().assign(r);
        add.getResult().replaceAllUsesWith(dx);
        add->erase();
        break;
      }
    }
  }

  /// A split of floats whose every part only elementwise ops read (a fused
  /// gate/up projection's SwiGLU, forward and backward): each part becomes
  /// one slice per reader, which the reader's tree reads in place as a
  /// shifted load, instead of a kernel copying the parts out. The split's
  /// input lives as long as its parts did (their last reader), the parts are
  /// never stored.
  static void splitToSlices(Block &block) {
    SmallVector<SplitOp> splits;
    for (Operation &op : block)
      if (auto split = dyn_cast<SplitOp>(op))
        splits.push_back(split);
    for (SplitOp split : splits) {
      auto in = tensorOf(split.getInput());
      if (!in.hasStaticShape() || !isa<FloatType>(in.getElementType()))
        continue;
      bool fusible = llvm::all_of(split->getUsers(), [&](Operation *user) {
        return user->getBlock() == &block && opcodeOf(user) >= 0;
      });
      if (!fusible || split->use_empty())
        continue;
      int64_t axis = split.getAxis() < 0 ? split.getAxis() + in.getRank() : split.getAxis();
      int64_t offset = 0;
      for (OpResult part : split->getResults()) {
        SmallVector<int64_t> start(in.getRank(), 0), limit(in.getShape()), step(in.getRank(), 1);
        start[axis] = offset;
        offset += tensorOf(part).getDimSize(axis);
        limit[axis] = offset;
        SmallVector<OpOperand *> uses;
        for (OpOperand &use : part.getUses())
          uses.push_back(&use);
        for (OpOperand *use : uses) {
          OpBuilder b(use->getOwner());
          use->set(SliceOp::create(b, split.getLoc(), part.getType(), split.getInput(),
                                   b.getDenseI64ArrayAttr(start), b.getDenseI64ArrayAttr(limit),
                                   b.getDenseI64ArrayAttr(step)));
        }
      }
      split->erase();
    }
  }

  /// A unary elementwise op read by several elementwise ops whose input
  /// lives on past its last reader anyway (SwiGLU's silu(g): the forward's
  /// silu(g) u and the backward's dy silu(g), with g kept for the backward's
  /// sigmoid(g)): one copy per reader, so that each joins its reader's tree
  /// and its result is never stored.
  static void duplicateUnary(Block &block) {
    SmallVector<Operation *> candidates;
    for (Operation &op : block) {
      int64_t code = opcodeOf(&op);
      if (code < 0 || !zrt::isUnaryOpcode(code) || op.hasOneUse() || op.use_empty())
        continue;
      auto fusible = [&](Operation *user) {
        return user->getBlock() == &block && (opcodeOf(user) >= 0 || isShuffle(user));
      };
      if (!llvm::all_of(op.getUsers(), fusible))
        continue;
      Operation *last = *llvm::max_element(
          op.getUsers(), [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
      Value input = op.getOperand(0);
      bool alive = llvm::any_of(input.getUsers(), [&](Operation *user) {
        return user != &op && user->getBlock() == &block && !user->isBeforeInBlock(last);
      });
      if (alive)
        candidates.push_back(&op);
    }
    for (Operation *op : candidates) {
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : op->getUses())
        uses.push_back(&use);
      for (OpOperand *use : llvm::drop_begin(uses)) {
        OpBuilder b(use->getOwner());
        use->set(b.clone(*op)->getResult(0));
      }
    }
  }

  /// From each elementwise op not yet fused (latest first), the tree of
  /// elementwise ops, slices and concatenations below it whose every reader
  /// is in the tree; then its program, each node emitted at the shifts its
  /// readers read it at. A concatenation read by anything else (a matmul:
  /// the gradient of a fused projection, [dq, dk, dv] or [d gate, d up]) is
  /// a root too: its pieces computed where they land, in one kernel that
  /// writes the whole result, instead of each piece written by its own
  /// kernel and copied again by the concatenation.
  void fuse(Block &block) {
    SmallVector<Operation *> roots;
    for (Operation &op : block)
      if (opcodeOf(&op) >= 0 || isa<ConcatOp>(op) && isShuffle(&op))
        roots.push_back(&op);
    llvm::SmallPtrSet<Operation *, 32> done;
    for (Operation *root : llvm::reverse(roots)) {
      if (done.contains(root))
        continue;
      auto shape = tensorOf(root->getResult(0));
      if (!shape.hasStaticShape() || shape.getNumElements() == 0)
        continue;
      llvm::SetVector<Operation *> tree;
      tree.insert(root);
      for (bool grew = true; grew;) {
        grew = false;
        for (size_t t = 0; t < tree.size(); ++t)
          for (Value v : tree[t]->getOperands())
            if (Operation *def = v.getDefiningOp();
                def && !tree.contains(def) && joins(def, block, tree, done, shape.getRank()))
              grew |= tree.insert(def);
      }
      if (tree.size() < 2)
        continue;
      Program program(tree, shape);
      if (failed(program.emit(root->getResult(0), SmallVector<int64_t>(shape.getRank(), 0))))
        continue;
      OpBuilder b(root);
      auto fused = ElementwiseOp::create(
          b, root->getLoc(), TypeRange{shape}, program.inputs,
          b.getDenseI64ArrayAttr(program.steps), b.getArrayAttr(program.types),
          b.getDenseI64ArrayAttr(program.offsets), b.getDenseI64ArrayAttr({}), StringAttr());
      root->getResult(0).replaceAllUsesWith(fused.getResult(0));
      SmallVector<Operation *> order(tree.begin(), tree.end());
      llvm::sort(order, [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
      for (Operation *op : llvm::reverse(order)) {
        done.insert(op);
        op->erase();
      }
    }
  }

  /// Sibling trees: a fused op B that reads an input of a fused op A shortly
  /// before it, of the same shape, every operand of B available at A (or a
  /// constant, moved up): one kernel with both results at A, so that the
  /// shared inputs are read once (SwiGLU's backward: dy silu(g) and
  /// dy u silu'(g) read dy and g twice, two of the five 4 x 1024 x 8192
  /// passes a Llama 1B layer spends there). The steps of B follow A's, with
  /// repeated ones (the same loads, the same functions of them) computed
  /// once. B's result then lives from A on: at most kWindow ops earlier.
  static void mergeSiblings(Block &block) {
    constexpr int kWindow = 8;
    SmallVector<ElementwiseOp> ops;
    for (Operation &op : block)
      if (auto e = dyn_cast<ElementwiseOp>(op))
        ops.push_back(e);
    for (size_t bi = 1; bi < ops.size(); ++bi) {
      ElementwiseOp later = ops[bi];
      for (size_t ai = bi; ai-- > 0;) {
        ElementwiseOp first = ops[ai]; // null: merged into an earlier op
        if (!first || !canMerge(first, later, kWindow))
          continue;
        ops[ai] = merge(first, later);
        ops[bi] = nullptr;
        break;
      }
    }
  }

  static bool canMerge(ElementwiseOp first, ElementwiseOp later, int window) {
    if (first.getPtxAttr() || later.getPtxAttr() ||
        first.getType().getShape() != later.getType().getShape() ||
        (first.getProgram().size() + later.getProgram().size()) / 4 > Program::kMaxSteps)
      return false;
    int distance = 0;
    for (Operation *op = first->getNextNode(); op && op != later.getOperation();
         op = op->getNextNode())
      if (++distance > window)
        return false;
    bool shares = llvm::any_of(later.getInputs(),
                               [&](Value v) { return llvm::is_contained(first.getInputs(), v); });
    return shares && llvm::all_of(later.getInputs(), [&](Value v) {
             Operation *def = v.getDefiningOp();
             return !def || def->isBeforeInBlock(first) ||
                    (isa<ConstantOp>(def) && def->getBlock() == first->getBlock());
           });
  }

  /// |first| and |later| as one op at |first|, results first's then later's.
  static ElementwiseOp merge(ElementwiseOp first, ElementwiseOp later) {
    for (Value v : later.getInputs())
      if (Operation *def = v.getDefiningOp(); def && !def->isBeforeInBlock(first))
        def->moveBefore(first); // a constant
    SmallVector<Value> inputs(first.getInputs());
    SmallVector<int64_t> steps(first.getProgram()), offsets(first.getOffsets());
    SmallVector<Attribute> types(first.getStepTypes().begin(), first.getStepTypes().end());
    SmallVector<int64_t> outputs;
    for (unsigned k = 0; k < first.getNumResults(); ++k)
      outputs.push_back(first.outputStep(k));
    // Later's steps, renumbered; a step equal to an earlier one is that one.
    ArrayRef<int64_t> program = later.getProgram();
    int64_t offsetBase = (int64_t)offsets.size();
    llvm::append_range(offsets, later.getOffsets());
    SmallVector<int64_t> map;
    for (int64_t s = 0; s < (int64_t)program.size() / 4; ++s) {
      int64_t code = program[4 * s], a = program[4 * s + 1], b = program[4 * s + 2],
              c = program[4 * s + 3];
      bool load = code == (int64_t)ElementwiseOpcode::Load;
      if (load) {
        Value in = later.getInputs()[a];
        auto *it = llvm::find(inputs, in);
        a = it - inputs.begin();
        if (it == inputs.end())
          inputs.push_back(in);
      } else {
        a = map[a];
        b = b >= 0 ? map[b] : b;
      }
      if (c >= 0)
        c += offsetBase;
      Attribute type = later.getStepTypes()[s];
      int64_t same = -1;
      for (int64_t t = 0; t < (int64_t)types.size() && same < 0; ++t)
        if (steps[4 * t] == code && steps[4 * t + 1] == a && steps[4 * t + 2] == b &&
            sameOffsets(offsets, steps[4 * t + 3], c, first.getType().getRank(), code) &&
            types[t] == type)
          same = t;
      if (same >= 0) {
        map.push_back(same);
        continue;
      }
      steps.append({code, a, b, c});
      types.push_back(type);
      map.push_back((int64_t)types.size() - 1);
    }
    SmallVector<Type> resultTypes(first.getResultTypes());
    llvm::append_range(resultTypes, later.getResultTypes());
    for (unsigned k = 0; k < later.getNumResults(); ++k)
      outputs.push_back(map[later.outputStep(k)]);
    OpBuilder b(first);
    auto merged =
        ElementwiseOp::create(b, first.getLoc(), resultTypes, inputs, b.getDenseI64ArrayAttr(steps),
                              b.getArrayAttr(types), b.getDenseI64ArrayAttr(offsets),
                              b.getDenseI64ArrayAttr(outputs), StringAttr());
    unsigned n = first.getNumResults();
    for (unsigned k = 0; k < n; ++k)
      first.getResult(k).replaceAllUsesWith(merged.getResult(k));
    for (unsigned k = 0; k < later.getNumResults(); ++k)
      later.getResult(k).replaceAllUsesWith(merged.getResult(n + k));
    first.erase();
    later.erase();
    return merged;
  }

  /// Whether two steps' `c` operands name the same offsets (loads: |rank|
  /// of them, picks: 2; -1 for none).
  static bool sameOffsets(ArrayRef<int64_t> offsets, int64_t x, int64_t y, int64_t rank,
                          int64_t code) {
    if (x < 0 || y < 0)
      return x == y;
    int64_t n = code == (int64_t)ElementwiseOpcode::Pick ? 2 : rank;
    return offsets.slice(x, n) == offsets.slice(y, n);
  }

  /// Whether |def| may join |tree|: an elementwise op, a unit-stride slice
  /// or a concatenation of the root's rank in the same block, every reader
  /// of it in the tree, and of the shape of each elementwise reader (an
  /// intermediate value does not broadcast).
  static bool joins(Operation *def, Block &block, const llvm::SetVector<Operation *> &tree,
                    const llvm::SmallPtrSetImpl<Operation *> &done, int64_t rank) {
    if (def->getBlock() != &block || done.contains(def) || (opcodeOf(def) < 0 && !isShuffle(def)))
      return false;
    auto type = tensorOf(def->getResult(0));
    if (!type.hasStaticShape() || type.getRank() != rank || type.getNumElements() == 0)
      return false;
    return llvm::all_of(def->getUsers(), [&](Operation *user) {
      return tree.contains(user) &&
             (isShuffle(user) || tensorOf(user->getResult(0)).getShape() == type.getShape());
    });
  }

  /// A tree's steps: each (value, shift) emitted once, a leaf as a load.
  struct Program {
    static constexpr size_t kMaxSteps = 128; // past that, the separate kernels
    Program(const llvm::SetVector<Operation *> &tree, RankedTensorType root)
        : tree(tree), root(root) {}

    LogicalResult emit(Value v, const SmallVector<int64_t> &shift) {
      return success(index(v, shift) >= 0);
    }

    /// The step computing |v| at the root's coordinates plus |shift|; -1
    /// past the step budget.
    int64_t index(Value v, const SmallVector<int64_t> &shift) {
      auto key =
          std::make_pair(v.getAsOpaquePointer(), std::vector<int64_t>(shift.begin(), shift.end()));
      if (auto it = memo.find(key); it != memo.end())
        return it->second;
      if (types.size() >= kMaxSteps)
        return -1;
      Operation *def = v.getDefiningOp();
      int64_t r;
      if (!def || !tree.contains(def)) {
        auto leaf = tensorOf(v);
        if (!leaf.hasStaticShape() || leaf.getNumElements() == 0)
          return -1; // a load clamps into [0, dim): the separate kernels instead
        auto [it, added] = inputIndex.try_emplace(v, (int64_t)inputs.size());
        if (added)
          inputs.push_back(v);
        bool shifted = llvm::any_of(shift, [](int64_t s) { return s != 0; });
        r = step(ElementwiseOpcode::Load, it->second, -1, shifted ? offsetsOf(shift) : -1,
                 tensorOf(v).getElementType());
      } else if (auto slice = dyn_cast<SliceOp>(def)) {
        SmallVector<int64_t> inner(shift);
        for (auto [d, start] : llvm::enumerate(slice.getStart()))
          inner[d] += start;
        r = index(slice.getInput(), inner);
      } else if (auto concat = dyn_cast<ConcatOp>(def)) {
        int64_t axis = concat.getAxis(), offset = 0;
        SmallVector<std::pair<int64_t, int64_t>> pieces; // (step, where it starts)
        for (Value in : concat.getInputs()) {
          SmallVector<int64_t> inner(shift);
          inner[axis] -= offset;
          int64_t k = index(in, inner);
          if (k < 0)
            return -1;
          pieces.push_back({k, offset});
          offset += tensorOf(in).getDimSize(axis);
        }
        r = pieces.back().first;
        Type type = tensorOf(v).getElementType();
        for (int64_t p = (int64_t)pieces.size() - 2; p >= 0 && r >= 0; --p)
          r = step(ElementwiseOpcode::Pick, pieces[p].first, r,
                   offsetsOf({axis, pieces[p + 1].second - shift[axis]}), type);
      } else {
        int64_t a = index(def->getOperand(0), shift);
        int64_t c = def->getNumOperands() > 1 ? index(def->getOperand(1), shift) : -1;
        if (a < 0 || (def->getNumOperands() > 1 && c < 0))
          return -1;
        r = step((ElementwiseOpcode)opcodeOf(def), a, c, -1, tensorOf(v).getElementType());
      }
      if (r >= 0)
        memo[key] = r;
      return r;
    }

    int64_t step(ElementwiseOpcode code, int64_t a, int64_t c, int64_t aux, Type type) {
      if (types.size() >= kMaxSteps)
        return -1;
      steps.append({(int64_t)code, a, c, aux});
      types.push_back(TypeAttr::get(type));
      return (int64_t)types.size() - 1;
    }

    /// Where |values| start in `offsets` (appended unless already there).
    int64_t offsetsOf(ArrayRef<int64_t> values) {
      for (size_t at = 0; at + values.size() <= offsets.size(); ++at)
        if (ArrayRef<int64_t>(offsets).slice(at, values.size()) == values)
          return (int64_t)at;
      llvm::append_range(offsets, values);
      return (int64_t)(offsets.size() - values.size());
    }

    const llvm::SetVector<Operation *> &tree;
    RankedTensorType root;
    SmallVector<Value> inputs;
    DenseMap<Value, int64_t> inputIndex;
    SmallVector<int64_t> steps, offsets;
    SmallVector<Attribute> types;
    std::map<std::pair<const void *, std::vector<int64_t>>, int64_t> memo;
  };
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
