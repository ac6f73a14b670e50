//===- PlanWriter.cpp - zrt module -> plan.proto --------------------------===//
#include "zcc/Analysis/MemoryPlan.h"
#include "zcc/Target/Plan.h"
#include "zero/ZeroOps.h"
#include "zrt/ZrtOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"

#include "plan/plan.pb.h"

#include <cmath>

using namespace mlir;
using namespace zcc;

namespace zplan = ::zrt::plan;

static FailureOr<zplan::DType> dtypeOf(Type t, Location loc) {
  if (t.isF32())
    return zplan::F32;
  if (t.isF64())
    return zplan::F64;
  if (t.isF16())
    return zplan::F16;
  if (t.isBF16())
    return zplan::BF16;
  if (t.isInteger(64))
    return zplan::I64;
  if (t.isInteger(32))
    return zplan::I32;
  if (t.isInteger(1))
    return zplan::BOOL;
  if (t.isInteger(8))
    return zplan::I8;
  return emitError(loc, "the plan format has no element type ") << t;
}

/// The little-endian contents of |attr|, one element after another (i1 as
/// one byte each, splats expanded).
LogicalResult zcc::writePlan(ModuleOp module, llvm::raw_ostream &os,
                             const PlanWriterOptions &options) {
  zplan::Plan plan;
  plan.set_version(1);
  plan.set_world_size(1);
  plan.set_zero_stage(0);
  if (auto partition = zcc::zero::attrs(module).getPartitionAttrHelper().getAttr(module)) {
    plan.set_world_size(partition.getWorldSize());
    plan.set_zero_stage(partition.getStage());
    plan.set_group_size(partition.getGroupSize());
    if (partition.getStateShards() != partition.getWorldSize())
      plan.set_state_shards(partition.getStateShards());
  }
  if (auto source = zcc::zero::attrs(module).getSourceAttrHelper().getAttr(module))
    plan.set_source(source.str());
  if (auto target = zcc::zero::attrs(module).getTargetAttrHelper().getAttr(module))
    plan.set_target(zcc::zero::stringifyTarget(target.getValue()).str());
  if (auto record = zcc::zero::attrs(module).getExportRecordAttrHelper().getAttr(module)) {
    zplan::ExportRecord *r = plan.mutable_record();
    if (auto names = record.getAs<DictionaryAttr>("names"))
      for (NamedAttribute n : names) { // a DictionaryAttr is sorted by name
        zplan::ParameterName *pn = r->add_names();
        pn->set_initializer(n.getName().str());
        pn->set_name(cast<StringAttr>(n.getValue()).str());
      }
    if (auto tied = record.getAs<ArrayAttr>("tied"))
      for (auto group : tied.getAsRange<ArrayAttr>()) {
        zplan::TiedNames *t = r->add_tied();
        for (auto name : group.getAsRange<StringAttr>())
          t->add_names(name.str());
      }
    if (auto config = record.getAs<StringAttr>("config"))
      r->set_config(config.str());
  }
  for (const std::string &arg : options.command)
    plan.add_command(arg);
  if (auto budget = zcc::zero::attrs(module).getMemoryBudgetAttrHelper().getAttr(module))
    plan.set_memory_budget(budget.getInt());
  if (auto budget = zcc::zero::attrs(module).getHostMemoryBudgetAttrHelper().getAttr(module))
    plan.set_host_memory_budget(budget.getInt());
  auto arenaBytes = [&](zcc::zrt::Arena arena) { return zcc::zrt::arenaBytes(module, arena); };
  plan.set_device_arena_bytes(arenaBytes(zcc::zrt::Arena::device));
  plan.set_state_arena_bytes(arenaBytes(zcc::zrt::Arena::state));
  plan.set_constant_arena_bytes(arenaBytes(zcc::zrt::Arena::constant));
  plan.set_input_arena_bytes(arenaBytes(zcc::zrt::Arena::input));
  plan.set_host_arena_bytes(std::max<int64_t>(0, arenaBytes(zcc::zrt::Arena::host)));
  if (auto hostState = zcc::zrt::attrs(module).getHostStateBytesAttrHelper().getAttr(module))
    plan.set_host_state_bytes(hostState.getInt());
  plan.set_nvme_arena_bytes(std::max<int64_t>(0, arenaBytes(zcc::zrt::Arena::nvme)));
  if (auto nvme = llvm::dyn_cast_or_null<DictionaryAttr>(
          zcc::zero::attrs(module).getNvmeAttrHelper().getAttr(module))) {
    if (auto path = nvme.getAs<StringAttr>("path"))
      plan.set_nvme_path(path.str());
    if (auto block = nvme.getAs<IntegerAttr>("block_size"))
      plan.mutable_nvme_io()->set_block_size(block.getInt());
    if (auto depth = nvme.getAs<IntegerAttr>("queue_depth"))
      plan.mutable_nvme_io()->set_queue_depth(depth.getInt());
  }
  if (plan.device_arena_bytes() < 0 || plan.state_arena_bytes() < 0)
    return module.emitError("the module has no arena sizes; run convert-zero-to-zrt first");

  DictionaryAttr recordNames;
  if (auto record = zcc::zero::attrs(module).getExportRecordAttrHelper().getAttr(module))
    recordNames = record.getAs<DictionaryAttr>("names");
  llvm::DenseMap<StringAttr, int> index;
  for (auto buffer : module.getOps<zcc::zrt::BufferOp>()) {
    index[buffer.getSymNameAttr()] = plan.buffers_size();
    zplan::Buffer *pb = plan.add_buffers();
    pb->set_name(buffer.getSymName().str());
    pb->set_arena(static_cast<zplan::Arena>(buffer.getArena()));
    pb->set_offset(buffer.getOffsetAttr().getInt());
    auto type = cast<RankedTensorType>(buffer.getType());
    auto dtype = dtypeOf(type.getElementType(), buffer.getLoc());
    if (failed(dtype))
      return failure();
    pb->set_dtype(*dtype);
    for (int64_t d : type.getShape())
      pb->add_shape(d);
    pb->set_trainable(buffer.getTrainable());
    pb->set_view(buffer.getView());
    if (auto role = buffer.getRoleAttr())
      pb->set_role(role.str());
    if (auto shardOf = buffer.getShardOfAttr())
      pb->set_shard_of(shardOf.getInt());
    // The weights zrun's --weights file supplies (runtime/train/Weights.cpp
    // picks the same buffers).
    StringRef role = buffer.getRole() ? *buffer.getRole() : "";
    bool weight =
        (buffer.getArena() == zcc::zrt::Arena::state ||
         ((buffer.getArena() == zcc::zrt::Arena::host ||
           buffer.getArena() == zcc::zrt::Arena::nvme) &&
          buffer.getShardOfAttr())) &&
        !buffer.getView() && type.getElementType().isF32() && buffer.getInitialValueAttr() &&
        (buffer.getTrainable() || role == "buffer" || (role == "param" && buffer.getShardOfAttr()));
    // With an export record, a frozen buffer that is no parameter of the
    // module (a rotary inv_freq, the exporter's constants) is not in the
    // module's checkpoints: the plan keeps its values.
    if (role == "buffer" && recordNames && !recordNames.contains(pb->name()))
      weight = false;
    auto splat = dyn_cast_if_present<DenseElementsAttr>(buffer.getInitialValueAttr());
    if (options.externalWeights && weight) {
      pb->set_external(true);
    } else if (splat && splat.isSplat() &&
               (type.getNumElements() > 1 || buffer.getArena() == zcc::zrt::Arena::nvme) &&
               (splat.getElementType().isF32() || splat.getElementType().isF64() ||
                ((splat.getElementType().isBF16() || splat.getElementType().isF16()) &&
                 splat.getSplatValue<APFloat>().isPosZero()))) {
      // (16-bit splats other than zero are written out: the plan's fill is
      // float32/float64, or a 16-bit zero.)
      pb->set_fill(splat.getSplatValue<APFloat>().convertToDouble());
    } else if (auto init = buffer.getInitialValueAttr()) {
      auto bytes = zcc::elementBytes(init, buffer.getLoc());
      if (failed(bytes))
        return failure();
      pb->set_initial_data(std::move(*bytes));
    }
  }

  for (auto program : module.getOps<zcc::zrt::ProgramOp>()) {
    zplan::Program *pp = plan.add_programs();
    pp->set_name(program.getSymName().str());
    for (auto [dict, list] : {std::pair{program.getInputs(), pp->mutable_inputs()},
                              {program.getOutputs(), pp->mutable_outputs()}})
      for (NamedAttribute named : dict) {
        zplan::NamedBuffer *nb = list->Add();
        nb->set_name(named.getName().str());
        nb->set_buffer(index.lookup(cast<FlatSymbolRefAttr>(named.getValue()).getAttr()));
      }
    for (Operation &op : program.getBody().front()) {
      std::string where;
      llvm::raw_string_ostream ws(where);
      if (auto name = dyn_cast<NameLoc>(op.getLoc()))
        ws << name.getName().strref();
      if (auto coll = dyn_cast<zcc::zrt::CollectiveOp>(op)) {
        zplan::Collective *pc = pp->add_instructions()->mutable_collective();
        using zcc::zrt::CollectiveKind;
        switch (coll.getKind()) {
        case CollectiveKind::all_reduce:
          pc->set_kind(zplan::Collective::ALL_REDUCE);
          break;
        case CollectiveKind::reduce_scatter:
          pc->set_kind(zplan::Collective::REDUCE_SCATTER);
          break;
        case CollectiveKind::all_gather:
          pc->set_kind(zplan::Collective::ALL_GATHER);
          break;
        case CollectiveKind::all_to_all:
          pc->set_kind(zplan::Collective::ALL_TO_ALL);
          break;
        case CollectiveKind::local_shard:
          pc->set_kind(zplan::Collective::LOCAL_SHARD);
          break;
        }
        pc->set_reduce(coll.getReduce() == 1 ? zplan::Collective::AVG : zplan::Collective::SUM);
        pc->set_input(index.lookup(coll.getInputAttr().getAttr()));
        pc->set_output(index.lookup(coll.getOutputAttr().getAttr()));
        pc->set_location(where);
        pc->set_async(coll.getAsync());
        pc->set_group(zplan::Collective::Group(coll.getGroup()));
        continue;
      }
      if (auto wait = dyn_cast<zcc::zrt::WaitOp>(op)) {
        zplan::Wait *pw = pp->add_instructions()->mutable_wait();
        pw->set_output(index.lookup(wait.getOutputAttr().getAttr()));
        pw->set_location(where);
        continue;
      }
      if (auto copy = dyn_cast<zcc::zrt::CopyOp>(op)) {
        zplan::Copy *pc = pp->add_instructions()->mutable_copy();
        pc->set_source(index.lookup(copy.getSourceAttr().getAttr()));
        pc->set_target(index.lookup(copy.getTargetAttr().getAttr()));
        pc->set_location(where);
        pc->set_async(copy->hasAttr("async"));
        continue;
      }
      auto kernel = cast<zcc::zrt::KernelOp>(op);
      zplan::Kernel *pk = pp->add_instructions()->mutable_kernel();
      pk->set_name(kernel.getName().str());
      for (Attribute a : kernel.getInputs())
        pk->add_inputs(index.lookup(cast<FlatSymbolRefAttr>(a).getAttr()));
      for (Attribute a : kernel.getOutputs())
        pk->add_outputs(index.lookup(cast<FlatSymbolRefAttr>(a).getAttr()));
      for (int64_t v : kernel.getInts())
        pk->add_ints(v);
      for (double v : kernel.getFloats())
        pk->add_floats(v);
      pk->set_location(where);
      if (auto code = kernel->getAttrOfType<StringAttr>("code"))
        pk->set_code(code.str());
      if (kernel->hasAttr("async"))
        pk->set_async(true);
    }
  }
  if (auto buckets = zcc::zero::attrs(module).getBucketsAttrHelper().getAttr(module)) {
    for (auto d : buckets.getAsRange<zcc::zero::BucketAttr>()) {
      FlatSymbolRefAttr param = d.getParam(), grad = d.getGrad();
      // No gradient bucket where the updates run in @micro_step
      // (zero-optimizer-in-backward).
      if (!index.count(param.getAttr()) || (grad && !index.count(grad.getAttr())))
        return module.emitError("zero.buckets names a bucket without a buffer");
      for (zcc::zero::BucketMemberAttr m : d.getMemberList()) {
        zplan::ParamLayout *l = plan.add_params();
        l->set_name(m.getName().str());
        for (int64_t dim : cast<RankedTensorType>(m.getType()).getShape())
          l->add_shape(dim);
        l->set_bucket(index.lookup(param.getAttr()));
        l->set_grad(grad ? index.lookup(grad.getAttr()) : -1);
        l->set_offset(m.getOffset());
        l->set_sharded(d.getParamSharded());
        l->set_grad_sharded(d.getGradSharded());
        l->set_bucket_size(d.getSize());
      }
    }
  }
  if (auto training = zcc::zero::attrs(module).getTrainingAttrHelper().getAttr(module)) {
    zplan::Training *t = plan.mutable_training();
    t->set_grad_accum_steps(training.getGradAccumSteps());
    t->set_lr(training.getLr());
    t->set_beta1(training.getBeta1());
    t->set_beta2(training.getBeta2());
    t->set_eps(training.getEps());
    t->set_weight_decay(training.getWeightDecay());
    t->set_grad_clip(training.getGradClip());
    t->set_optimizer(training.getOptimizer().str());
    if (zcc::zero::ScheduleAttr schedule = training.getSchedule()) {
      zplan::LrSchedule *l = t->mutable_schedule();
      l->set_name(schedule.getName().str());
      l->set_lr(schedule.getLr());
      l->set_warmup_steps(schedule.getWarmupSteps());
      l->set_total_steps(schedule.getTotalSteps());
      l->set_warmup_min_lr(schedule.getWarmupMinLr());
      l->set_warmup_log(schedule.getWarmupLog());
      l->set_warmup_min_ratio(schedule.getWarmupMinRatio());
      l->set_cos_min_ratio(schedule.getCosMinRatio());
    }
    if (auto precision = zcc::zero::attrs(module).getPrecisionAttrHelper().getAttr(module))
      t->set_precision(zcc::zero::stringifyPrecision(precision.getValue()).str());
    if (auto ls = zcc::zero::attrs(module).getLossScalingAttrHelper().getAttr(module)) {
      zplan::LossScaling *l = t->mutable_loss_scaling();
      l->set_static_scale(ls.getLossScale());
      l->set_initial_scale(std::ldexp(1.0, (int)ls.getInitialScalePower()));
      l->set_window(ls.getLossScaleWindow());
      l->set_hysteresis(ls.getHysteresis());
      l->set_consecutive_hysteresis(ls.getConsecutiveHysteresis());
      l->set_min_scale(ls.getMinLossScale());
    }
    // Samples per rank and micro-step: micro_step's first data input's
    // leading dimension (the runtime's planMicroBatch checks it; the inputs
    // the trainer fills are its isTrainerInput).
    for (const zplan::Program &p : plan.programs())
      if (p.name() == "micro_step")
        for (const zplan::NamedBuffer &in : p.inputs())
          if (in.name() != "loss_scale" && in.name() != "dropout_rng" &&
              plan.buffers(in.buffer()).shape_size() > 0) {
            plan.set_micro_batch(plan.buffers(in.buffer()).shape(0));
            break;
          }
  }
  std::string bytes;
  if (!plan.SerializeToString(&bytes))
    return module.emitError("cannot serialize the plan");
  os.write(bytes.data(), bytes.size());
  return success();
}
