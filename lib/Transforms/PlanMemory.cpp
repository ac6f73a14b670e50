//===- PlanMemory.cpp - static, liveness-based placement ------------------===//
//
// Every tensor of @forward gets an arena and an offset. The device arena is
// planned like a register allocator over a straight-line program: a value is
// live from its definition to its last use (through views), and its bytes
// are reused once it is dead. The recorded device arena size is therefore
// the exact peak that the runtime allocates.
//
//===----------------------------------------------------------------------===//
#include "zcc/Analysis/MemoryPlan.h"
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <map>

namespace zcc {
#define GEN_PASS_DEF_ZEROPLANMEMORY
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc;
using namespace zcc::zero;

namespace {

/// A first-fit-by-best-gap allocator over one arena: live blocks are kept
/// sorted by offset; a new block goes into the smallest gap that fits, or at
/// the end.
class ArenaAllocator {
public:
  int64_t allocate(int64_t bytes) {
    bytes = alignArena(std::max<int64_t>(bytes, 1));
    int64_t bestOffset = -1, bestGap = INT64_MAX, cursor = 0;
    for (auto [offset, size] : live) {
      int64_t gap = offset - cursor;
      if (gap >= bytes && gap < bestGap) {
        bestGap = gap;
        bestOffset = cursor;
      }
      cursor = std::max(cursor, offset + size);
    }
    if (bestOffset < 0)
      bestOffset = cursor;
    live[bestOffset] = bytes;
    peak = std::max(peak, bestOffset + bytes);
    return bestOffset;
  }
  void release(int64_t offset) { live.erase(offset); }
  int64_t getPeak() const { return peak; }

private:
  std::map<int64_t, int64_t> live; // offset -> size
  int64_t peak = 0;
};

/// Elementwise ops whose kernels may write into an operand of the result's
/// shape: each output element depends only on the same input element.
bool isElementwise(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, AndOp, OrOp, NegOp, AbsOp, ExpOp,
             LogOp, SqrtOp, RsqrtOp, ReciprocalOp, TanhOp, ErfOp, SigmoidOp, ReluOp, SiluOp,
             CosOp, SinOp, NotOp, GeluOp, WhereOp, GeluGradOp>(op);
}

struct ZeroPlanMemoryPass : zcc::impl::ZeroPlanMemoryBase<ZeroPlanMemoryPass> {
  using ZeroPlanMemoryBase::ZeroPlanMemoryBase;

  /// Results that can be written straight into the global they are stored
  /// to: the op is elementwise (element k of the result depends only on
  /// element k of same-shaped operands), the result's only use is the store,
  /// and nothing reads that global after the op. Then the store is free and
  /// the result needs no device memory (AdamW updating p, m, v in place;
  /// gradients accumulating into @p.grad). Maps each such result to the
  /// global's state offset.
  DenseMap<Value, Placement> findStoreForwarding(Block &block, ModuleOp module) {
    DenseMap<Operation *, int64_t> index = programOrder(block);
    // Per global, its loads: (the load's position, the last op that reads it
    // through the load and its views).
    DenseMap<StringAttr, SmallVector<std::pair<int64_t, int64_t>>> reads;
    for (Operation &op : block)
      if (auto load = dyn_cast<LoadOp>(op)) {
        int64_t last = index[&op];
        SmallVector<Value> worklist{load.getResult()};
        while (!worklist.empty())
          for (Operation *user : worklist.pop_back_val().getUsers()) {
            if (isViewOp(user))
              worklist.push_back(user->getResult(0));
            last = std::max(last, index[user]);
          }
        reads[load.getGlobalAttr().getAttr()].push_back({index[&op], last});
      }
    // The last read of the value a global holds before the store at |at|
    // (loads after the store read the stored bytes).
    auto lastReadBefore = [&](StringAttr g, int64_t at) {
      int64_t last = -1;
      for (auto [load, lastUse] : reads.lookup(g))
        if (load < at)
          last = std::max(last, lastUse);
      return last;
    };
    DenseMap<Value, Placement> forwarded;
    for (Operation &op : block) {
      auto store = dyn_cast<StoreOp>(op);
      if (!store)
        continue;
      Value v = store.getValue();
      // Through the wait of an async collective: its buffer is the result's.
      if (auto wait = v.getDefiningOp<WaitOp>(); wait && v.hasOneUse() &&
                                                 wait.getStarted().hasOneUse())
        v = wait.getStarted();
      Operation *def = v.getDefiningOp();
      if (!def || !v.hasOneUse() || v.getType() != storeType(module, store) ||
          !(isElementwise(def) || isa<AdamWOp, SgdOp, AllGatherOp, TransferOp>(def)))
        continue;
      // Operands must be read element by element at the result's positions
      // (an all-gather reads its input whole, before any rank writes).
      bool sameShapes = isa<AllGatherOp>(def) || llvm::all_of(def->getOperands(), [&](Value operand) {
        auto t = cast<RankedTensorType>(operand.getType());
        return t.getRank() == 0 || t.getShape() == cast<RankedTensorType>(v.getType()).getShape();
      });
      StringAttr g = store.getGlobalAttr().getAttr();
      if (!sameShapes || lastReadBefore(g, index[store]) > index[def])
        continue;
      auto global = module.lookupSymbol<GlobalOp>(g);
      // A host op's result goes into host globals only, a device op's into
      // device ones.
      bool hostGlobal = global->hasAttr("zero.host");
      if (hostGlobal != onHost(def))
        continue;
      if (auto off = global->getAttrOfType<IntegerAttr>("zero.offset"))
        forwarded[v] = Placement{hostGlobal ? ArenaKind::Host : ArenaKind::State, off.getInt()};
    }
    return forwarded;
  }

  /// Ops whose results live in host memory (zero-offload): host ops and
  /// transfers to the host.
  static bool onHost(Operation *op) {
    if (auto t = dyn_cast<TransferOp>(op))
      return t.getToHost();
    return op->hasAttr("zero.on_host");
  }

  static Type storeType(ModuleOp module, StoreOp store) {
    auto global = module.lookupSymbol<GlobalOp>(store.getGlobalAttr());
    return global ? global.getType() : Type();
  }

  /// Places the values of |block| in a fresh device arena (host values of
  /// offload after |hostBase| in the host arena, whose temporaries' peak goes
  /// to |hostPeak|) and its constants after |constantBytes|; returns the
  /// device peak.
  int64_t planDevice(Block &block, int64_t &constantBytes, int64_t hostBase, int64_t &hostPeak) {
    auto module = block.getParentOp()->getParentOfType<ModuleOp>();
    DenseMap<Value, Placement> forwarded = findStoreForwarding(block, module);
    Builder b(block.getParentOp()->getContext());
    // Program order and last uses (through views; results live to the end).
    DenseMap<Operation *, int64_t> index = programOrder(block);
    int64_t n = index.size();
    DenseMap<Value, int64_t> lastUse;
    for (Operation &op : block)
      for (Value operand : op.getOperands()) {
        Value root = storageRoot(operand);
        int64_t at = isa<func::ReturnOp>(op) ? n : index[&op];
        lastUse[root] = std::max(lastUse.lookup(root), at);
      }

    ArenaAllocator device, host;
    DenseMap<Value, int64_t> deviceOffset; // roots in the device arena
    DenseMap<Value, int64_t> hostOffset;   // roots in the host arena (offload)
    // Frees what dies at op |i|, after the op has read its inputs.
    auto releaseDeadAt = [&](int64_t i) {
      for (Value root : llvm::to_vector(llvm::make_first_range(deviceOffset)))
        if (lastUse.lookup(root) == i) {
          device.release(deviceOffset[root]);
          deviceOffset.erase(root);
        }
      for (Value root : llvm::to_vector(llvm::make_first_range(hostOffset)))
        if (lastUse.lookup(root) == i) {
          host.release(hostOffset[root]);
          hostOffset.erase(root);
        }
    };
    for (Operation &op : block) {
      if (isa<func::ReturnOp, LoadOp, StoreOp, FillOp>(op) || isViewOp(&op))
        continue;
      int64_t i = index[&op];
      if (auto constant = dyn_cast<ConstantOp>(op)) {
        op.setAttr("zero.offsets", b.getDenseI64ArrayAttr({constantBytes}));
        constantBytes += alignArena(storageBytes(constant.getType()));
        continue;
      }

      // Host values (offload): the host arena, after its globals.
      bool hostOp = onHost(&op);
      // Written straight into a global: no device memory.
      if (hostOp || llvm::any_of(op.getResults(), [&](Value r) { return forwarded.count(r); })) {
        SmallVector<int64_t> offsets, inState, arenas;
        for (Value result : op.getResults()) {
          bool direct = forwarded.count(result);
          int64_t offset;
          ArenaKind arena;
          if (direct) {
            offset = forwarded[result].offset;
            arena = forwarded[result].arena;
          } else if (hostOp) {
            offset = host.allocate(storageBytes(result.getType()));
            hostOffset[result] = offset;
            offset += hostBase;
            arena = ArenaKind::Host;
          } else {
            offset = device.allocate(storageBytes(result.getType()));
            deviceOffset[result] = offset;
            arena = ArenaKind::Device;
          }
          if (!direct && !lastUse.count(result))
            lastUse[result] = i;
          offsets.push_back(offset);
          inState.push_back(arena == ArenaKind::State);
          arenas.push_back((int64_t)arena);
        }
        op.setAttr("zero.offsets", b.getDenseI64ArrayAttr(offsets));
        op.setAttr("zero.in_state", b.getDenseI64ArrayAttr(inState));
        if (llvm::is_contained(arenas, (int64_t)ArenaKind::Host))
          op.setAttr("zero.arenas", b.getDenseI64ArrayAttr(arenas));
        releaseDeadAt(i);
        continue;
      }

      // In place: an operand that dies here and has the result's type.
      SmallVector<int64_t> offsets;
      Value donor;
      if (inPlace && op.getNumResults() == 1 && isElementwise(&op)) {
        for (Value operand : op.getOperands()) {
          Value root = storageRoot(operand);
          if (operand.getType() == op.getResult(0).getType() && deviceOffset.count(root) &&
              lastUse.lookup(root) == i) {
            donor = root;
            break;
          }
        }
      }
      for (Value result : op.getResults()) {
        int64_t offset;
        if (donor) {
          offset = deviceOffset[donor];
          deviceOffset.erase(donor); // the block now belongs to the result
          donor = Value();
        } else {
          offset = device.allocate(storageBytes(result.getType()));
        }
        deviceOffset[result] = offset;
        offsets.push_back(offset);
        if (!lastUse.count(result))
          lastUse[result] = i; // unused result: dead right after its op
      }
      op.setAttr("zero.offsets", b.getDenseI64ArrayAttr(offsets));

      releaseDeadAt(i);
    }
    hostPeak = std::max(hostPeak, host.getPeak());
    return device.getPeak();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder b(&getContext());

    // State: every global, in declaration order; a global inside a ZeRO
    // bucket (zero-partition) lives at its offset in the bucket's bytes.
    // Offloaded globals (zero.host) lead the host arena instead.
    int64_t stateBytes = 0, hostStateBytes = 0;
    for (auto global : module.getOps<GlobalOp>()) {
      if (global.getBucket())
        continue;
      int64_t &bytes = global->hasAttr("zero.host") ? hostStateBytes : stateBytes;
      global->setAttr("zero.offset", b.getI64IntegerAttr(bytes));
      bytes += alignArena(storageBytes(global.getType()));
    }
    for (auto global : module.getOps<GlobalOp>()) {
      auto bucketName = global.getBucketAttr();
      if (!bucketName)
        continue;
      auto bucket = module.lookupSymbol<GlobalOp>(bucketName);
      int64_t elementBytes = storageBytes(
          RankedTensorType::get({1}, global.getTensorType().getElementType()));
      if (!bucket || bucket.getBucket() ||
          bucket.getTensorType().getElementType() != global.getTensorType().getElementType() ||
          *global.getBucketOffset() + global.getTensorType().getNumElements() >
              bucket.getTensorType().getNumElements()) {
        global.emitError("bucket @") << bucketName.getValue()
                                     << " is not a flat global of this element type that holds "
                                        "elements ["
                                     << *global.getBucketOffset() << ", "
                                     << *global.getBucketOffset() +
                                            global.getTensorType().getNumElements()
                                     << ")";
        return signalPassFailure();
      }
      global->setAttr("zero.offset",
                      b.getI64IntegerAttr(bucket->getAttrOfType<IntegerAttr>("zero.offset").getInt() +
                                          *global.getBucketOffset() * elementBytes));
    }

    // Every function: its arguments in the input arena (one after another
    // across functions), its constants in the constant arena, its values in
    // the device arena. Programs run one at a time, so they share the device
    // arena, whose size is the largest peak.
    int64_t inputBytes = 0, constantBytes = 0, devicePeak = 0, hostPeak = 0;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (!func.getBody().hasOneBlock()) {
        func.emitError("zero-plan-memory expects single-block functions");
        return signalPassFailure();
      }
      Block &block = func.getBody().front();
      for (BlockArgument arg : block.getArguments()) {
        func.setArgAttr(arg.getArgNumber(), "zero.offset", b.getI64IntegerAttr(inputBytes));
        inputBytes += alignArena(storageBytes(arg.getType()));
      }
      devicePeak = std::max(devicePeak, planDevice(block, constantBytes, hostStateBytes, hostPeak));
    }
    module->setAttr("zero.device_arena_bytes", b.getI64IntegerAttr(devicePeak));
    module->setAttr("zero.state_arena_bytes", b.getI64IntegerAttr(stateBytes));
    module->setAttr("zero.constant_arena_bytes", b.getI64IntegerAttr(constantBytes));
    module->setAttr("zero.input_arena_bytes", b.getI64IntegerAttr(inputBytes));
    if (hostStateBytes + hostPeak > 0) {
      module->setAttr("zero.host_arena_bytes", b.getI64IntegerAttr(hostStateBytes + hostPeak));
      module->setAttr("zero.host_state_bytes", b.getI64IntegerAttr(hostStateBytes));
    }
  }
};
} // namespace
