//===- AutoPlan.cpp - the plan that fits a memory budget ------------------===//
#include "zcc/Pipelines/AutoPlan.h"

#include "support/ByteSize.h"
#include "zero/ZeroOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <vector>

using namespace mlir;

namespace {
/// "offload_optimizer cpu, offload_param cpu" for the stage-3 candidates
/// (cpu+param, nvme+param: the moments on the host or NVMe, the parameter
/// shards on the host; nvme+nvmeparam: both on NVMe).
std::string offloadLabel(const std::string &offload) {
  return offload == "cpu+param"        ? std::string("cpu, offload_param cpu")
         : offload == "nvme+param"     ? std::string("nvme, offload_param cpu")
         : offload == "nvme+nvmeparam" ? std::string("nvme, offload_param nvme")
                                       : offload;
}

std::string describe(const zcc::AutoCandidate &c) {
  return "stage " + std::to_string(c.stage) + ", recompute " + c.recompute +
         ", offload_optimizer " + offloadLabel(c.offload);
}
} // namespace

FailureOr<OwningOpRef<ModuleOp>> zcc::chooseAutoPlan(ModuleOp imported, const AutoPlanRequest &r,
                                                     CompileCandidate compile, PlannedPeak peak,
                                                     PlannedPeak hostPeak, llvm::raw_ostream &log) {
  // Estimated step time, relative to the plain plan: recompute selective
  // ~5% and layer ~33% more compute; offloading the optimizer (stages 1-3)
  // ~25% (PCIe copies and a CPU AdamW where the GPU would otherwise wait),
  // and stage 3's parameter shards too ~35%; stage 3 ~10% more
  // communication than stages 0-2. The optimizer state on NVMe (only with
  // --nvme-path) ~60%: the moments cross the disk twice a step; the
  // parameter shards too ~90% (read for every gather).
  std::vector<int64_t> stages = {r.stage};
  if (!r.stageFixed && r.worldSize > 1)
    stages = {0, 1, 2, 3};
  std::vector<std::pair<std::string, double>> policies = {
      {"none", 1.0}, {"selective", 1.05}, {"layer", 1.33}};
  if (r.recomputeFixed)
    policies = {{r.recompute, 1.0}};
  std::vector<std::pair<std::string, double>> offloads = {
      {"none", 1.0}, {"cpu", 1.25}, {"cpu+param", 1.35}};
  if (r.nvme)
    offloads.insert(offloads.end(), {{"nvme", 1.6}, {"nvme+param", 1.7}, {"nvme+nvmeparam", 1.9}});
  // A fixed offload stays as given (nvme included: --auto searches only
  // the none/cpu levers itself).
  if (r.offloadFixed)
    offloads = {{r.offloadOptimizer == "none"
                     ? "none"
                     : r.offloadOptimizer + (r.offloadParam == "cpu"    ? "+param"
                                             : r.offloadParam == "nvme" ? "+nvmeparam"
                                                                        : ""),
                 1.0}};
  std::vector<AutoCandidate> candidates;
  for (int64_t stage : stages)
    for (auto &[policy, cost] : policies)
      for (auto &[offload, offloadCost] : offloads)
        if ((offload == "none" || stage >= 1) &&
            (!StringRef(offload).ends_with("param") || stage == 3))
          candidates.push_back({stage, policy, offload,
                                cost * offloadCost * (stage == 3 ? 1.1 : 1.0) + stage * 1e-3});
  llvm::stable_sort(candidates,
                    [](const AutoCandidate &a, const AutoCandidate &b) { return a.cost < b.cost; });

  AutoCandidate *smallest = nullptr;
  for (AutoCandidate &c : candidates) {
    OwningOpRef<ModuleOp> m = imported.clone();
    if (failed(compile(*m, c)))
      return failure();
    c.peak = peak(*m);
    c.hostPeak = hostPeak(*m);
    bool hostFits = !r.hostBudget || c.hostPeak <= r.hostBudget;
    if (hostFits && (!smallest || c.peak < smallest->peak))
      smallest = &c;
    bool fits = c.peak <= r.budget && hostFits;
    log << "zcc: --auto: " << describe(c) << ": " << zrt::showByteSize(c.peak);
    if (r.hostBudget)
      log << ", host " << zrt::showByteSize(c.hostPeak);
    log << (fits ? " fits" : " does not fit") << "\n";
    if (!fits)
      continue;
    log << "zcc: --auto: chose " << describe(c) << ": the fastest of " << candidates.size()
        << " candidates whose planned peak fits " << zrt::showByteSize(r.budget);
    if (r.hostBudget)
      log << " (host " << zrt::showByteSize(r.hostBudget) << ")";
    log << "\n";
    zcc::zero::attrs(*m).getAutoAttrHelper().setAttr(
        *m,
        Builder(m->getContext()).getStringAttr(describe(c) + ": the fastest candidate that fits"));
    return m;
  }
  if (!smallest) { // every candidate's host arena is over the host budget
    log << "zcc: error: --auto: no plan fits --host-memory-budget "
        << zrt::showByteSize(r.hostBudget) << " of pinned host memory"
        << (r.nvme ? ""
                   : "; give --nvme-path DIR so that --auto may keep the optimizer state "
                     "on NVMe, or raise the host budget")
        << "\n";
    return failure();
  }
  log << "zcc: error: --auto: no plan fits --memory-budget " << zrt::showByteSize(r.budget)
      << ": the smallest (" << describe(*smallest) << ") needs "
      << zrt::showByteSize(smallest->peak) << ", " << zrt::showByteSize(smallest->peak - r.budget)
      << " more; raise the budget, add ranks (--world-size), or lower --micro-batch"
      << (r.hostBudget && !r.nvme ? "; or give --nvme-path DIR so that --auto may keep the "
                                    "optimizer state on NVMe, off the host budget"
                                  : "")
      << "\n";
  return failure();
}
