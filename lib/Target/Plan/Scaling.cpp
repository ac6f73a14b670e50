//===- Scaling.cpp - the scaling model: a plan's step on W GPUs -----------===//
#include "PlanStats.h"

#include "zcc/Analysis/MemoryPlan.h"
#include "zcc/Target/Plan.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <algorithm>

using namespace mlir;
using namespace zcc;
using namespace zcc::plan_stats;

std::string zcc::parseLink(StringRef spec, ScalingModel &model) {
  SmallVector<StringRef> parts;
  spec.split(parts, ',', -1, /*KeepEmpty=*/false);
  if (parts.empty())
    return "expected nvlink=BW,ib=BW[,hop=LATENCY], e.g. nvlink=370GB/s,ib=50GB/s,hop=5us";
  for (StringRef part : parts) {
    auto [key, value] = part.trim().split('=');
    double scale = 0;
    StringRef number = value;
    for (auto [unit, factor] :
         {std::pair<StringRef, double>{"GB/s", 1e9}, {"TB/s", 1e12}, {"us", 1e-6}, {"ms", 1e-3}})
      if (number.consume_back(unit)) {
        scale = factor;
        break;
      }
    double v = 0;
    bool isTime = key == "hop", isBandwidth = key == "nvlink" || key == "ib";
    if (!isTime && !isBandwidth)
      return "unknown link '" + key.str() + "' (nvlink, ib or hop)";
    if (scale == 0 || number.trim().getAsDouble(v) || !(v >= 0) || (isBandwidth && v == 0) ||
        (isTime != (scale < 1)))
      return "'" + part.str() + "': expected " +
             (isTime ? "a latency such as hop=5us"
                     : "a bandwidth such as " + key.str() + "=50GB/s");
    (key == "nvlink" ? model.nvlinkBytesPerSecond
     : key == "ib"   ? model.ibBytesPerSecond
                     : model.hopSeconds) = v * scale;
  }
  return "";
}

/// The step simulated over the plan's programs as the executor runs them:
/// compute on one stream, collectives in issue order on another (async
/// ones), a wait holding compute until its collective is done, every
/// collective done at the program's end.
ScalingEstimate zcc::estimateScaling(ModuleOp module, const ScalingModel &model) {
  ScalingEstimate e;
  if (auto partition = zero::attrs(module).getPartitionAttrHelper().getAttr(module))
    e.world = partition.getWorldSize();
  TypeMap typeOf;
  for (auto buffer : module.getOps<zcc::zrt::BufferOp>())
    typeOf[buffer.getSymNameAttr()] = cast<RankedTensorType>(buffer.getType());
  int64_t accum = accumSteps(module);
  Ranks ranks(module);
  RoutedShare routed = routedShares(module, typeOf);
  e.nodes = (e.world + model.gpusPerNode - 1) / model.gpusPerNode;
  e.bandwidth = e.nodes > 1 ? model.ibBytesPerSecond : model.nvlinkBytesPerSecond;
  // A mesh group's collectives stay inside a node when the groups tile the
  // nodes (hpZ, MiCS with a node's ranks or fewer); the others cross nodes
  // once there are several.
  bool groupInNode = ranks.groupSize > 0 && model.gpusPerNode % ranks.groupSize == 0;
  e.groupBandwidth = ranks.groupSize == 0 ? 0
                     : groupInNode        ? model.nvlinkBytesPerSecond
                                          : e.bandwidth;
  for (auto program : module.getOps<zcc::zrt::ProgramOp>()) {
    // (eval is not a training step; refresh runs only after the state is
    // written from outside the programs: a start, a resume.)
    if (program.getSymName() == "eval" || program.getSymName() == "refresh")
      continue;
    double times = program.getSymName() == "micro_step" ? accum : 1;
    double c = 0, m = 0, busy = 0, talk = 0;           // compute and communication clocks
    DenseMap<StringAttr, std::pair<double, int>> done; // when, and its kind
    // Compute held by a collective (a wait or a synchronous one, and the
    // program's end): the exposed time, charged to the collective awaited.
    auto hold = [&](double until, int kind) {
      if (until > c && kind >= 0)
        e.exposedByKind[kind] += times * (until - c);
      c = std::max(c, until);
    };
    int lastKind = -1;
    for (Operation &op : program.getBody().front()) {
      if (auto k = dyn_cast<zcc::zrt::KernelOp>(op)) {
        double t = matmulFlops(k, typeOf, &routed) / model.flopsPerSecond;
        c += t;
        busy += t;
      } else if (auto col = dyn_cast<zcc::zrt::CollectiveOp>(op)) {
        int kind;
        double hops, bytes = ringBytes(col, typeOf, ranks, kind, hops);
        double bandwidth = col.getGroup() == 1 ? e.groupBandwidth : e.bandwidth;
        double t = e.world > 1 && kind >= 0 ? hops * model.hopSeconds + bytes / bandwidth : 0;
        m = std::max(c, m) + t;
        talk += t;
        if (kind >= 0) {
          e.byKind[kind] += times * t;
          lastKind = kind;
        }
        done[col.getOutputAttr().getAttr()] = {m, kind};
        if (!col.getAsync())
          hold(m, kind);
      } else if (auto w = dyn_cast<zcc::zrt::WaitOp>(op)) {
        auto it = done.find(w.getOutputAttr().getAttr());
        if (it != done.end())
          hold(it->second.first, it->second.second);
      }
    }
    hold(m, lastKind); // the program ends when its collectives have
    e.step += times * c;
    e.compute += times * busy;
    e.communication += times * talk;
  }
  e.exposed = e.step - e.compute;
  return e;
}

/// The scaling model's lines of the report.
void zcc::plan_stats::printScaling(ModuleOp module, llvm::raw_ostream &os,
                                   const ScalingModel &model, llvm::json::Object &out) {
  ScalingEstimate e = estimateScaling(module, model);
  out["scaling_model"] = llvm::json::Object{{"step_ms", e.step * 1e3},
                                            {"compute_ms", e.compute * 1e3},
                                            {"exposed_ms", e.exposed * 1e3},
                                            {"communication_ms", e.communication * 1e3},
                                            {"world_size", e.world},
                                            {"nodes", e.nodes},
                                            {"gpus_per_node", model.gpusPerNode},
                                            {"bandwidth_bytes_per_s", e.bandwidth},
                                            {"hop_s", model.hopSeconds},
                                            {"flops_per_s", model.flopsPerSecond}};
  os << llvm::format("  scaling model   step %9.2f ms = compute %.2f ms + exposed "
                     "communication %.2f ms (of %.2f ms): compute is %.1f%% of the step\n",
                     e.step * 1e3, e.compute * 1e3, e.exposed * 1e3, e.communication * 1e3,
                     e.step > 0 ? 100 * e.compute / e.step : 100.0);
  os << llvm::format("    by collective (exposed of all): all-reduce %.2f of %.2f ms, "
                     "reduce-scatter %.2f of %.2f ms, all-gather %.2f of %.2f ms",
                     e.exposedByKind[0] * 1e3, e.byKind[0] * 1e3, e.exposedByKind[1] * 1e3,
                     e.byKind[1] * 1e3, e.exposedByKind[2] * 1e3, e.byKind[2] * 1e3);
  if (e.byKind[3] > 0)
    os << llvm::format(", all-to-all %.2f of %.2f ms", e.exposedByKind[3] * 1e3, e.byKind[3] * 1e3);
  os << "\n";
  os << llvm::format("    assumptions: W = %lld on %lld node%s of %lld GPUs; ring collectives at "
                     "%.4g GB/s a GPU (%s), %.4g us a hop; matmuls at %.4g TFLOP/s, the rest of "
                     "the step folded into that rate (zcc --link, --gpus-per-node, --flop-rate)\n",
                     (long long)e.world, (long long)e.nodes, e.nodes == 1 ? "" : "s",
                     (long long)model.gpusPerNode, e.bandwidth / 1e9,
                     e.nodes > 1 ? "the inter-node link" : "NVLink", model.hopSeconds * 1e6,
                     model.flopsPerSecond / 1e12);
  if (e.groupBandwidth > 0)
    os << llvm::format("    a mesh group's collectives at %.4g GB/s a GPU (%s)\n",
                       e.groupBandwidth / 1e9,
                       e.groupBandwidth == model.nvlinkBytesPerSecond && e.nodes > 1
                           ? "NVLink: the groups tile the nodes"
                       : e.nodes > 1 ? "the inter-node link: a group spans nodes"
                                     : "NVLink");
}
