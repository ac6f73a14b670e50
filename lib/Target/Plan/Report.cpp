//===- Report.cpp - the per-rank memory table -----------------------------===//
#include "PlanStats.h"

#include "zcc/Analysis/DeepSpeedEstimate.h"
#include "zcc/Analysis/MemoryPlan.h"
#include "zcc/Target/Plan.h"
#include "zrt/ZrtOps.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <algorithm>

using namespace mlir;
using namespace zcc;
using namespace zcc::plan_stats;

LogicalResult zcc::printReport(ModuleOp module, llvm::raw_ostream &out, const ScalingModel *scaling,
                               bool json) {
  // --format json: the text goes nowhere, the figures into |report|.
  std::string discarded;
  llvm::raw_string_ostream textSink(discarded);
  llvm::raw_ostream &os = json ? textSink : out;
  llvm::json::Object report, memory;
  auto finish = [&]() -> LogicalResult {
    if (json) {
      report["memory"] = std::move(memory);
      out << llvm::formatv("{0:2}", llvm::json::Value(std::move(report))) << "\n";
    }
    return success();
  };
  auto arena = [&](zcc::zrt::Arena a) { return zcc::zrt::arenaBytes(module, a); };
  int64_t device = arena(zcc::zrt::Arena::device), state = arena(zcc::zrt::Arena::state),
          constant = arena(zcc::zrt::Arena::constant), input = arena(zcc::zrt::Arena::input);
  if (device < 0 || state < 0 || constant < 0 || input < 0)
    return module.emitError("the module has no arena sizes; run convert-zero-to-zrt first");
  // ZeRO layout: parameters inside flat buckets overlap them (counted once,
  // as the bucket); the trainable count comes from the members.
  int64_t stage = 0, world = 1;
  if (auto partition = zcc::zero::attrs(module).getPartitionAttrHelper().getAttr(module)) {
    stage = partition.getStage();
    world = partition.getWorldSize();
  }
  llvm::StringSet<> members, buckets;
  int64_t numParams = 0, bucketed = 0;
  std::vector<std::pair<std::string, int64_t>> trainableNames; // DeepSpeed's largest layer
  if (auto list = zcc::zero::attrs(module).getBucketsAttrHelper().getAttr(module))
    for (auto d : list.getAsRange<zcc::zero::BucketAttr>()) {
      buckets.insert(d.getParam().getValue());
      for (zcc::zero::BucketMemberAttr md : d.getMemberList()) {
        members.insert(md.getName().getValue());
        int64_t n = cast<RankedTensorType>(md.getType()).getNumElements();
        bucketed += n;
        trainableNames.push_back({md.getName().getValue().str(), n});
      }
    }
  int64_t params = 0, frozen = 0, grads = 0, optimizer = 0, kernels = 0, copies = 0;
  std::vector<std::pair<int64_t, int64_t>> copyRanges; // param_copy buffers: offset, raw bytes
  // adam_m / adam_v buffers: a bucket's and its members' (zero-optimizer-in-backward).
  std::vector<std::pair<int64_t, int64_t>> momentRanges;
  int64_t hostOptimizer = 0, hostParams = 0, hostGrads = 0, nvmeOptimizer = 0, nvmeParams = 0;
  for (auto buffer : module.getOps<zcc::zrt::BufferOp>()) {
    if (buffer.getArena() == zcc::zrt::Arena::nvme && !buffer.getView())
      (buffer.getRole() && *buffer.getRole() == "param" ? nvmeParams : nvmeOptimizer) +=
          storageBytes(buffer.getType());
    if (buffer.getArena() == zcc::zrt::Arena::host && !buffer.getView() && buffer.getRole())
      (*buffer.getRole() == "param"  ? hostParams
       : *buffer.getRole() == "grad" ? hostGrads
                                     : hostOptimizer) += alignArena(storageBytes(buffer.getType()));
    if (buffer.getArena() != zcc::zrt::Arena::state || buffer.getView())
      continue;
    int64_t bytes = alignArena(storageBytes(buffer.getType()));
    StringRef role = buffer.getRole() ? *buffer.getRole() : "param";
    if (role == "param_copy") { // zero-fuse-optimizer: counted below, once
      copyRanges.push_back({(int64_t)buffer.getOffset(), storageBytes(buffer.getType())});
      continue;
    }
    if (role == "adam_m" || role == "adam_v") { // members of a moment bucket: counted below
      momentRanges.push_back({(int64_t)buffer.getOffset(), storageBytes(buffer.getType())});
      continue;
    }
    if (members.contains(buffer.getSymName()))
      continue; // inside its bucket
    if (buffer.getTrainable() || buckets.contains(buffer.getSymName())) {
      params += bytes;
      if (buffer.getTrainable()) {
        int64_t n = cast<RankedTensorType>(buffer.getType()).getNumElements();
        numParams += n;
        trainableNames.push_back({buffer.getSymName().str(), n});
      }
    } else if (role == "grad") {
      grads += bytes;
    } else if (role == "adam_m" || role == "adam_v" || role == "step") {
      optimizer += bytes;
    } else {
      frozen += bytes;
    }
  }
  numParams += bucketed;
  // The copies' (moments') buckets: the buffers no other one contains (its
  // members lie inside it).
  auto outermost = [](std::vector<std::pair<int64_t, int64_t>> ranges) {
    llvm::sort(ranges); // a member alone in its bucket: one range
    ranges.erase(std::unique(ranges.begin(), ranges.end()), ranges.end());
    int64_t total = 0;
    for (auto [offset, bytes] : ranges)
      if (llvm::none_of(ranges, [&, offset = offset, bytes = bytes](auto other) {
            return other != std::pair{offset, bytes} && other.first <= offset &&
                   offset + bytes <= other.first + other.second;
          }))
        total += alignArena(bytes);
    return total;
  };
  copies += outermost(copyRanges);
  optimizer += outermost(momentRanges);
  std::string programs;
  for (auto program : module.getOps<zcc::zrt::ProgramOp>()) {
    int64_t n = llvm::range_size(program.getBody().front());
    kernels += n;
    programs +=
        (programs.empty() ? "" : ", ") + program.getSymName().str() + " " + std::to_string(n);
  }

  auto row = [&](StringRef what, int64_t bytes, StringRef note) {
    memory[what] = bytes;
    os << llvm::format("  %-24s %14lld B %12.3f MiB  ", what.str().c_str(), (long long)bytes,
                       bytes / 1048576.0)
       << note << "\n";
  };
  auto precisionAttr = zcc::zero::attrs(module).getPrecisionAttrHelper().getAttr(module);
  StringRef precision = zcc::zero::stringifyPrecision(precisionAttr ? precisionAttr.getValue()
                                                                    : zcc::zero::Precision::fp32);
  os << "zcc memory report (per rank; world size " << world << ", ZeRO stage " << stage << ", "
     << precision << ")\n";
  report["world_size"] = world;
  report["zero_stage"] = stage;
  report["precision"] = precision.str();
  if (auto source = zcc::zero::attrs(module).getSourceAttrHelper().getAttr(module))
    report["model"] = source.getValue().str();
  if (auto source = zcc::zero::attrs(module).getSourceAttrHelper().getAttr(module))
    os << "  model: " << source.getValue() << ", " << numParams << " trainable parameters\n";
  os << "  instructions: " << programs << "\n";
  // The training step's settings, as resolved from flags and --deepspeed.
  if (auto training = zcc::zero::attrs(module).getTrainingAttrHelper().getAttr(module)) {
    StringRef opt = training.getOptimizer();
    os << "  training: " << opt << llvm::format(" lr %g", training.getLr());
    if (opt == "adamw")
      os << llvm::format(" betas (%g, %g) eps %g", training.getBeta1(), training.getBeta2(),
                         training.getEps());
    os << llvm::format(" weight_decay %g, grad_clip %g, grad_accum %lld\n",
                       training.getWeightDecay(), training.getGradClip(),
                       (long long)training.getGradAccumSteps());
    if (auto in = zcc::zero::attrs(module).getOptimizerInBackwardAttrHelper().getAttr(module)) {
      auto async = in.getAs<BoolAttr>("async");
      os << llvm::format("  optimizer in the backward: %lld updates in micro_step, each once its "
                         "gradient is final%s; no gradient bucket\n",
                         (long long)in.getAs<IntegerAttr>("updates").getInt(),
                         async && async.getValue() ? " (on a second stream)" : "");
    }
    if (zcc::zero::ScheduleAttr sched = training.getSchedule()) {
      auto steps = [](int64_t n) { return n < 0 ? std::string("auto") : std::to_string(n); };
      os << "  schedule: " << sched.getName() << llvm::format(" lr %g", sched.getLr())
         << ", warmup " << steps(sched.getWarmupSteps()) << " steps ("
         << (sched.getWarmupLog() ? "log" : "linear") << ")"
         << ", total " << steps(sched.getTotalSteps())
         << llvm::format(", warmup_min_lr %g, warmup_min_ratio %g, cos_min_ratio %g\n",
                         sched.getWarmupMinLr(), sched.getWarmupMinRatio(), sched.getCosMinRatio());
    }
  }
  if (auto ls = zcc::zero::attrs(module).getLossScalingAttrHelper().getAttr(module)) {
    if (ls.getLossScale() > 0)
      os << llvm::format("  loss scaling: static %g\n", ls.getLossScale());
    else
      os << llvm::format("  loss scaling: dynamic, initial 2^%lld, window %lld, hysteresis %lld, "
                         "min %g\n",
                         (long long)ls.getInitialScalePower(), (long long)ls.getLossScaleWindow(),
                         (long long)ls.getHysteresis(), ls.getMinLossScale());
  }
  if (auto partition = zcc::zero::attrs(module).getPartitionAttrHelper().getAttr(module)) {
    int64_t count = 0, sharded = 0;
    if (auto list = zcc::zero::attrs(module).getBucketsAttrHelper().getAttr(module))
      for (auto d : list.getAsRange<zcc::zero::BucketAttr>()) {
        ++count;
        sharded += d.getParamSharded() && !d.getCopy(); // (sharded masters: not partitioned)
      }
    os << llvm::format("  zero: %lld buckets (%lld with partitioned parameters), "
                       "reduce_bucket_size %lld, allgather_bucket_size %lld, "
                       "stage3_param_persistence_threshold %lld\n",
                       (long long)count, (long long)sharded,
                       (long long)partition.getReduceBucketSize(),
                       (long long)partition.getAllgatherBucketSize(),
                       (long long)partition.getPersistenceThreshold());
    // DeepSpeed's rule keeps parameters under the threshold whole on every
    // rank; a small model can so end up with stage 3 partitioning nothing.
    if (stage == 3 && world > 1 && count > 0 && sharded == 0)
      os << llvm::format("  note: stage 3 partitions no parameter: every one has fewer than "
                         "stage3_param_persistence_threshold = %lld elements and stays whole on "
                         "each rank; lower it (--stage3-param-persistence-threshold) to shard "
                         "them\n",
                         (long long)partition.getPersistenceThreshold());
  }
  if (auto chosen = zcc::zero::attrs(module).getAutoAttrHelper().getAttr(module))
    os << "  auto: " << chosen.getValue() << "\n";
  if (auto rc = zcc::zero::attrs(module).getRecomputeAttrHelper().getAttr(module))
    os << "  recompute: " << rc.getAs<StringAttr>("policy").getValue() << " ("
       << rc.getAs<StringAttr>("note").getValue() << ")\n";
  row("parameters", params, "trainable state");
  if (copies > 0)
    row("parameter copies", copies, "16-bit working parameters, written by the optimizer");
  row("gradients", grads, "accumulated over micro-steps");
  row("optimizer state", optimizer, "AdamW moments and step");
  row("frozen buffers", frozen, "state that does not train");
  row("constants", constant, "folded at compile time");
  row("inputs", input, "one micro-batch of data");
  row("activations+workspace", device, "device arena: peak of live temporaries");
  row("peak", state + constant + input + device, "sum of the arenas the runtime allocates");
  int64_t host = arena(zcc::zrt::Arena::host);
  if (hostParams > 0)
    row("parameters (host)", hostParams,
        copies > 0 ? "float32 master shards (--offload-optimizer) or stage-3 shards "
                     "(--offload-param cpu)"
                   : "stage-3 shards offloaded (--offload-param cpu)");
  if (hostGrads > 0)
    row("gradients (host)", hostGrads, "shards copied in the backward for the host update");
  if (hostOptimizer > 0)
    row("optimizer state (host)", hostOptimizer,
        "AdamW moments offloaded (--offload-optimizer cpu)");
  row("host memory", host > 0 ? host : 0, "pinned host arena: offloaded state + host temporaries");
  if (int64_t nvme = arena(zcc::zrt::Arena::nvme); nvme > 0) {
    // ZeRO-Infinity: the swap file's size, and what the steps move through it.
    auto where = llvm::dyn_cast_or_null<DictionaryAttr>(
        zcc::zero::attrs(module).getNvmeAttrHelper().getAttr(module));
    auto path = where ? where.getAs<StringAttr>("path") : StringAttr();
    if (nvmeParams > 0)
      row("parameters (NVMe)", nvmeParams,
          "stage-3 shards in the swap file (--offload-param nvme)");
    if (nvmeOptimizer > 0)
      row("optimizer state (NVMe)", nvmeOptimizer,
          "AdamW moments in a swap file per rank (--offload-optimizer nvme)");
    row("NVMe per rank", nvme,
        ("swap file zcc-rank<R>.swap under " + (path ? path.getValue() : StringRef("?"))).str());
    TypeMap nvmeBuffers;
    for (auto buffer : module.getOps<zcc::zrt::BufferOp>())
      if (buffer.getArena() == zcc::zrt::Arena::nvme)
        nvmeBuffers[buffer.getSymNameAttr()] = cast<RankedTensorType>(buffer.getType());
    int64_t accum = accumSteps(module), readBytes = 0, writeBytes = 0;
    for (auto program : module.getOps<zcc::zrt::ProgramOp>()) {
      if (program.getSymName() == "eval" || program.getSymName() == "refresh")
        continue;
      int64_t times = program.getSymName() == "micro_step" ? accum : 1;
      for (auto copy : program.getBody().front().getOps<zcc::zrt::CopyOp>()) {
        if (auto t = nvmeBuffers.lookup(copy.getSourceAttr().getAttr()))
          readBytes += times * storageBytes(t);
        if (auto t = nvmeBuffers.lookup(copy.getTargetAttr().getAttr()))
          writeBytes += times * storageBytes(t);
      }
    }
    row("NVMe read per step", readBytes,
        nvmeParams > 0 ? "swap file -> pinned host memory, for the gathers and the host update"
                       : "swap file -> pinned host memory, for the host update");
    row("NVMe written per step", writeBytes,
        nvmeParams > 0 ? "the updated shards back to the swap file"
                       : "the updated moments back to the swap file");
  }
  if (auto budget = zcc::zero::attrs(module).getMemoryBudgetAttrHelper().getAttr(module))
    row("memory budget", budget.getInt(),
        "zcc/zrun --memory-budget (the CUDA backend adds a 32 MiB cuBLASLt workspace)");
  if (auto budget = zcc::zero::attrs(module).getHostMemoryBudgetAttrHelper().getAttr(module))
    row("host memory budget", budget.getInt(), "zcc/zrun --host-memory-budget (the host arena)");
  report["trainable_parameters"] = numParams;
  if (!zcc::zero::attrs(module).getBucketsAttrHelper().getAttr(module))
    return finish();

  // Model states against the ZeRO paper (Rajbhandari et al., 2020, Fig. 1 /
  // Table 1): K bytes of optimizer state per parameter over N ranks; the
  // paper's mixed-precision Adam is 2 + 2 + 12 (16-bit parameters and
  // gradients; float32 masters and moments). zcc's layout: float32
  // parameters (the masters, sharded at stages 1-3 when a 16-bit working
  // copy sits beside them, as DeepSpeed's bf16/fp16 optimizers), the 16-bit
  // copies where the plan keeps them, gradients of the buckets' element
  // type, AdamW's two float32 moments.
  double psi = (double)numParams, n = (double)world;
  const bool working = copies > 0;
  double gradBytes = 4;
  if (auto list = zcc::zero::attrs(module).getBucketsAttrHelper().getAttr(module);
      list && !list.empty())
    if (FlatSymbolRefAttr grad = cast<zcc::zero::BucketAttr>(list[0]).getGrad())
      for (auto buffer : module.getOps<zcc::zrt::BufferOp>())
        if (buffer.getSymName() == grad.getValue())
          gradBytes = cast<RankedTensorType>(buffer.getType()).getElementTypeBitWidth() / 8;
  auto formula = [&](double p, double g, double k) {
    switch (stage) {
    case 0:
      return (p + g + k) * psi;
    case 1:
      return (p + g) * psi + k * psi / n;
    case 2:
      return p * psi + (g + k) * psi / n;
    default:
      return (p + g + k) * psi / n;
    }
  };
  // zcc's: the masters are sharded with the moments beside a working copy
  // (stages 1-2), the copies 2 Psi (stage 3: its persistent buckets', as
  // planned).
  double zccFormula = formula(4, gradBytes, 8);
  if (working && (stage == 1 || stage == 2))
    zccFormula = formula(2, gradBytes, 12);
  else if (working)
    zccFormula += stage == 0 ? 2 * psi : (double)copies;
  static const char *paper[] = {"16 Psi", "4 Psi + 12 Psi/N", "2 Psi + 14 Psi/N", "16 Psi/N"};
  os << llvm::format("  model states %27.0f B  (params, copies, grads and optimizer state above)\n",
                     (double)(params + copies + grads + optimizer));
  std::string layout =
      working ? (stage >= 1 ? "16-bit working parameters (2 bytes), float32 master shards and "
                              "moments (4+8), "
                            : "16-bit working parameters (2 bytes), float32 masters and moments "
                              "(4+8), ")
              : "float32 parameters and moments (4+8), ";
  layout += gradBytes == 2 ? "16-bit gradients (2)" : "float32 gradients (4)";
  os << llvm::format("    zcc formula, stage %lld   %14.0f B  (%s; padding to the bucket layout "
                     "aside)\n",
                     (long long)stage, zccFormula, layout.c_str());
  os << llvm::format("    ZeRO paper, stage %lld    %14.0f B  (%s, mixed-precision Adam: 2+2+12)\n",
                     (long long)stage, formula(2, 2, 12), paper[std::clamp<int64_t>(stage, 0, 3)]);
  const int64_t modelStates = params + grads + optimizer + copies;
  llvm::json::Object states{
      {"bytes", modelStates}, {"zcc_formula", zccFormula}, {"paper", formula(2, 2, 12)}};
  // DeepSpeed's estimator for the same config (largest layer: the
  // trainable parameters grouped by module).
  std::optional<DeepSpeedEstimate> ds =
      deepspeedEstimate((int)stage, psi, (double)largestLayerParams(trainableNames), world,
                        hostOptimizer + nvmeOptimizer > 0, hostParams + nvmeParams > 0);
  if (ds) {
    os << llvm::format(
        "    DeepSpeed's estimator %14.0f B  (%s: %s, N = %lld GPUs%s; zcc's model "
        "states above are %.3f of it)\n",
        ds->gpuBytes, ds->function.c_str(), ds->formula.c_str(), (long long)world,
        stage == 3 ? (", L = " + std::to_string(largestLayerParams(trainableNames)) + " parameters")
                         .c_str()
                   : "",
        ds->gpuBytes > 0 ? (double)modelStates / ds->gpuBytes : 0.0);
    states["deepspeed_estimator"] = llvm::json::Object{
        {"bytes", ds->gpuBytes},
        {"function", ds->function},
        {"formula", ds->formula},
        {"zcc_over_deepspeed", ds->gpuBytes > 0 ? (double)modelStates / ds->gpuBytes : 0.0}};
  } else {
    os << "    DeepSpeed's estimator: none for stage 0 (its estimators cover ZeRO stages 1-3)\n";
  }
  report["model_states"] = std::move(states);
  if (hostOptimizer + nvmeOptimizer + hostParams + nvmeParams > 0) {
    // Offload: the moments (the float32 masters beside working copies, and
    // stage-3 parameter shards) are on the host or NVMe; the device keeps
    // the rest of the formula.
    bool mastersOff = working && (stage == 1 || stage == 2) && hostParams > 0;
    bool paramsOff = !mastersOff && hostParams + nvmeParams > 0;
    std::string where = nvmeOptimizer > 0 ? "on NVMe: the moments" : "on the host: the moments";
    if (mastersOff)
      where += nvmeOptimizer > 0 ? "; on the host: the master shards" : " and master shards";
    if (paramsOff)
      where += (nvmeParams > 0) == (nvmeOptimizer > 0) ? " and parameter shards"
               : nvmeParams > 0                        ? "; on NVMe: the parameter shards"
                                                       : "; on the host: the parameter shards";
    double onDevice = mastersOff ? formula(2, gradBytes, 0)
                                 : formula(paramsOff ? 0 : 4, gradBytes, 0) +
                                       (working && stage == 0 ? 2 * psi : 0);
    os << llvm::format(
        "    zcc formula, offloaded %14.0f B  (on the device: %s; %s, %0.f B)\n", onDevice,
        mastersOff  ? "16-bit parameters and gradients"
        : paramsOff ? "gradient shards"
                    : "parameters and gradients",
        where.c_str(), mastersOff ? formula(0, 0, 12) : formula(paramsOff ? 4 : 0, 0, 8));
  }

  // Communication per rank and step, as ring collectives send it: all-reduce
  // 2(N-1)/N of the buffer, reduce-scatter and all-gather (N-1)/N of the full
  // buffer. Micro-step collectives run once per accumulation step.
  int64_t accum = accumSteps(module);
  TypeMap typeOf;
  for (auto buffer : module.getOps<zcc::zrt::BufferOp>())
    typeOf[buffer.getSymNameAttr()] = cast<RankedTensorType>(buffer.getType());
  double sent[4] = {0, 0, 0, 0}; // all-reduce, reduce-scatter, all-gather, all-to-all
  double spans[3] = {0, 0, 0};   // every rank, inside a mesh group, across the groups
  int64_t calls[4] = {0, 0, 0, 0};
  Ranks ranks(module);
  double flops = 0;
  RoutedShare routed = routedShares(module, typeOf);
  for (auto program : module.getOps<zcc::zrt::ProgramOp>()) {
    StringRef name = program.getSymName();
    if (name == "eval" || name == "refresh")
      continue;
    double times = name == "micro_step" ? accum : 1;
    for (Operation &op : program.getBody().front()) {
      if (auto c = dyn_cast<zcc::zrt::CollectiveOp>(op)) {
        int k;
        double hops, bytes = ringBytes(c, typeOf, ranks, k, hops);
        if (k < 0 || world == 1)
          continue;
        sent[k] += times * bytes;
        spans[c.getGroup()] += times * bytes;
        calls[k] += (int64_t)times;
        continue;
      }
      if (auto kernel = dyn_cast<zcc::zrt::KernelOp>(op); kernel && name == "micro_step")
        flops += times * matmulFlops(kernel, typeOf, &routed);
    }
  }
  double total = sent[0] + sent[1] + sent[2] + sent[3];
  os << llvm::format("  communication per step %16.0f B  sent per rank (ring): all-reduce %.0f B "
                     "(%lld calls), reduce-scatter %.0f B (%lld), all-gather %.0f B (%lld)",
                     total, sent[0], (long long)calls[0], sent[1], (long long)calls[1], sent[2],
                     (long long)calls[2]);
  if (calls[3])
    os << llvm::format(", all-to-all %.0f B (%lld: qgZ's quantized gradients)", sent[3],
                       (long long)calls[3]);
  os << "\n";
  if (ranks.groupSize > 0) {
    auto partition = zcc::zero::attrs(module).getPartitionAttrHelper().getAttr(module);
    bool mics = partition && partition.getStateShards() < world;
    os << llvm::format("    by span: every rank %.0f B, inside a group of %lld %.0f B, across "
                       "the %lld groups %.0f B (%s)\n",
                       spans[0], (long long)ranks.groupSize, spans[1],
                       (long long)(world / ranks.groupSize), spans[2],
                       mics ? "MiCS / HSDP: the state sharded in a group, replicated across"
                            : "hpZ: the backward gathers inside a group");
  }
  // The paper: stages 0-2 move 2 Psi elements per step (reduce-scatter +
  // all-gather, or all-reduce), stage 3 3 Psi (a second all-gather of the
  // parameters in the backward); in the plan's comm type (float32 unless
  // --comm-dtype), times (N-1)/N for a ring.
  Type commType = Float32Type::get(module.getContext());
  if (auto partition = zcc::zero::attrs(module).getPartitionAttrHelper().getAttr(module))
    commType = partition.getCommType();
  int64_t commBytes = commType.getIntOrFloatBitWidth() / 8;
  const char *commName = commType.isF32() ? "float32" : commType.isBF16() ? "bfloat16" : "float16";
  double paperComm = (stage == 3 ? 3 : 2) * psi * commBytes * (n - 1) / n;
  if (stage == 3) {
    // zcc gathers a partitioned bucket again in the backward only if the
    // backward reads it (not embeddings read by a gather, first layers whose
    // input needs no gradient, biases): the paper's third Psi counts them all.
    int64_t skipped = 0;
    if (auto list = zcc::zero::attrs(module).getBucketsAttrHelper().getAttr(module))
      for (auto d : list.getAsRange<zcc::zero::BucketAttr>())
        if (d.getParamSharded() && !d.getCopy() && !d.getBackwardGather())
          skipped += d.getSize();
    os << llvm::format("    backward all-gathers skipped: %lld elements (%.0f B): buckets the "
                       "backward does not read\n",
                       (long long)skipped, (double)skipped * commBytes * (n - 1) / n);
  }
  os << llvm::format("    ZeRO paper, stage %lld    %14.0f B  (%s Psi %s elements x (N-1)/N; "
                     "per optimizer step, without gradient accumulation)\n",
                     (long long)stage, paperComm, stage == 3 ? "3" : "2", commName);
  os << llvm::format("  matmul FLOPs per step %17.4g     forward + backward, this rank's "
                     "micro-batches; 6 x Psi x tokens would be %.4g\n",
                     flops, 6.0 * psi * (double)tokensPerRankStep(module, accum));
  report["communication"] = llvm::json::Object{{"bytes_per_step", total},   {"all_reduce", sent[0]},
                                               {"reduce_scatter", sent[1]}, {"all_gather", sent[2]},
                                               {"all_to_all", sent[3]},     {"paper", paperComm}};
  report["matmul_flops_per_step"] = flops;
  if (scaling)
    printScaling(module, os, *scaling, report);
  return finish();
}
