//===- ZeroToZrt.cpp - planned zero module -> runtime buffers and kernels -===//
//
// Kernel ABI (the runtime's side is runtime/cpu/Kernels.h):
//   binary  add sub mul div pow max min and or   (a, b) -> c, NumPy broadcast
//   cmp     ints = [predicate]                    (a, b) -> bool c
//   where                                         (cond, a, b) -> c
//   unary   neg abs exp log sqrt rsqrt reciprocal tanh erf sigmoid relu silu
//           cos sin not; gelu ints = [0 exact | 1 tanh]
//   cast, expand                                  (x) -> y, shapes/types from buffers
//   transpose ints = permutation; slice ints = start ++ stride
//   concat / split ints = [axis]; gather ints = [axis] (data, indices) -> y
//   matmul  ints = [transpose_lhs, transpose_rhs] (matmul_bias: the same, bias third input)
//   matmul_bgrad  in = [x [R, K], dy [R, N]], out = [x^T dy, column sums of dy]
//   matmul_bias_gelu  ints as matmul; in = [a, b, bias], out = [gelu_tanh(pre), pre]
//   matmul_gelu_grad  ints as matmul; in = [a, b, pre], out = [gelu_tanh'(pre) * (a b)]
//   cast_many     in = [x_0 ..], out = [y_0 ..]: y_i = cast(x_i)
//   elementwise   ints = [inputs, steps, (opcode, a, b, dtype) per step], attribute
//                 `code` = the generated PTX (zero-fuse-elementwise)
//   cast_concat   in = [x_0 ..], out = [y (1-D)]: the x_i cast and laid end to end
//   reduce  ints = [kind, keepdims, axes...]      (kind: sum mean max min prod)
//   softmax / log_softmax ints = [axis]
//   layer_norm ints = [axis], floats = [epsilon]  (x, scale[, bias]) -> y
//   rms_norm   ints = [axis], floats = [epsilon]  (x, scale) -> y
//   attention ints = [nan_to_zero], floats = [scale] (q, k, v, bias) -> (out, lse)
//   attention_grad floats = [scale]  (q, k, v, bias, out, lse, dout) -> (dq, dk, dv)
//   attention_packed: attention with ints [nan_to_zero, 1], (qkv, bias) -> (out, lse);
//   its grad: attention_grad with ints [1], (qkv, bias, out, lse, dout) -> (dqkv)
//   cross_entropy ints = [ignore_index(, classes)] (logits, labels) -> f32 scalar; with
//                 classes, the logits' last dimension is padding beyond it
//
//===----------------------------------------------------------------------===//
#include "zcc/Analysis/MemoryPlan.h"
#include "zcc/Conversion/Passes.h"
#include "zero/ZeroOps.h"
#include "zrt/ZrtOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

namespace zcc {
#define GEN_PASS_DEF_CONVERTZEROTOZRT
#include "zcc/Conversion/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc;
namespace zero = zcc::zero;

namespace {
struct KernelSpec {
  std::string name;
  SmallVector<int64_t> ints;
  SmallVector<double> floats;
  std::string code; // generated device code (PTX), if any
};

/// The plan's element type code (plan.proto's DType) of a float type.
int64_t planFloatType(Type t) { return t.isBF16() ? 4 : t.isF16() ? 3 : 1; }

/// The runtime kernel that computes |op|, or failure for an op without one.
/// cross_entropy(_grad): [ignore_index], then the real class count when the
/// logits are padded (zero-pad-gemms).
template <typename Op> SmallVector<int64_t> crossEntropyInts(Op op) {
  SmallVector<int64_t> ints{op.getIgnoreIndex()};
  if (auto classes = op.getClasses())
    ints.push_back(*classes);
  return ints;
}

FailureOr<KernelSpec> kernelFor(Operation *op) {
  auto simple = [](StringRef name) { return KernelSpec{name.str(), {}, {}}; };
  return llvm::TypeSwitch<Operation *, FailureOr<KernelSpec>>(op)
      .Case([&](zero::AddOp) { return simple("add"); })
      .Case([&](zero::SubOp) { return simple("sub"); })
      .Case([&](zero::MulOp) { return simple("mul"); })
      .Case([&](zero::DivOp) { return simple("div"); })
      .Case([&](zero::PowOp) { return simple("pow"); })
      .Case([&](zero::MaxOp) { return simple("max"); })
      .Case([&](zero::MinOp) { return simple("min"); })
      .Case([&](zero::AndOp) { return simple("and"); })
      .Case([&](zero::OrOp) { return simple("or"); })
      .Case([&](zero::CmpOp c) {
        return KernelSpec{"cmp", {(int64_t)c.getPredicate()}, {}};
      })
      .Case([&](zero::WhereOp) { return simple("where"); })
      .Case([&](zero::NegOp) { return simple("neg"); })
      .Case([&](zero::AbsOp) { return simple("abs"); })
      .Case([&](zero::ExpOp) { return simple("exp"); })
      .Case([&](zero::LogOp) { return simple("log"); })
      .Case([&](zero::SqrtOp) { return simple("sqrt"); })
      .Case([&](zero::RsqrtOp) { return simple("rsqrt"); })
      .Case([&](zero::ReciprocalOp) { return simple("reciprocal"); })
      .Case([&](zero::TanhOp) { return simple("tanh"); })
      .Case([&](zero::ErfOp) { return simple("erf"); })
      .Case([&](zero::SigmoidOp) { return simple("sigmoid"); })
      .Case([&](zero::ReluOp) { return simple("relu"); })
      .Case([&](zero::SiluOp) { return simple("silu"); })
      .Case([&](zero::CosOp) { return simple("cos"); })
      .Case([&](zero::SinOp) { return simple("sin"); })
      .Case([&](zero::NotOp) { return simple("not"); })
      .Case([&](zero::GeluOp g) {
        return KernelSpec{"gelu", {g.getApproximate() == zero::GeluApprox::tanh ? 1 : 0}, {}};
      })
      .Case([&](zero::CastOp) { return simple("cast"); })
      .Case([&](zero::ElementwiseOp e) {
        // [inputs, steps, then (opcode, a, b, plan dtype) per step]
        ArrayRef<int64_t> program = e.getProgram();
        int64_t steps = program.size() / 3;
        SmallVector<int64_t> ints{(int64_t)e.getInputs().size(), steps};
        for (int64_t s = 0; s < steps; ++s) {
          ints.append({program[3 * s], program[3 * s + 1], program[3 * s + 2]});
          ints.push_back(planFloatType(cast<TypeAttr>(e.getStepTypes()[s]).getValue()));
        }
        KernelSpec spec{"elementwise", ints, {}, {}};
        if (auto ptx = e.getPtxAttr())
          spec.code = ptx.str();
        return spec;
      })
      .Case([&](zero::CastManyOp) { return simple("cast_many"); })
      .Case([&](zero::CastConcatOp) { return simple("cast_concat"); })
      .Case([&](zero::ExpandOp) { return simple("expand"); })
      .Case([&](zero::TransposeOp t) {
        return KernelSpec{"transpose", SmallVector<int64_t>(t.getPermutation()), {}};
      })
      .Case([&](zero::SliceOp s) {
        SmallVector<int64_t> ints(s.getStart());
        llvm::append_range(ints, s.getStride());
        return KernelSpec{"slice", ints, {}};
      })
      .Case([&](zero::ConcatOp c) {
        int64_t rank = cast<RankedTensorType>(c.getType()).getRank();
        return KernelSpec{"concat", {(c.getAxis() + rank) % rank}, {}};
      })
      .Case([&](zero::SplitOp s) {
        int64_t rank = cast<RankedTensorType>(s.getInput().getType()).getRank();
        return KernelSpec{"split", {(s.getAxis() + rank) % rank}, {}};
      })
      .Case([&](zero::GatherOp g) {
        int64_t rank = cast<RankedTensorType>(g.getInput().getType()).getRank();
        return KernelSpec{"gather", {(g.getAxis() + rank) % rank}, {}};
      })
      .Case([&](zero::MatmulOp m) {
        return KernelSpec{"matmul", {m.getTransposeLhs(), m.getTransposeRhs()}, {}};
      })
      .Case([&](zero::MatmulBiasOp m) {
        return KernelSpec{"matmul_bias", {m.getTransposeLhs(), m.getTransposeRhs()}, {}};
      })
      .Case([&](zero::MatmulBgradOp) { return KernelSpec{"matmul_bgrad", {}, {}}; })
      .Case([&](zero::MatmulBiasGeluOp m) {
        return KernelSpec{"matmul_bias_gelu", {m.getTransposeLhs(), m.getTransposeRhs()}, {}};
      })
      .Case([&](zero::MatmulGeluGradOp m) {
        return KernelSpec{"matmul_gelu_grad", {m.getTransposeLhs(), m.getTransposeRhs()}, {}};
      })
      .Case([&](zero::ReduceOp r) {
        SmallVector<int64_t> ints{(int64_t)r.getKind(), r.getKeepdims()};
        llvm::append_range(ints, r.getAxes());
        return KernelSpec{"reduce", ints, {}};
      })
      .Case([&](zero::SoftmaxOp s) { return KernelSpec{"softmax", {s.getAxis()}, {}}; })
      .Case([&](zero::BiasSoftmaxOp s) {
        return KernelSpec{"bias_softmax", {s.getNanToZero() ? 1 : 0}, {}};
      })
      .Case([&](zero::AttentionOp a) {
        return KernelSpec{"attention", {a.getNanToZero() ? 1 : 0},
                          {a.getScale().convertToDouble()}};
      })
      .Case([&](zero::AttentionPackedOp a) {
        return KernelSpec{"attention", {a.getNanToZero() ? 1 : 0, 1},
                          {a.getScale().convertToDouble()}};
      })
      .Case([&](zero::AttentionPackedGradOp a) {
        return KernelSpec{"attention_grad", {1}, {a.getScale().convertToDouble()}};
      })
      .Case([&](zero::AttentionGradOp a) {
        return KernelSpec{"attention_grad", {}, {a.getScale().convertToDouble()}};
      })
      .Case([&](zero::LogSoftmaxOp s) { return KernelSpec{"log_softmax", {s.getAxis()}, {}}; })
      .Case([&](zero::LayerNormOp l) {
        return KernelSpec{"layer_norm", {l.getAxis()}, {l.getEpsilon().convertToDouble()}};
      })
      .Case([&](zero::RmsNormOp l) {
        return KernelSpec{"rms_norm", {l.getAxis()}, {l.getEpsilon().convertToDouble()}};
      })
      .Case([&](zero::CrossEntropyOp c) {
        return KernelSpec{"cross_entropy", crossEntropyInts(c), {}};
      })
      .Case([&](zero::GeluGradOp g) {
        return KernelSpec{"gelu_grad", {g.getApproximate() == zero::GeluApprox::tanh ? 1 : 0}, {}};
      })
      .Case([&](zero::SoftmaxGradOp s) { return KernelSpec{"softmax_grad", {s.getAxis()}, {}}; })
      .Case([&](zero::LogSoftmaxGradOp s) {
        return KernelSpec{"log_softmax_grad", {s.getAxis()}, {}};
      })
      .Case([&](zero::LayerNormGradOp l) {
        return KernelSpec{"layer_norm_grad", {l.getAxis()}, {l.getEpsilon().convertToDouble()}};
      })
      .Case([&](zero::RmsNormGradOp l) {
        return KernelSpec{"rms_norm_grad", {l.getAxis()}, {l.getEpsilon().convertToDouble()}};
      })
      .Case([&](zero::CrossEntropyGradOp c) {
        return KernelSpec{"cross_entropy_grad", crossEntropyInts(c), {}};
      })
      .Case([&](zero::GatherGradOp g) {
        KernelSpec spec{"gather_grad", {g.getAxis()}, {}};
        if (auto pad = g.getPaddingIdx())
          spec.ints.push_back(*pad);
        return spec;
      })
      .Case([&](zero::SliceGradOp s) {
        SmallVector<int64_t> ints(s.getStart());
        llvm::append_range(ints, s.getStride());
        return KernelSpec{"slice_grad", ints, {}};
      })
      .Case([&](zero::AdamWOp a) {
        return KernelSpec{"adamw",
                          {},
                          {a.getBeta1().convertToDouble(), a.getBeta2().convertToDouble(),
                           a.getEpsilon().convertToDouble(), a.getWeightDecay().convertToDouble()}};
      })
      .Case([&](zero::SgdOp o) {
        return KernelSpec{"sgd",
                          {o.getNesterov() ? 1 : 0},
                          {o.getMomentum().convertToDouble(), o.getWeightDecay().convertToDouble()}};
      })
      .Default([&](Operation *op) -> FailureOr<KernelSpec> {
        return op->emitError("no runtime kernel for '") << op->getName() << "' yet";
      });
}

struct ConvertZeroToZrtPass : zcc::impl::ConvertZeroToZrtBase<ConvertZeroToZrtPass> {
  ModuleOp module;
  llvm::StringSet<> usedNames;
  DenseMap<Value, FlatSymbolRefAttr> bufferOf;
  int64_t hostStateBytes = 0; // the host arena's offloaded globals come first

  /// A symbol name not yet used in the module.
  std::string uniqueName(StringRef base) {
    std::string name = base.str();
    for (int k = 1; usedNames.contains(name); ++k)
      name = (base + "." + Twine(k)).str();
    usedNames.insert(name);
    return name;
  }

  FlatSymbolRefAttr createBuffer(OpBuilder &b, Location loc, StringRef base, Placement p,
                                 Type type, ElementsAttr init = {}, bool view = false) {
    std::string name = uniqueName(base);
    auto arena = p.arena == ArenaKind::Device     ? zrt::Arena::device
                 : p.arena == ArenaKind::State    ? zrt::Arena::state
                 : p.arena == ArenaKind::Constant ? zrt::Arena::constant
                 : p.arena == ArenaKind::Host     ? zrt::Arena::host
                                                  : zrt::Arena::input;
    zrt::BufferOp::create(b, loc, name, arena, p.offset, cast<RankedTensorType>(type), init,
                          /*trainable=*/false, view, /*role=*/nullptr, /*shard_of=*/nullptr);
    return FlatSymbolRefAttr::get(b.getContext(), name);
  }

  LogicalResult placed(Value v, Placement &p) {
    auto placement = getPlacement(v);
    if (!placement) {
      Location loc = v.getDefiningOp() ? v.getDefiningOp()->getLoc() : v.getLoc();
      return emitError(loc, "value has no memory placement; run zero-plan-memory first");
    }
    p = *placement;
    return success();
  }

  /// The global's buffer, by name.
  DenseMap<StringAttr, FlatSymbolRefAttr> globalBuffer;
  DenseMap<StringAttr, Placement> globalPlacement;
  int64_t counter = 0;

  /// Loads read the global's bytes in place, so a load from before a store to
  /// the same global must not be used after the store.
  LogicalResult checkLoadStoreOrder(Block &block) {
    DenseMap<Operation *, int64_t> index = programOrder(block);
    for (Operation &op : block) {
      auto store = dyn_cast<zero::StoreOp>(op);
      if (!store)
        continue;
      for (Operation &other : block) {
        auto load = dyn_cast<zero::LoadOp>(other);
        // (A load after the store reads the stored bytes: fine.)
        if (!load || load.getGlobalAttr() != store.getGlobalAttr() ||
            index.lookup(load) > index[&op])
          continue;
        SmallVector<Value> worklist{load.getResult()};
        while (!worklist.empty()) {
          Value v = worklist.pop_back_val();
          for (Operation *user : v.getUsers()) {
            if (isViewOp(user))
              worklist.push_back(user->getResult(0));
            else if (index.lookup(user) > index[&op])
              return user->emitError("reads global @")
                     << store.getGlobal() << " after it is stored in the same function";
          }
        }
      }
    }
    return success();
  }

  LogicalResult convertFunction(func::FuncOp func, OpBuilder &b) {
    std::string progName = func.getSymName() == "forward" ? "eval" : func.getSymName().str();
    std::string inPrefix = progName == "eval" ? "in." : progName + ".in.";
    Block &block = func.getBody().front();
    if (failed(checkLoadStoreOrder(block)))
      return failure();
    b.setInsertionPointToEnd(module.getBody());
    NamedAttrList inputs, outputs;
    for (BlockArgument arg : block.getArguments()) {
      Placement p;
      if (failed(placed(arg, p)))
        return failure();
      auto nameAttr = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "zero.input");
      std::string graphName = nameAttr ? nameAttr.str() : "arg" + std::to_string(arg.getArgNumber());
      bufferOf[arg] = createBuffer(b, func.getLoc(), inPrefix + graphName, p, arg.getType());
      inputs.append(graphName, bufferOf[arg]);
    }
    auto program = zrt::ProgramOp::create(b, func.getLoc(), progName, b.getDictionaryAttr({}),
                                          b.getDictionaryAttr({}));
    Block *body = new Block();
    program.getBody().push_back(body);
    OpBuilder pb = OpBuilder::atBlockEnd(body);
    for (Operation &op : block) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
          auto name = func.getResultAttrOfType<StringAttr>(k, "zero.output");
          outputs.append(name ? name.str() : "out" + std::to_string(k), bufferOf[v]);
        }
        continue;
      }
      if (auto load = dyn_cast<zero::LoadOp>(op)) {
        bufferOf[load] = globalBuffer.lookup(load.getGlobalAttr().getAttr());
        continue;
      }
      if (auto fill = dyn_cast<zero::FillOp>(op)) {
        zrt::KernelOp::create(pb, op.getLoc(), "fill", b.getArrayAttr({}),
                              b.getArrayAttr({globalBuffer.lookup(fill.getGlobalAttr().getAttr())}),
                              ArrayRef<int64_t>{}, ArrayRef<double>{fill.getValue().convertToDouble()});
        continue;
      }
      if (auto store = dyn_cast<zero::StoreOp>(op)) {
        StringAttr g = store.getGlobalAttr().getAttr();
        Placement p;
        if (failed(placed(store.getValue(), p)))
          return failure();
        Placement target = globalPlacement.lookup(g);
        if (p.arena != target.arena || p.offset != target.offset)
          zrt::CopyOp::create(pb, op.getLoc(), bufferOf[store.getValue()], globalBuffer.lookup(g));
        continue;
      }
      b.setInsertionPoint(program);
      for (Value result : op.getResults()) {
        Placement p;
        if (failed(placed(result, p)))
          return failure();
        ElementsAttr init;
        std::string base = "t" + std::to_string(counter++);
        if (auto constant = dyn_cast<zero::ConstantOp>(op)) {
          init = constant.getValue();
          base = "c" + std::to_string(counter - 1);
        } else if (isViewOp(&op)) {
          base = "v" + std::to_string(counter - 1);
        }
        // Results written into a global's bytes (state, or the host arena's
        // offloaded globals) are views of it.
        bool inGlobal = p.arena == ArenaKind::State ||
                        (p.arena == ArenaKind::Host && p.offset < hostStateBytes);
        bufferOf[result] = createBuffer(b, op.getLoc(), base, p, result.getType(), init,
                                        /*view=*/isViewOp(&op) || inGlobal);
      }
      if (auto wait = dyn_cast<zero::WaitOp>(op)) {
        // A view of the started collective's buffer, and the instruction
        // that waits for it.
        zrt::WaitOp::create(pb, op.getLoc(), bufferOf[wait.getStarted()]);
        continue;
      }
      if (isa<zero::ConstantOp>(op) || isViewOp(&op))
        continue; // data or a view: no instruction
      if (auto transfer = dyn_cast<zero::TransferOp>(op)) {
        zrt::CopyOp::create(pb, op.getLoc(), bufferOf[transfer.getInput()],
                            bufferOf[transfer.getResult()]);
        continue;
      }
      if (isa<zero::AllReduceOp, zero::ReduceScatterOp, zero::AllGatherOp, zero::LocalShardOp>(
              op)) {
        StringRef kind = isa<zero::AllReduceOp>(op)       ? "all_reduce"
                         : isa<zero::ReduceScatterOp>(op) ? "reduce_scatter"
                         : isa<zero::AllGatherOp>(op)     ? "all_gather"
                                                          : "local_shard";
        int64_t reduce = 0;
        if (auto r = dyn_cast<zero::AllReduceOp>(op))
          reduce = (int64_t)r.getReduce();
        if (auto r = dyn_cast<zero::ReduceScatterOp>(op))
          reduce = (int64_t)r.getReduce();
        auto coll = zrt::CollectiveOp::create(pb, op.getLoc(), pb.getStringAttr(kind),
                                              bufferOf[op.getOperand(0)],
                                              bufferOf[op.getResult(0)],
                                              pb.getI64IntegerAttr(reduce));
        if (op.hasAttr("async"))
          coll->setAttr("async", pb.getUnitAttr());
        continue;
      }
      auto spec = kernelFor(&op);
      if (failed(spec))
        return failure();
      SmallVector<Attribute> ins, outs;
      for (Value v : op.getOperands())
        ins.push_back(bufferOf[v]);
      for (Value v : op.getResults())
        outs.push_back(bufferOf[v]);
      auto kernel = zrt::KernelOp::create(pb, op.getLoc(), spec->name, b.getArrayAttr(ins),
                                          b.getArrayAttr(outs), spec->ints, spec->floats);
      if (!spec->code.empty())
        kernel->setAttr("code", b.getStringAttr(spec->code));
    }
    program.setInputsAttr(inputs.getDictionary(&getContext()));
    program.setOutputsAttr(outputs.getDictionary(&getContext()));
    return success();
  }

  void runOnOperation() override {
    module = getOperation();
    auto sizes = getArenaSizes(module);
    if (!module.lookupSymbol<func::FuncOp>("forward") || !sizes) {
      module.emitError("convert-zero-to-zrt needs @forward planned by zero-plan-memory");
      return signalPassFailure();
    }
    OpBuilder b(module.getBodyRegion());
    if (auto bytes = module->getAttrOfType<IntegerAttr>("zero.host_state_bytes"))
      hostStateBytes = bytes.getInt();
    for (auto global : module.getOps<zero::GlobalOp>())
      usedNames.insert(global.getSymName());

    // State buffers keep the globals' names (renamed once the globals are gone).
    SmallVector<Operation *> toErase;
    for (auto global : module.getOps<zero::GlobalOp>()) {
      auto off = global->getAttrOfType<IntegerAttr>("zero.offset");
      if (!off) {
        global.emitError("global has no memory placement; run zero-plan-memory first");
        return signalPassFailure();
      }
      std::string name = global.getSymName().str();
      OpBuilder gb(global);
      bool host = global->hasAttr("zero.host");
      auto buffer = zrt::BufferOp::create(gb, global.getLoc(), name + ".__zrt",
                                          host ? zrt::Arena::host : zrt::Arena::state,
                                          off.getInt(), global.getTensorType(),
                                          global.getInitialValueAttr(), global.getTrainable(),
                                          /*view=*/false, /*role=*/nullptr,
                                          global.getShardOfAttr());
      buffer.setRoleAttr(gb.getStringAttr(zero::stringifyGlobalRole(global.getRole())));
      globalBuffer[global.getSymNameAttr()] = FlatSymbolRefAttr::get(b.getContext(), name);
      globalPlacement[global.getSymNameAttr()] =
          Placement{host ? ArenaKind::Host : ArenaKind::State, off.getInt()};
      toErase.push_back(global);
    }
    SmallVector<func::FuncOp> funcs = llvm::to_vector(module.getOps<func::FuncOp>());
    for (func::FuncOp func : funcs)
      if (failed(convertFunction(func, b)))
        return signalPassFailure();
    for (func::FuncOp func : funcs)
      func.erase();
    for (Operation *op : toErase)
      op->erase();
    for (auto buffer : module.getOps<zrt::BufferOp>())
      if (buffer.getSymName().ends_with(".__zrt"))
        buffer.setSymName(buffer.getSymName().drop_back(strlen(".__zrt")));
    for (StringRef arena : {"device", "state", "constant", "input", "host"}) {
      std::string from = ("zero." + arena + "_arena_bytes").str();
      if (Attribute bytes = module->getAttr(from))
        module->setAttr(("zrt." + arena + "_arena_bytes").str(), bytes);
      module->removeAttr(from);
    }
    if (Attribute bytes = module->getAttr("zero.host_state_bytes")) {
      module->setAttr("zrt.host_state_bytes", bytes);
      module->removeAttr("zero.host_state_bytes");
    }
  }
};
} // namespace
