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

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (device == "none" && param == "none")
      return;
    if ((device != "cpu" && device != "nvme") || (param != "none" && param != "cpu")) {
      module.emitError("zero-offload: offload_optimizer '")
          << device << "' / offload_param '" << param
          << "': offload_optimizer must be cpu or nvme (offload_param needs one) and "
             "offload_param none or cpu";
      return signalPassFailure();
    }
    const bool nvme = device == "nvme";
    if (nvme && nvmePath.empty()) {
      module.emitError("zero-offload: device=nvme needs nvme-path (zcc --nvme-path DIR)");
      return signalPassFailure();
    }
    auto apply = module.lookupSymbol<func::FuncOp>("apply");
    if (!apply)
      return;
    Builder b(module.getContext());
    int64_t moved = 0;
    int64_t paramsMoved = 0;
    for (auto global : module.getOps<GlobalOp>()) {
      if (global.getRole() == GlobalRole::adam_m || global.getRole() == GlobalRole::adam_v) {
        global->setAttr(nvme ? "zero.nvme" : "zero.host", b.getUnitAttr());
        moved += global.getTensorType().getNumElements();
      }
      // offload_param: stage 3's partitioned parameter shards.
      if (param == "cpu" && global.getRole() == GlobalRole::param && global.getShardOfAttr()) {
        global->setAttr("zero.host", b.getUnitAttr());
        paramsMoved += global.getTensorType().getNumElements();
      }
    }
    auto onNvme = [&](Value v) {
      auto load = v.getDefiningOp<LoadOp>();
      auto g = load ? module.lookupSymbol<GlobalOp>(load.getGlobalAttr()) : GlobalOp();
      return g && g->hasAttr("zero.nvme");
    };
    auto onHost = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (auto load = dyn_cast_if_present<LoadOp>(def))
        if (auto g = module.lookupSymbol<GlobalOp>(load.getGlobalAttr()))
          return g->hasAttr("zero.host");
      if (auto t = dyn_cast_if_present<TransferOp>(def))
        return t.getToHost();
      return def && def->hasAttr("zero.on_host");
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
      twin->setAttr("zero.host", b.getUnitAttr());
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
        hostWiden->setAttr("zero.on_host", b.getUnitAttr());
        hostGrad = hostWiden;
      }
      if (scale) {
        Value coef = TransferOp::create(ab, scale.getLoc(), scale.getRhs(), /*to_host=*/true);
        auto hostScale = MulOp::create(ab, scale.getLoc(), hostGrad, coef);
        hostScale->setAttr("zero.on_host", b.getUnitAttr());
        hostGrad = hostScale;
      }
      op->setOperand(1, hostGrad);
      if (scale)
        scale->erase();
      if (widen)
        widen->erase();
      ++copiedInBackward;
    }
    for (Operation *op : optimizers) {
      OpBuilder ob(op);
      for (OpOperand &operand : op->getOpOperands())
        if (!onHost(operand.get())) {
          bool fromFile = onNvme(operand.get());
          auto read = TransferOp::create(ob, op->getLoc(), operand.get(), /*to_host=*/true);
          if (fromFile) // a read of the swap file into a host temporary
            read->setAttr("zero.nvme", b.getUnitAttr());
          operand.set(read);
        }
      op->setAttr("zero.on_host", b.getUnitAttr());
      ob.setInsertionPointAfter(op);
      for (Value result : op->getResults()) {
        // Stores into host globals read the host value; everything else
        // (the gather, the parameter's store) the device copy.
        SmallVector<OpOperand *> deviceUses, fileUses;
        for (OpOperand &use : result.getUses()) {
          auto store = dyn_cast<StoreOp>(use.getOwner());
          auto g = store ? module.lookupSymbol<GlobalOp>(store.getGlobalAttr()) : GlobalOp();
          if (g && g->hasAttr("zero.nvme"))
            fileUses.push_back(&use);
          else if (!g || !g->hasAttr("zero.host"))
            deviceUses.push_back(&use);
        }
        if (!fileUses.empty()) { // the new moments written back to the swap file
          auto write = TransferOp::create(ob, op->getLoc(), result, /*to_host=*/false);
          write->setAttr("zero.nvme", b.getUnitAttr());
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
    // shards) read a device copy made right after the load.
    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<LoadOp> loads;
      func.walk([&](LoadOp load) {
        if (onHost(load.getResult()))
          loads.push_back(load);
      });
      for (LoadOp load : loads) {
        SmallVector<OpOperand *> deviceUses;
        for (OpOperand &use : load.getResult().getUses()) {
          Operation *user = use.getOwner();
          if (!user->hasAttr("zero.on_host") && !isa<TransferOp>(user))
            deviceUses.push_back(&use);
        }
        if (deviceUses.empty())
          continue;
        OpBuilder lb(load);
        lb.setInsertionPointAfter(load);
        Value copy = TransferOp::create(lb, load.getLoc(), load.getResult(), /*to_host=*/false);
        for (OpOperand *use : deviceUses)
          use->set(copy);
      }
    }
    if (nvme) {
      SmallVector<NamedAttribute> io{b.getNamedAttr("path", b.getStringAttr(nvmePath))};
      if (nvmeBlockSize > 0)
        io.push_back(b.getNamedAttr("block_size", b.getI64IntegerAttr(nvmeBlockSize)));
      if (nvmeQueueDepth > 0)
        io.push_back(b.getNamedAttr("queue_depth", b.getI64IntegerAttr(nvmeQueueDepth)));
      module->setAttr("zero.nvme", b.getDictionaryAttr(io));
    }
    module->setAttr(
        "zero.offload",
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
