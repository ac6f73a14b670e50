//===- ZeroToZrt.cpp - planned zero module -> runtime buffers and kernels -===//
//
// Kernel ABI (the kernels are runtime/kernels/Kernels.def; their checks are
// the CPU kernels', runtime/cpu/*.cpp):
//   binary  add sub mul div pow max min and or   (a, b) -> c, NumPy broadcast
//   cmp     ints = [predicate]                    (a, b) -> bool c
//   where                                         (cond, a, b) -> c
//   unary   neg abs exp log sqrt rsqrt reciprocal tanh erf sigmoid relu silu
//           cos sin not; gelu ints = [0 exact | 1 tanh]
//   dropout ints = [key, samples], floats = [ratio] (x, rng i64 [seed, position]) -> y
//   cast, expand                                  (x) -> y, shapes/types from buffers
//   transpose ints = permutation; slice ints = start ++ stride
//   concat / split ints = [axis]; gather ints = [axis] (data, indices) -> y
//   matmul  ints = [transpose_lhs, transpose_rhs] (matmul_bias / matmul_add: the same, bias
//           or addend third input)
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
//   attention ints = [nan_to_zero, 0, mask, window, documents], floats = [scale(, softcap)]
//                 (q, k, v[, bias][, positions]) -> (out, lse); mask: 0 the bias
//                 input, 1 causal (with the window if > 0), 2 none; documents:
//                 1 with the positions input (per-document attention)
//   attention_grad ints = [0, mask, window, documents], floats as attention's
//                 (q, k, v[, bias], out, lse, dout[, positions]) -> (dq, dk, dv)
//   (zero.attention_packed lowers to the same two kernels, no kernel of its own:
//                 attention with ints [nan_to_zero, 1, mask, window, documents],
//                 (qkv[, bias][, positions]) -> (out, lse); attention_grad with ints
//                 [1, mask, window, documents], (qkv[, bias], out, lse, dout[, positions])
//                 -> (dqkv))
//   cross_entropy ints = [ignore_index(, classes)] (logits, labels) -> f32 scalar; with
//                 classes, the logits' last dimension is padding beyond it
//
//===----------------------------------------------------------------------===//
#include "zcc/Analysis/MemoryPlan.h"
#include "zcc/Conversion/Passes.h"
#include "zero/ZeroOps.h"
#include "zrt/ZrtOps.h"

#include "kernels/KernelId.h"
#include "plan/plan.pb.h"

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
using ::zrt::KernelId;

/// The runtime kernel an op lowers to (runtime/kernels/Kernels.def) and its
/// attributes.
/// The runtime's mask kind of an attention op: 0 its bias, 1 causal, 2 none.
template <typename Op> int64_t maskKind(Op a) { return a.getBias() ? 0 : a.getCausal() ? 1 : 2; }
/// [scale] or, soft-capped, [scale, softcap].
template <typename Op> SmallVector<double> attentionFloats(Op a) {
  SmallVector<double> floats{a.getScale().convertToDouble()};
  if (auto cap = a.getSoftcap())
    floats.push_back(cap->convertToDouble());
  return floats;
}

struct KernelSpec {
  KernelId kernel;
  SmallVector<int64_t> ints;
  SmallVector<double> floats;
  std::string code; // generated device code (PTX), if any
};

/// The plan's element type code (plan.proto's DType) of a float type.
int64_t planFloatType(Type t) {
  return t.isBF16() ? ::zrt::plan::BF16 : t.isF16() ? ::zrt::plan::F16 : ::zrt::plan::F32;
}

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
  auto simple = [](KernelId kernel) { return KernelSpec{kernel, {}, {}}; };
  return llvm::TypeSwitch<Operation *, FailureOr<KernelSpec>>(op)
      .Case([&](zero::CmpOp c) {
        return KernelSpec{KernelId::Cmp, {(int64_t)c.getPredicate()}, {}};
      })
      .Case([&](zero::GeluOp g) {
        return KernelSpec{
            KernelId::Gelu, {g.getApproximate() == zero::GeluApprox::tanh ? 1 : 0}, {}};
      })
      .Case([&](zero::DropoutOp d) {
        return KernelSpec{
            KernelId::Dropout, {d.getKey(), d.getSamples()}, {d.getRatio().convertToDouble()}};
      })
      .Case([&](zero::ElementwiseOp e) {
        // [inputs, steps, (opcode, a, b, c, plan dtype) per step, the step
        // each output stores, then the offsets]
        ArrayRef<int64_t> program = e.getProgram();
        int64_t steps = program.size() / 4;
        SmallVector<int64_t> ints{(int64_t)e.getInputs().size(), steps};
        for (int64_t s = 0; s < steps; ++s) {
          ints.append(program.begin() + 4 * s, program.begin() + 4 * s + 4);
          ints.push_back(planFloatType(cast<TypeAttr>(e.getStepTypes()[s]).getValue()));
        }
        for (unsigned k = 0; k < e.getNumResults(); ++k)
          ints.push_back(e.outputStep(k));
        llvm::append_range(ints, e.getOffsets());
        KernelSpec spec{KernelId::Elementwise, ints, {}, {}};
        if (auto ptx = e.getPtxAttr())
          spec.code = ptx.str();
        return spec;
      })
      .Case([&](zero::TransposeOp t) {
        return KernelSpec{KernelId::Transpose, SmallVector<int64_t>(t.getPermutation()), {}};
      })
      .Case([&](zero::SliceOp s) {
        SmallVector<int64_t> ints(s.getStart());
        llvm::append_range(ints, s.getStride());
        return KernelSpec{KernelId::Slice, ints, {}};
      })
      .Case([&](zero::ConcatOp c) {
        int64_t rank = cast<RankedTensorType>(c.getType()).getRank();
        return KernelSpec{KernelId::Concat, {(c.getAxis() + rank) % rank}, {}};
      })
      .Case([&](zero::SplitOp s) {
        int64_t rank = cast<RankedTensorType>(s.getInput().getType()).getRank();
        return KernelSpec{KernelId::Split, {(s.getAxis() + rank) % rank}, {}};
      })
      .Case([&](zero::GatherOp g) {
        int64_t rank = cast<RankedTensorType>(g.getInput().getType()).getRank();
        return KernelSpec{KernelId::Gather, {(g.getAxis() + rank) % rank}, {}};
      })
      .Case([&](zero::MatmulOp m) {
        return KernelSpec{KernelId::Matmul, {m.getTransposeLhs(), m.getTransposeRhs()}, {}};
      })
      .Case([&](zero::MoeRouteOp r) {
        if (r.getFirstExpert()) // expert parallelism: this rank's experts only
          return KernelSpec{
              KernelId::MoeRoute, {r.getNumExperts(), r.getCapacity(), r.getAllExperts()}, {}};
        return KernelSpec{KernelId::MoeRoute, {r.getNumExperts(), r.getCapacity()}, {}};
      })
      .Case([&](zero::GroupedMatmulOp m) {
        // Rows a rank's route leaves unused (expert parallelism) are zeroed.
        auto route = m.getOffsets().getDefiningOp<zero::MoeRouteOp>();
        if (route && route.getFirstExpert())
          return KernelSpec{KernelId::GroupedMatmul, {m.getTransposeRhs(), 1}, {}};
        return KernelSpec{KernelId::GroupedMatmul, {m.getTransposeRhs()}, {}};
      })
      .Case<zero::ConvOp, zero::ConvInputGradOp, zero::ConvFilterGradOp>([&](auto c) {
        // ints [groups, strides.., dilations.., pads before.., pads after..]
        SmallVector<int64_t> ints = {c.getGroups()};
        ints.append(c.getStrides().begin(), c.getStrides().end());
        ints.append(c.getDilations().begin(), c.getDilations().end());
        ints.append(c.getPads().begin(), c.getPads().end());
        KernelId id = isa<zero::ConvOp>(c.getOperation())            ? KernelId::Conv
                      : isa<zero::ConvInputGradOp>(c.getOperation()) ? KernelId::ConvInputGrad
                                                                     : KernelId::ConvFilterGrad;
        return KernelSpec{id, ints, {}};
      })
      .Case([&](zero::GroupedMatmulRhsGradOp m) {
        return KernelSpec{KernelId::GroupedMatmulRhsGrad, {m.getTransposeRhs()}, {}};
      })
      .Case([&](zero::MatmulBiasOp m) {
        return KernelSpec{KernelId::MatmulBias, {m.getTransposeLhs(), m.getTransposeRhs()}, {}};
      })
      .Case([&](zero::MatmulAddOp m) {
        return KernelSpec{KernelId::MatmulAdd, {m.getTransposeLhs(), m.getTransposeRhs()}, {}};
      })
      .Case([&](zero::MatmulBgradOp) {
        return KernelSpec{KernelId::MatmulBgrad, {}, {}};
      })
      .Case([&](zero::MatmulBiasGeluOp m) {
        return KernelSpec{KernelId::MatmulBiasGelu, {m.getTransposeLhs(), m.getTransposeRhs()}, {}};
      })
      .Case([&](zero::MatmulGeluGradOp m) {
        return KernelSpec{KernelId::MatmulGeluGrad, {m.getTransposeLhs(), m.getTransposeRhs()}, {}};
      })
      .Case([&](zero::ReduceOp r) {
        SmallVector<int64_t> ints{(int64_t)r.getKind(), r.getKeepdims()};
        llvm::append_range(ints, r.getAxes());
        return KernelSpec{KernelId::Reduce, ints, {}};
      })
      .Case([&](zero::SoftmaxOp s) {
        return KernelSpec{KernelId::Softmax, {s.getAxis()}, {}};
      })
      .Case([&](zero::BiasSoftmaxOp s) {
        return KernelSpec{KernelId::BiasSoftmax, {s.getNanToZero() ? 1 : 0}, {}};
      })
      .Case([&](zero::AttentionOp a) {
        return KernelSpec{KernelId::Attention,
                          {a.getNanToZero() ? 1 : 0, 0, maskKind(a), a.getWindow().value_or(0),
                           a.getPositions() ? 1 : 0},
                          attentionFloats(a)};
      })
      .Case([&](zero::AttentionPackedOp a) {
        return KernelSpec{KernelId::Attention,
                          {a.getNanToZero() ? 1 : 0, 1, maskKind(a), a.getWindow().value_or(0),
                           a.getPositions() ? 1 : 0},
                          attentionFloats(a)};
      })
      .Case([&](zero::AttentionPackedGradOp a) {
        return KernelSpec{KernelId::AttentionGrad,
                          {1, maskKind(a), a.getWindow().value_or(0), a.getPositions() ? 1 : 0},
                          attentionFloats(a)};
      })
      .Case([&](zero::AttentionGradOp a) {
        return KernelSpec{KernelId::AttentionGrad,
                          {0, maskKind(a), a.getWindow().value_or(0), a.getPositions() ? 1 : 0},
                          attentionFloats(a)};
      })
      .Case([&](zero::LogSoftmaxOp s) {
        return KernelSpec{KernelId::LogSoftmax, {s.getAxis()}, {}};
      })
      .Case([&](zero::LayerNormOp l) {
        return KernelSpec{KernelId::LayerNorm, {l.getAxis()}, {l.getEpsilon().convertToDouble()}};
      })
      .Case([&](zero::RmsNormOp l) {
        return KernelSpec{KernelId::RmsNorm, {l.getAxis()}, {l.getEpsilon().convertToDouble()}};
      })
      .Case([&](zero::CrossEntropyOp c) {
        return KernelSpec{KernelId::CrossEntropy, crossEntropyInts(c), {}};
      })
      .Case([&](zero::GeluGradOp g) {
        return KernelSpec{
            KernelId::GeluGrad, {g.getApproximate() == zero::GeluApprox::tanh ? 1 : 0}, {}};
      })
      .Case([&](zero::SoftmaxGradOp s) {
        return KernelSpec{KernelId::SoftmaxGrad, {s.getAxis()}, {}};
      })
      .Case([&](zero::LogSoftmaxGradOp s) {
        return KernelSpec{KernelId::LogSoftmaxGrad, {s.getAxis()}, {}};
      })
      .Case([&](zero::LayerNormGradOp l) {
        return KernelSpec{
            KernelId::LayerNormGrad, {l.getAxis()}, {l.getEpsilon().convertToDouble()}};
      })
      .Case([&](zero::RmsNormGradOp l) {
        return KernelSpec{KernelId::RmsNormGrad, {l.getAxis()}, {l.getEpsilon().convertToDouble()}};
      })
      .Case([&](zero::CrossEntropyGradOp c) {
        return KernelSpec{KernelId::CrossEntropyGrad, crossEntropyInts(c), {}};
      })
      .Case([&](zero::GatherGradOp g) {
        KernelSpec spec{KernelId::GatherGrad, {g.getAxis()}, {}};
        if (auto pad = g.getPaddingIdx())
          spec.ints.push_back(*pad);
        return spec;
      })
      .Case([&](zero::SliceGradOp s) {
        SmallVector<int64_t> ints(s.getStart());
        llvm::append_range(ints, s.getStride());
        return KernelSpec{KernelId::SliceGrad, ints, {}};
      })
      .Case([&](zero::AdamWOp a) {
        return KernelSpec{KernelId::Adamw,
                          {},
                          {a.getBeta1().convertToDouble(), a.getBeta2().convertToDouble(),
                           a.getEpsilon().convertToDouble(), a.getWeightDecay().convertToDouble()}};
      })
      .Case([&](zero::QuantizeOp q) {
        SmallVector<int64_t> ints{q.getBlockSize(), q.getBits()};
        if (auto chunks = q.getChunks())
          ints.append(chunks->begin(), chunks->end());
        return KernelSpec{KernelId::Quantize, ints, {}};
      })
      .Case([&](zero::DequantizeOp q) {
        return KernelSpec{KernelId::Dequantize,
                          {q.getBlockSize(), q.getParts(), q.getAverage() ? 1 : 0, q.getBits()},
                          {}};
      })
      .Case([&](zero::SgdOp o) {
        return KernelSpec{
            KernelId::Sgd,
            {o.getNesterov() ? 1 : 0},
            {o.getMomentum().convertToDouble(), o.getWeightDecay().convertToDouble()}};
      })
      .Default([&](Operation *op) -> FailureOr<KernelSpec> {
        // An op without attributes runs the kernel of its own name
        // (zero.add: "add", zero.cast_many: "cast_many"): Kernels.def's
        // entry is all its lowering needs.
        std::optional<llvm::StringRef> name;
        if (std::optional<RegisteredOperationName> info = op->getRegisteredInfo();
            info && info->getAttributeNames().empty() && isa<zero::ZeroDialect>(op->getDialect()))
          name = op->getName().stripDialect();
        if (std::optional<KernelId> id = name ? ::zrt::lookupKernel(*name) : std::nullopt)
          return simple(*id);
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

  FlatSymbolRefAttr createBuffer(OpBuilder &b, Location loc, StringRef base, Placement p, Type type,
                                 ElementsAttr init = {}, bool view = false) {
    std::string name = uniqueName(base);
    auto arena = p.arena == ArenaKind::Device     ? zcc::zrt::Arena::device
                 : p.arena == ArenaKind::State    ? zcc::zrt::Arena::state
                 : p.arena == ArenaKind::Constant ? zcc::zrt::Arena::constant
                 : p.arena == ArenaKind::Host     ? zcc::zrt::Arena::host
                 : p.arena == ArenaKind::Nvme     ? zcc::zrt::Arena::nvme
                                                  : zcc::zrt::Arena::input;
    zcc::zrt::BufferOp::create(b, loc, name, arena, p.offset, cast<RankedTensorType>(type), init,
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
      auto nameAttr = func.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), zero::ZeroDialect::InputAttrHelper::getNameStr());
      std::string graphName =
          nameAttr ? nameAttr.str() : "arg" + std::to_string(arg.getArgNumber());
      bufferOf[arg] = createBuffer(b, func.getLoc(), inPrefix + graphName, p, arg.getType());
      inputs.append(graphName, bufferOf[arg]);
    }
    auto program = zcc::zrt::ProgramOp::create(b, func.getLoc(), progName, b.getDictionaryAttr({}),
                                               b.getDictionaryAttr({}));
    Block *body = new Block();
    program.getBody().push_back(body);
    OpBuilder pb = OpBuilder::atBlockEnd(body);
    for (Operation &op : block) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
          auto name = func.getResultAttrOfType<StringAttr>(
              k, zero::ZeroDialect::OutputAttrHelper::getNameStr());
          outputs.append(name ? name.str() : "out" + std::to_string(k), bufferOf[v]);
        }
        continue;
      }
      if (auto load = dyn_cast<zero::LoadOp>(op)) {
        bufferOf[load] = globalBuffer.lookup(load.getGlobalAttr().getAttr());
        continue;
      }
      if (auto fill = dyn_cast<zero::FillOp>(op)) {
        zcc::zrt::KernelOp::create(
            pb, op.getLoc(), ::zrt::kernelName(KernelId::Fill), b.getArrayAttr({}),
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
        if (target.arena == ArenaKind::Nvme && p.arena != ArenaKind::Nvme &&
            p.arena != ArenaKind::Host)
          return store.emitError("stores into @")
                 << g.getValue() << ", which is on NVMe, a value that is not in host memory";
        if (p.arena != target.arena || p.offset != target.offset)
          zcc::zrt::CopyOp::create(pb, op.getLoc(), bufferOf[store.getValue()],
                                   globalBuffer.lookup(g));
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
        bool inGlobal = p.arena == ArenaKind::State || p.arena == ArenaKind::Nvme ||
                        (p.arena == ArenaKind::Host && p.offset < hostStateBytes);
        bufferOf[result] = createBuffer(b, op.getLoc(), base, p, result.getType(), init,
                                        /*view=*/isViewOp(&op) || inGlobal);
      }
      if (auto wait = dyn_cast<zero::WaitOp>(op)) {
        // A view of the started collective's buffer, and the instruction
        // that waits for it.
        zcc::zrt::WaitOp::create(pb, op.getLoc(), bufferOf[wait.getStarted()]);
        continue;
      }
      if (isa<zero::ConstantOp>(op) || isViewOp(&op))
        continue; // data or a view: no instruction
      if (auto transfer = dyn_cast<zero::TransferOp>(op)) {
        auto copy = zcc::zrt::CopyOp::create(pb, op.getLoc(), bufferOf[transfer.getInput()],
                                             bufferOf[transfer.getResult()]);
        if (op.hasAttr("async")) // a swap-file copy (zero-offload to nvme)
          copy->setAttr("async", pb.getUnitAttr());
        continue;
      }
      if (isa<zero::AllReduceOp, zero::ReduceScatterOp, zero::AllGatherOp, zero::AllToAllOp,
              zero::LocalShardOp>(op)) {
        using zcc::zrt::CollectiveKind;
        CollectiveKind kind = isa<zero::AllReduceOp>(op)       ? CollectiveKind::all_reduce
                              : isa<zero::ReduceScatterOp>(op) ? CollectiveKind::reduce_scatter
                              : isa<zero::AllGatherOp>(op)     ? CollectiveKind::all_gather
                              : isa<zero::AllToAllOp>(op)      ? CollectiveKind::all_to_all
                                                               : CollectiveKind::local_shard;
        int64_t reduce = 0;
        if (auto r = dyn_cast<zero::AllReduceOp>(op))
          reduce = (int64_t)r.getReduce();
        if (auto r = dyn_cast<zero::ReduceScatterOp>(op))
          reduce = (int64_t)r.getReduce();
        auto coll = zcc::zrt::CollectiveOp::create(
            pb, op.getLoc(), zcc::zrt::CollectiveKindAttr::get(pb.getContext(), kind),
            bufferOf[op.getOperand(0)], bufferOf[op.getResult(0)], pb.getI64IntegerAttr(reduce));
        if (op.hasAttr("async"))
          coll->setAttr("async", pb.getUnitAttr());
        auto group = op.getAttrOfType<zero::CommGroupAttr>("group");
        if (group && group.getValue() != zero::CommGroup::world)
          coll.setGroup((int64_t)group.getValue());
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
      auto kernel = zcc::zrt::KernelOp::create(pb, op.getLoc(), ::zrt::kernelName(spec->kernel),
                                               b.getArrayAttr(ins), b.getArrayAttr(outs),
                                               spec->ints, spec->floats);
      if (!spec->code.empty())
        kernel->setAttr("code", b.getStringAttr(spec->code));
      if (op.hasAttr("async")) // zero-optimizer-in-backward's updates
        kernel->setAttr("async", b.getUnitAttr());
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
    if (auto bytes = zero::attrs(module).getHostStateBytesAttrHelper().getAttr(module))
      hostStateBytes = bytes.getInt();
    for (auto global : module.getOps<zero::GlobalOp>())
      usedNames.insert(global.getSymName());

    // State buffers keep the globals' names (renamed once the globals are gone).
    SmallVector<Operation *> toErase;
    for (auto global : module.getOps<zero::GlobalOp>()) {
      auto off = zero::attrs(global).getOffsetAttrHelper().getAttr(global);
      if (!off) {
        global.emitError("global has no memory placement; run zero-plan-memory first");
        return signalPassFailure();
      }
      std::string name = global.getSymName().str();
      OpBuilder gb(global);
      bool host = zero::attrs(global).getHostAttrHelper().isAttrPresent(global),
           nvme = zero::attrs(global).getNvmeAttrHelper().isAttrPresent(global);
      auto buffer = zcc::zrt::BufferOp::create(
          gb, global.getLoc(), name + ".__zrt",
          nvme   ? zcc::zrt::Arena::nvme
          : host ? zcc::zrt::Arena::host
                 : zcc::zrt::Arena::state,
          off.getInt(), global.getTensorType(), global.getInitialValueAttr(), global.getTrainable(),
          /*view=*/false, /*role=*/nullptr, global.getShardOfAttr());
      buffer.setRoleAttr(gb.getStringAttr(zero::stringifyGlobalRole(global.getRole())));
      globalBuffer[global.getSymNameAttr()] = FlatSymbolRefAttr::get(b.getContext(), name);
      globalPlacement[global.getSymNameAttr()] = Placement{nvme   ? ArenaKind::Nvme
                                                           : host ? ArenaKind::Host
                                                                  : ArenaKind::State,
                                                           off.getInt()};
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
    for (auto buffer : module.getOps<zcc::zrt::BufferOp>())
      if (buffer.getSymName().ends_with(".__zrt"))
        buffer.setSymName(buffer.getSymName().drop_back(strlen(".__zrt")));
    zero::ZeroDialect &z = zero::attrs(module);
    for (auto [arena, bytes] :
         {std::pair{zcc::zrt::Arena::device, z.getDeviceArenaBytesAttrHelper().getAttr(module)},
          {zcc::zrt::Arena::state, z.getStateArenaBytesAttrHelper().getAttr(module)},
          {zcc::zrt::Arena::constant, z.getConstantArenaBytesAttrHelper().getAttr(module)},
          {zcc::zrt::Arena::input, z.getInputArenaBytesAttrHelper().getAttr(module)},
          {zcc::zrt::Arena::host, z.getHostArenaBytesAttrHelper().getAttr(module)},
          {zcc::zrt::Arena::nvme, z.getNvmeArenaBytesAttrHelper().getAttr(module)}})
      if (bytes)
        zcc::zrt::setArenaBytes(module, arena, bytes);
    for (StringRef name : {z.getDeviceArenaBytesAttrHelper().getNameStr(),
                           z.getStateArenaBytesAttrHelper().getNameStr(),
                           z.getConstantArenaBytesAttrHelper().getNameStr(),
                           z.getInputArenaBytesAttrHelper().getNameStr(),
                           z.getHostArenaBytesAttrHelper().getNameStr(),
                           z.getNvmeArenaBytesAttrHelper().getNameStr()})
      module->removeAttr(name);
    if (IntegerAttr bytes = zero::attrs(module).getHostStateBytesAttrHelper().getAttr(module)) {
      zcc::zrt::attrs(module).getHostStateBytesAttrHelper().setAttr(module, bytes);
      zero::attrs(module).getHostStateBytesAttrHelper().removeAttr(module);
    }
  }
};
} // namespace
