//===- Offload.cpp - ZeRO-Offload of the optimizer -------------------------===//
//
// The optimizer's moments live in the host arena and its updates run on the
// host (runtime: a kernel whose operands are all in the host arena runs on
// the CPU, on pinned memory); zero.transfer ops move the update's device
// operands to the host and the new parameters back. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace zcc {
#define GEN_PASS_DEF_ZEROOFFLOAD
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

namespace {

struct ZeroOffload : zcc::impl::ZeroOffloadBase<ZeroOffload> {
  using ZeroOffloadBase::ZeroOffloadBase;

  /// NVMe: an AdamW update of more than nvmeChunk elements whose moments are
  /// in the swap file becomes one update per chunk of nvmeChunk elements
  /// (DeepSpeed's sub-groups): the parameter and gradient chunks are slices
  /// (views), each chunk's moments their own NVMe globals, and the new
  /// parameter the concatenation of the chunks' (written in place into the
  /// parameter's global where it is stored). The host then holds a chunk's
  /// moments at a time, not the bucket's. Replaces the updates in |updates|.
  template <typename OnHost>
  void chunkNvmeUpdates(ModuleOp module, SmallVectorImpl<Operation *> &updates, OnHost onHost) {
    Builder b(module.getContext());
    auto nvmeGlobal = [&](Value v) -> GlobalOp {
      auto load = v.getDefiningOp<LoadOp>();
      auto g = load ? module.lookupSymbol<GlobalOp>(load.getGlobalAttr()) : GlobalOp();
      return g && zcc::zero::attrs(g).getNvmeAttrHelper().isAttrPresent(g) && !g.getBucket() &&
                     v.hasOneUse()
                 ? g
                 : GlobalOp();
    };
    auto onlyStoreInto = [&](Value v, GlobalOp g) -> StoreOp {
      if (!v.hasOneUse())
        return StoreOp();
      auto store = dyn_cast<StoreOp>(*v.getUsers().begin());
      return store && store.getGlobalAttr().getAttr() == g.getSymNameAttr() ? store : StoreOp();
    };
    SmallVector<Operation *> result;
    for (Operation *op : updates) {
      auto adam = dyn_cast<AdamWOp>(op);
      GlobalOp gm = adam ? nvmeGlobal(adam.getM()) : GlobalOp();
      GlobalOp gv = adam ? nvmeGlobal(adam.getV()) : GlobalOp();
      auto type = adam ? cast<RankedTensorType>(adam.getParam().getType()) : RankedTensorType();
      StoreOp sm = gm ? onlyStoreInto(adam.getNewM(), gm) : StoreOp();
      StoreOp sv = gv ? onlyStoreInto(adam.getNewV(), gv) : StoreOp();
      if (!sm || !sv || type.getRank() != 1 || type.getNumElements() <= nvmeChunk ||
          adam.getNewParamCopy() || adam.getGradSumSquares()) {
        result.push_back(op);
        continue;
      }
      const int64_t n = type.getNumElements();
      OpBuilder ob(op);
      // offload_param nvme: the parameter shard is read from the file into
      // a host temporary (the chunks are views of it), and the chunks' new
      // values, concatenated on the host, are written back in place.
      Value param = adam.getParam();
      GlobalOp gp = nvmeGlobal(param);
      StoreOp sp = gp ? onlyStoreInto(adam.getNewParam(), gp) : StoreOp();
      if (gp && !sp) {
        result.push_back(op);
        continue;
      }
      if (gp) {
        auto read = TransferOp::create(ob, op->getLoc(), param, /*to_host=*/true);
        zcc::zero::attrs(read).getNvmeAttrHelper().setAttr(read, b.getUnitAttr());
        param = read;
      }
      SmallVector<Value> pieces;
      for (int64_t at = 0, k = 0; at < n; at += nvmeChunk, ++k) {
        int64_t len = std::min<int64_t>(nvmeChunk, n - at);
        auto chunkType = RankedTensorType::get({len}, type.getElementType());
        auto slice = [&](Value x) -> Value {
          auto t = cast<RankedTensorType>(x.getType());
          auto s =
              SliceOp::create(ob, op->getLoc(), RankedTensorType::get({len}, t.getElementType()), x,
                              b.getDenseI64ArrayAttr({at}), b.getDenseI64ArrayAttr({at + len}),
                              b.getDenseI64ArrayAttr({1}));
          if (onHost(x))
            zcc::zero::attrs(s).getOnHostAttrHelper().setAttr(s, b.getUnitAttr());
          return s;
        };
        auto chunkGlobal = [&](GlobalOp g) {
          OpBuilder gb(g);
          auto c = GlobalOp::create(
              gb, g.getLoc(), (g.getSymName() + ".chunk" + Twine(k)).str(), g.getRole(),
              /*trainable=*/false, chunkType,
              DenseElementsAttr::get(chunkType, gb.getFloatAttr(type.getElementType(), 0.0)));
          zcc::zero::attrs(c).getNvmeAttrHelper().setAttr(c, b.getUnitAttr());
          zcc::zero::attrs(c).getNvmeChunkAttrHelper().setAttr(
              c, b.getI64IntegerAttr(k)); // laid out end to end
          return c;
        };
        GlobalOp mk = chunkGlobal(gm), vk = chunkGlobal(gv);
        SmallVector<Value> operands(op->getOperands());
        operands[0] = slice(param);
        operands[1] = slice(adam.getGrad());
        operands[2] = LoadOp::create(ob, op->getLoc(), chunkType,
                                     FlatSymbolRefAttr::get(mk.getSymNameAttr()));
        operands[3] = LoadOp::create(ob, op->getLoc(), chunkType,
                                     FlatSymbolRefAttr::get(vk.getSymNameAttr()));
        OperationState state(op->getLoc(), op->getName());
        state.addOperands(operands);
        state.addTypes({chunkType, chunkType, chunkType});
        state.addAttributes(op->getAttrs());
        Operation *update = ob.create(state);
        StoreOp::create(ob, op->getLoc(), update->getResult(1),
                        FlatSymbolRefAttr::get(mk.getSymNameAttr()));
        StoreOp::create(ob, op->getLoc(), update->getResult(2),
                        FlatSymbolRefAttr::get(vk.getSymNameAttr()));
        pieces.push_back(update->getResult(0));
        result.push_back(update);
      }
      auto joined = ConcatOp::create(ob, op->getLoc(), type, pieces, b.getI64IntegerAttr(0));
      adam.getNewParam().replaceAllUsesWith(joined.getResult());
      if (gp) {
        zcc::zero::attrs(joined).getOnHostAttrHelper().setAttr(joined, b.getUnitAttr());
        OpBuilder sb(sp);
        auto write = TransferOp::create(sb, sp.getLoc(), joined, /*to_host=*/false);
        zcc::zero::attrs(write).getNvmeAttrHelper().setAttr(write, b.getUnitAttr());
        sp->setOperand(0, write);
      }
      Operation *loadM = adam.getM().getDefiningOp(), *loadV = adam.getV().getDefiningOp();
      sm->erase();
      sv->erase();
      op->erase();
      loadM->erase();
      loadV->erase();
      gm->erase();
      gv->erase();
    }
    updates.assign(result.begin(), result.end());
  }

  /// NVMe: the swap-file copies overlap the host updates. Each read (a
  /// transfer from an NVMe global, then a wait) starts before the update
  /// ahead of its own (a double-buffered prefetch, DeepSpeed's
  /// buffer_count 2), and each write back completes after the next update
  /// (or at the end of @apply): the copies are async, their waits keep the
  /// host bytes alive (zero-plan-memory) and the validator checks that no
  /// instruction touches them in between.
  void pipelineNvmeCopies(func::FuncOp apply, Builder &b) {
    SmallVector<Operation *> updates;
    apply.walk([&](Operation *op) {
      if (isa<AdamWOp>(op) && zcc::zero::attrs(op).getOnHostAttrHelper().isAttrPresent(op))
        updates.push_back(op);
    });
    Operation *terminator = apply.getBody().front().getTerminator();
    for (size_t u = 0; u < updates.size(); ++u) {
      Operation *op = updates[u];
      Operation *issueAt = u > 0 ? updates[u - 1] : op;
      // Reads: operands that are transfers out of the swap file.
      for (OpOperand &operand : op->getOpOperands()) {
        auto read = operand.get().getDefiningOp<TransferOp>();
        if (!read || !zcc::zero::attrs(read).getNvmeAttrHelper().isAttrPresent(read) ||
            !read->hasOneUse())
          continue;
        auto load = read.getInput().getDefiningOp<LoadOp>();
        if (!load)
          continue;
        if (issueAt != op) { // the chunk before's update runs while this reads
          load->moveBefore(issueAt);
          read->moveBefore(issueAt);
        }
        read->setAttr("async", b.getUnitAttr());
        OpBuilder wb(op);
        operand.set(WaitOp::create(wb, op->getLoc(), read, read.getInput()));
      }
      // Writes: transfers of its results into the swap file.
      Operation *waitAt = u + 1 < updates.size() ? updates[u + 1]->getNextNode() : terminator;
      for (Value result : op->getResults())
        for (Operation *user : llvm::to_vector(result.getUsers())) {
          auto write = dyn_cast<TransferOp>(user);
          if (!write || !zcc::zero::attrs(write).getNvmeAttrHelper().isAttrPresent(write) ||
              !write->hasOneUse())
            continue;
          auto store = dyn_cast<StoreOp>(*write->getUsers().begin());
          if (!store)
            continue;
          write->setAttr("async", b.getUnitAttr());
          OpBuilder wb(waitAt);
          auto wait = WaitOp::create(wb, store.getLoc(), write, result);
          store->moveBefore(waitAt);
          store->setOperand(0, wait);
        }
    }
    // The rest (offload_param nvme's whole-shard reads, sliced into
    // chunks, and the concatenated shard's write): a read starts before the
    // update ahead of its first user, a write completes after the next
    // update.
    Block &block = apply.getBody().front();
    auto updateBefore = [&](Operation *at) -> Operation * {
      Operation *found = nullptr;
      for (Operation *u : updates)
        if (u->getBlock() == &block && u->isBeforeInBlock(at))
          found = u;
      return found;
    };
    for (auto copy : llvm::to_vector(block.getOps<TransferOp>())) {
      if (!zcc::zero::attrs(copy).getNvmeAttrHelper().isAttrPresent(copy) ||
          copy->hasAttr("async") || copy.getResult().use_empty())
        continue;
      if (copy.getToHost()) {
        Operation *first = firstUser(copy);
        auto load = copy.getInput().getDefiningOp<LoadOp>();
        if (!first || !load)
          continue;
        asyncRead(copy, load, updateBefore(first), first, b);
        continue;
      }
      auto store = copy->hasOneUse() ? dyn_cast<StoreOp>(*copy->getUsers().begin()) : StoreOp();
      if (!store)
        continue;
      Operation *waitAt = terminator;
      for (Operation *u : updates)
        if (u->getBlock() == &block && copy->isBeforeInBlock(u)) {
          waitAt = u->getNextNode();
          break;
        }
      copy->setAttr("async", b.getUnitAttr());
      OpBuilder wb(waitAt);
      auto wait = WaitOp::create(wb, store.getLoc(), copy, copy.getInput());
      store->moveBefore(waitAt);
      store->setOperand(0, wait);
    }
  }

  /// Makes |read| (a transfer out of the swap file, of |load|) async:
  /// issued before |issueAt| (where given), waited for right before |first|,
  /// its first user. Returns the wait.
  static Operation *asyncRead(TransferOp read, LoadOp load, Operation *issueAt, Operation *first,
                              Builder &b) {
    if (issueAt) {
      load->moveBefore(issueAt);
      read->moveBefore(issueAt);
    }
    read->setAttr("async", b.getUnitAttr());
    OpBuilder wb(first);
    auto wait = WaitOp::create(wb, read.getLoc(), read, read.getInput());
    read.getResult().replaceAllUsesExcept(wait, wait);
    return wait;
  }

  /// The first user of |v| in its block (uses in the same block only).
  static Operation *firstUser(Value v) {
    Operation *first = nullptr;
    for (Operation *user : v.getUsers()) {
      if (user->getBlock() != v.getParentBlock())
        return nullptr;
      if (!first || user->isBeforeInBlock(first))
        first = user;
    }
    return first;
  }

  /// offload_param nvme, outside @apply: each program's reads of parameter
  /// shards from the swap file are async, each waited for right before the
  /// copy to the device that uses it, and issued when the read before it is
  /// waited for: two reads' host buffers live at a time (buffer_count 2),
  /// and a read overlaps whatever runs between the two gathers.
  void pipelineNvmeReads(func::FuncOp func, Builder &b) {
    SmallVector<TransferOp> reads;
    for (auto copy : func.getBody().front().getOps<TransferOp>())
      if (zcc::zero::attrs(copy).getNvmeAttrHelper().isAttrPresent(copy) && copy.getToHost() &&
          !copy->hasAttr("async"))
        reads.push_back(copy);
    Operation *previousWait = nullptr;
    for (TransferOp read : reads) {
      Operation *first = firstUser(read);
      auto load = read.getInput().getDefiningOp<LoadOp>();
      if (!first || !load || !load->hasOneUse()) {
        previousWait = nullptr;
        continue;
      }
      bool ahead = previousWait && previousWait->isBeforeInBlock(read);
      previousWait = asyncRead(read, load, ahead ? previousWait : nullptr, first, b);
    }
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (device == "none" && param == "none")
      return;
    if ((device != "cpu" && device != "nvme") ||
        (param != "none" && param != "cpu" && param != "nvme")) {
      module.emitError("zero-offload: offload_optimizer '")
          << device << "' / offload_param '" << param
          << "': offload_optimizer must be cpu or nvme (offload_param needs one) and "
             "offload_param none, cpu or nvme";
      return signalPassFailure();
    }
    const bool nvme = device == "nvme" || param == "nvme";
    if (nvme && nvmePath.empty()) {
      module.emitError("zero-offload: nvme needs nvme-path (zcc --nvme-path DIR)");
      return signalPassFailure();
    }
    auto apply = module.lookupSymbol<func::FuncOp>("apply");
    if (!apply)
      return;
    Builder b(module.getContext());
    int64_t moved = 0;
    int64_t paramsMoved = 0;
    // Mixed precision's float32 master shards (buckets with a 16-bit working
    // copy, zero-partition): optimizer state as ZeRO-Offload keeps it, on
    // the host with the moments (also under nvme: the swap file holds the
    // moments); the device keeps the 16-bit copies.
    DenseSet<StringAttr> masters;
    if (auto buckets = zcc::zero::attrs(module).getBucketsAttrHelper().getAttr(module))
      for (auto d : buckets.getAsRange<zcc::zero::BucketAttr>())
        if (d.getCopy())
          masters.insert(d.getParam().getAttr());
    for (auto global : module.getOps<GlobalOp>()) {
      if (masters.contains(global.getSymNameAttr())) {
        zcc::zero::attrs(global).getHostAttrHelper().setAttr(global, b.getUnitAttr());
        moved += global.getTensorType().getNumElements();
        continue;
      }
      if (global.getRole() == GlobalRole::adam_m || global.getRole() == GlobalRole::adam_v) {
        global->setAttr(device == "nvme" ? zcc::zero::ZeroDialect::NvmeAttrHelper::getNameStr()
                                         : zcc::zero::ZeroDialect::HostAttrHelper::getNameStr(),
                        b.getUnitAttr());
        moved += global.getTensorType().getNumElements();
      }
      // offload_param: stage 3's partitioned parameter shards.
      if (param != "none" && global.getRole() == GlobalRole::param && global.getShardOfAttr()) {
        global->setAttr(param == "nvme" ? zcc::zero::ZeroDialect::NvmeAttrHelper::getNameStr()
                                        : zcc::zero::ZeroDialect::HostAttrHelper::getNameStr(),
                        b.getUnitAttr());
        paramsMoved += global.getTensorType().getNumElements();
      }
    }
    auto onNvme = [&](Value v) {
      auto load = v.getDefiningOp<LoadOp>();
      auto g = load ? module.lookupSymbol<GlobalOp>(load.getGlobalAttr()) : GlobalOp();
      return g && zcc::zero::attrs(g).getNvmeAttrHelper().isAttrPresent(g);
    };
    auto onHost = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (auto load = dyn_cast_if_present<LoadOp>(def))
        if (auto g = module.lookupSymbol<GlobalOp>(load.getGlobalAttr()))
          return zcc::zero::attrs(g).getHostAttrHelper().isAttrPresent(g);
      if (auto t = dyn_cast_if_present<TransferOp>(def))
        return t.getToHost();
      return def && zcc::zero::attrs(def).getOnHostAttrHelper().isAttrPresent(def);
    };
    int64_t updates = 0;
    SmallVector<Operation *> optimizers;
    apply.walk([&](Operation *op) {
      if (isa<AdamWOp, SgdOp>(op))
        optimizers.push_back(op);
    });
    // Stages 2-3: each rank's gradient shard accumulates in @micro_step; a
    // host twin of it is written right after the micro-step's last
    // accumulation (a device-to-host copy that overlaps the rest of the
    // backward), and the host update reads the twin. Clipping and loss-scale
    // unscaling (g * coef, coef a scalar known only after the backward) move
    // to the host with it: the same multiply on the twin.
    auto micro = module.lookupSymbol<func::FuncOp>("micro_step");
    DenseMap<StringAttr, GlobalOp> hostTwin;
    int64_t copiedInBackward = 0;
    for (Operation *op : optimizers) {
      Value grad = op->getOperand(1);
      auto scale = grad.getDefiningOp<MulOp>();
      if (scale &&
          (!scale->hasOneUse() || cast<RankedTensorType>(scale.getRhs().getType()).getRank() != 0))
        scale = MulOp();
      // A 16-bit gradient bucket is widened before the multiply (or for
      // SGD): the widening moves to the host too, the copy stays 16-bit.
      Value loaded = scale ? scale.getLhs() : grad;
      auto widen = loaded.getDefiningOp<CastOp>();
      if (widen && !widen->hasOneUse())
        widen = CastOp();
      auto load = (widen ? widen.getInput() : loaded).getDefiningOp<LoadOp>();
      auto g = load ? module.lookupSymbol<GlobalOp>(load.getGlobalAttr()) : GlobalOp();
      if (!micro || !g || g.getRole() != GlobalRole::grad || hostTwin.count(g.getSymNameAttr()))
        continue;
      StoreOp last;
      micro.walk([&](StoreOp store) {
        if (store.getGlobalAttr().getAttr() == g.getSymNameAttr())
          last = store;
      });
      if (!last)
        continue;
      OpBuilder gb(g);
      gb.setInsertionPointAfter(g);
      auto type = g.getTensorType();
      auto twin = GlobalOp::create(
          gb, g.getLoc(), (g.getSymName() + ".host").str(), GlobalRole::grad, /*trainable=*/false,
          type, DenseElementsAttr::get(type, gb.getFloatAttr(type.getElementType(), 0.0)));
      zcc::zero::attrs(twin).getHostAttrHelper().setAttr(twin, b.getUnitAttr());
      hostTwin[g.getSymNameAttr()] = twin;
      OpBuilder mb(last);
      mb.setInsertionPointAfter(last);
      Value shard =
          LoadOp::create(mb, last.getLoc(), type, FlatSymbolRefAttr::get(g.getSymNameAttr()));
      Value onHost = TransferOp::create(mb, last.getLoc(), shard, /*to_host=*/true);
      StoreOp::create(mb, last.getLoc(), onHost, FlatSymbolRefAttr::get(twin.getSymNameAttr()));
      OpBuilder ab(op);
      Value hostGrad =
          LoadOp::create(ab, op->getLoc(), type, FlatSymbolRefAttr::get(twin.getSymNameAttr()));
      if (widen) {
        auto hostWiden = CastOp::create(ab, widen.getLoc(), widen.getType(), hostGrad);
        zcc::zero::attrs(hostWiden).getOnHostAttrHelper().setAttr(hostWiden, b.getUnitAttr());
        hostGrad = hostWiden;
      }
      if (scale) {
        Value coef = TransferOp::create(ab, scale.getLoc(), scale.getRhs(), /*to_host=*/true);
        auto hostScale = MulOp::create(ab, scale.getLoc(), hostGrad, coef);
        zcc::zero::attrs(hostScale).getOnHostAttrHelper().setAttr(hostScale, b.getUnitAttr());
        hostGrad = hostScale;
      }
      op->setOperand(1, hostGrad);
      if (scale)
        scale->erase();
      if (widen)
        widen->erase();
      ++copiedInBackward;
    }
    if (device == "nvme")
      chunkNvmeUpdates(module, optimizers, onHost);
    for (Operation *op : optimizers) {
      OpBuilder ob(op);
      for (OpOperand &operand : op->getOpOperands())
        if (!onHost(operand.get())) {
          bool fromFile = onNvme(operand.get());
          auto read = TransferOp::create(ob, op->getLoc(), operand.get(), /*to_host=*/true);
          if (fromFile) // a read of the swap file into a host temporary
            zcc::zero::attrs(read).getNvmeAttrHelper().setAttr(read, b.getUnitAttr());
          operand.set(read);
        }
      zcc::zero::attrs(op).getOnHostAttrHelper().setAttr(op, b.getUnitAttr());
      ob.setInsertionPointAfter(op);
      for (Value result : op->getResults()) {
        // Stores into host globals read the host value; everything else
        // (the gather, the parameter's store) the device copy.
        SmallVector<OpOperand *> deviceUses, fileUses;
        for (OpOperand &use : result.getUses()) {
          auto store = dyn_cast<StoreOp>(use.getOwner());
          auto g = store ? module.lookupSymbol<GlobalOp>(store.getGlobalAttr()) : GlobalOp();
          if (g && zcc::zero::attrs(g).getNvmeAttrHelper().isAttrPresent(g))
            fileUses.push_back(&use);
          else if ((!g || !zcc::zero::attrs(g).getHostAttrHelper().isAttrPresent(g)) &&
                   !zcc::zero::attrs(use.getOwner())
                        .getOnHostAttrHelper()
                        .isAttrPresent(use.getOwner()))
            deviceUses.push_back(&use);
        }
        if (!fileUses.empty()) { // the new moments written back to the swap file
          auto write = TransferOp::create(ob, op->getLoc(), result, /*to_host=*/false);
          zcc::zero::attrs(write).getNvmeAttrHelper().setAttr(write, b.getUnitAttr());
          for (OpOperand *use : fileUses)
            use->set(write);
        }
        if (deviceUses.empty())
          continue;
        Value back = TransferOp::create(ob, op->getLoc(), result, /*to_host=*/false);
        for (OpOperand *use : deviceUses)
          use->set(back);
      }
      ++updates;
    }
    // Device ops reading host globals (the gathers of offloaded parameter
    // shards) read a device copy made right after the load; those reading
    // NVMe globals (offload_param nvme) a device copy of a host temporary
    // read from the file.
    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<LoadOp> loads;
      func.walk([&](LoadOp load) {
        if (onHost(load.getResult()) || onNvme(load.getResult()))
          loads.push_back(load);
      });
      for (LoadOp load : loads) {
        SmallVector<OpOperand *> deviceUses;
        for (OpOperand &use : load.getResult().getUses()) {
          Operation *user = use.getOwner();
          if (!zcc::zero::attrs(user).getOnHostAttrHelper().isAttrPresent(user) &&
              !isa<TransferOp>(user))
            deviceUses.push_back(&use);
        }
        if (deviceUses.empty())
          continue;
        OpBuilder lb(load);
        lb.setInsertionPointAfter(load);
        Value source = load.getResult();
        if (onNvme(source)) {
          auto read = TransferOp::create(lb, load.getLoc(), source, /*to_host=*/true);
          zcc::zero::attrs(read).getNvmeAttrHelper().setAttr(read, b.getUnitAttr());
          source = read;
        }
        Value copy = TransferOp::create(lb, load.getLoc(), source, /*to_host=*/false);
        for (OpOperand *use : deviceUses)
          use->set(copy);
      }
    }
    if (nvme) {
      pipelineNvmeCopies(apply, b);
      for (auto func : module.getOps<func::FuncOp>())
        if (func != apply)
          pipelineNvmeReads(func, b);
      SmallVector<NamedAttribute> io{b.getNamedAttr("path", b.getStringAttr(nvmePath))};
      if (nvmeBlockSize > 0)
        io.push_back(b.getNamedAttr("block_size", b.getI64IntegerAttr(nvmeBlockSize)));
      if (nvmeQueueDepth > 0)
        io.push_back(b.getNamedAttr("queue_depth", b.getI64IntegerAttr(nvmeQueueDepth)));
      zcc::zero::attrs(module).getNvmeAttrHelper().setAttr(module, b.getDictionaryAttr(io));
    }
    zcc::zero::attrs(module).getOffloadAttrHelper().setAttr(
        module,
        b.getDictionaryAttr(
            {b.getNamedAttr("optimizer", b.getStringAttr(device)),
             b.getNamedAttr("param", b.getStringAttr(param)),
             b.getNamedAttr("gradients_copied_in_backward", b.getI64IntegerAttr(copiedInBackward)),
             b.getNamedAttr("updates", b.getI64IntegerAttr(updates)),
             b.getNamedAttr("param_elements", b.getI64IntegerAttr(paramsMoved)),
             b.getNamedAttr("elements", b.getI64IntegerAttr(moved))}));
  }
};

} // namespace
