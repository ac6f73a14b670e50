//===- Profile.cpp - where a step's time goes -----------------------------===//
#include "exec/Profile.h"

#include "plan/PlanLoader.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

using namespace zrt;

void zrt::describeInstruction(const plan::Plan &plan, const plan::Instruction &inst,
                              std::string &what, std::string &where) {
  auto shape = [&](int index) {
    std::string s;
    for (int64_t d : plan.buffers(index).shape())
      s += (s.empty() ? "" : "x") + std::to_string(d);
    return "[" + s + "]";
  };
  if (inst.has_kernel()) {
    what = inst.kernel().name();
    where = inst.kernel().location() + " ";
    for (int i : inst.kernel().inputs())
      where += shape(i);
    where += " -> ";
    for (int o : inst.kernel().outputs())
      where += shape(o);
  } else if (inst.has_collective()) {
    what = plan::Collective::Kind_Name(inst.collective().kind());
    std::transform(what.begin(), what.end(), what.begin(), ::tolower); // as zcc prints it
    where = inst.collective().location() + " " + shape(inst.collective().output());
  } else if (inst.has_copy()) {
    bool file = plan.buffers(inst.copy().source()).arena() == plan::NVME ||
                plan.buffers(inst.copy().target()).arena() == plan::NVME;
    what = file ? "nvme_copy" : "copy";
    where = inst.copy().location() + " " + shape(inst.copy().target());
  } else {
    // Only swap-file copies complete in the host or NVMe arenas (collectives
    // and async kernels write device memory).
    int arena = plan.buffers(inst.wait().output()).arena();
    what = arena == plan::HOST || arena == plan::NVME ? "nvme_wait" : "wait";
    where = inst.wait().location();
  }
}

void zrt::printProfile(const plan::Plan &plan, const ExecutorBase::Profile &profile,
                       int64_t steps) {
  std::map<std::string, std::pair<double, int64_t>> byKind, byShape;
  std::vector<std::pair<double, std::pair<std::string, int>>> byInstruction;
  double total = 0;
  for (const auto &[key, t] : profile) {
    const plan::Program *p = findProgram(plan, key.first);
    std::string what, where;
    describeInstruction(plan, p->instructions(key.second), what, where);
    byKind[what].first += t.ms;
    byKind[what].second += t.runs;
    // The same kind on the same shapes, summed over layers: where one
    // shape's GEMM or kernel is slow, it shows though no single call is on top.
    auto &shape = byShape[what + " " + where.substr(where.find(' ') + 1)];
    shape.first += t.ms;
    shape.second += t.runs;
    byInstruction.push_back({t.ms, key});
    total += t.ms;
  }
  double per = std::max<int64_t>(steps, 1);
  std::printf("profile: %.1f ms per step in %zu instructions (rank 0, steps after the first; "
              "timed on the compute stream)\n",
              total / per, profile.size());
  std::vector<std::pair<double, std::string>> kinds;
  for (const auto &[name, v] : byKind)
    kinds.push_back({v.first, name});
  std::sort(kinds.rbegin(), kinds.rend());
  std::printf("  %-22s %10s %7s %8s\n", "by kind", "ms/step", "share", "calls");
  for (const auto &[ms, name] : kinds)
    std::printf("  %-22s %10.3f %6.1f%% %8lld\n", name.c_str(), ms / per, 100 * ms / total,
                (long long)(byKind[name].second / per));
  // Communication the compute stream waits for: synchronous collectives run
  // on it, async ones (zero-schedule's starts) only stall it at their wait,
  // so the waits are the exposed part of the overlapped communication.
  double syncMs = 0, waitMs = 0, nvmeWaitMs = 0;
  int64_t async = 0, sync = 0, nvmeCopies = 0;
  for (const auto &[key, t] : profile) {
    const plan::Instruction &inst = findProgram(plan, key.first)->instructions(key.second);
    if (inst.has_collective() && inst.collective().kind() != plan::Collective::LOCAL_SHARD) {
      (inst.collective().async() ? async : sync) += t.runs;
      if (!inst.collective().async())
        syncMs += t.ms;
    } else if (inst.has_wait()) {
      std::string what, where;
      describeInstruction(plan, inst, what, where);
      (what == "nvme_wait" ? nvmeWaitMs : waitMs) += t.ms;
    } else if (inst.has_copy() && inst.copy().async()) {
      nvmeCopies += t.runs;
    }
  }
  if (nvmeCopies > 0)
    std::printf("  NVMe I/O exposed on the compute stream: %.3f ms/step waiting for %lld async "
                "swap-file copies\n",
                nvmeWaitMs / per, (long long)(nvmeCopies / per));
  if (async + sync > 0)
    std::printf("  communication exposed on the compute stream: %.3f ms/step (%.3f in %lld "
                "synchronous collectives, %.3f waiting for %lld async ones)\n",
                (syncMs + waitMs) / per, syncMs / per, (long long)(sync / per), waitMs / per,
                (long long)(async / per));
  std::vector<std::pair<double, std::string>> shapes;
  for (const auto &[name, v] : byShape)
    shapes.push_back({v.first, name});
  std::sort(shapes.rbegin(), shapes.rend());
  std::printf("  top shapes (ms/step, calls/step, kind operands -> results)\n");
  for (size_t i = 0; i < shapes.size() && i < 30; ++i)
    std::printf("  %10.3f %5lld  %s\n", shapes[i].first / per,
                (long long)(byShape[shapes[i].second].second / per), shapes[i].second.c_str());
  std::sort(byInstruction.rbegin(), byInstruction.rend());
  std::printf("  top instructions (ms/step, program:index kind location operands -> results)\n");
  for (size_t i = 0; i < byInstruction.size() && i < 25; ++i) {
    const auto &[ms, key] = byInstruction[i];
    std::string what, where;
    describeInstruction(plan, findProgram(plan, key.first)->instructions(key.second), what, where);
    std::printf("  %10.3f  %s:%d %s %s\n", ms / per, key.first.c_str(), key.second, what.c_str(),
                where.c_str());
  }
}
