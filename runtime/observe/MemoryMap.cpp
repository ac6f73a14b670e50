//===- MemoryMap.cpp - a plan's memory over the step ----------------------===//
#include "observe/MemoryMap.h"

#include "observe/Pages.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>

using namespace zrt;
using json = nlohmann::ordered_json;

namespace {

int64_t elementBytes(int dtype) {
  switch (dtype) {
  case plan::F64:
  case plan::I64:
    return 8;
  case plan::F32:
  case plan::I32:
    return 4;
  case plan::F16:
  case plan::BF16:
    return 2;
  default:
    return 1; // BOOL, I8
  }
}

int64_t bytesOf(const plan::Buffer &b) {
  int64_t n = 1;
  for (int64_t d : b.shape())
    n *= d;
  return n * elementBytes(b.dtype());
}

const char *arenaName(int arena) {
  switch (arena) {
  case plan::DEVICE:
    return "device";
  case plan::STATE:
    return "state";
  case plan::CONSTANT:
    return "constant";
  case plan::INPUT:
    return "input";
  default:
    return "host";
  }
}

/// The kind a whole-step (state) buffer is drawn as.
std::string stateKind(const plan::Buffer &b) {
  const std::string &role = b.role();
  if (role == "grad")
    return "gradients";
  if (role == "adam_m" || role == "adam_v" || role == "step")
    return "optimizer state";
  if (role == "param_copy")
    return "parameter copies";
  if (b.trainable() || role == "param" || role.empty())
    return b.trainable() || role == "param" ? "parameters" : "frozen buffers";
  return "frozen buffers";
}

/// The operands of an instruction: (buffer, written).
std::vector<std::pair<int, bool>> operands(const plan::Instruction &inst) {
  std::vector<std::pair<int, bool>> out;
  if (inst.has_kernel()) {
    for (int i : inst.kernel().inputs())
      out.push_back({i, false});
    for (int o : inst.kernel().outputs())
      out.push_back({o, true});
  } else if (inst.has_collective()) {
    out.push_back({inst.collective().input(), false});
    out.push_back({inst.collective().output(), true});
  } else if (inst.has_copy()) {
    out.push_back({inst.copy().source(), false});
    out.push_back({inst.copy().target(), true});
  } else if (inst.has_wait()) {
    out.push_back({inst.wait().output(), false});
  }
  return out;
}

std::string opName(const plan::Instruction &inst) {
  if (inst.has_kernel())
    return inst.kernel().name();
  if (inst.has_collective()) {
    std::string k = plan::Collective::Kind_Name(inst.collective().kind());
    std::transform(k.begin(), k.end(), k.begin(), ::tolower);
    return k;
  }
  return inst.has_copy() ? "copy" : "wait";
}

std::string location(const plan::Instruction &inst) {
  return inst.has_kernel()       ? inst.kernel().location()
         : inst.has_collective() ? inst.collective().location()
         : inst.has_copy()       ? inst.copy().location()
                                 : inst.wait().location();
}

/// The step's programs in the order one step runs them.
std::vector<const plan::Program *> stepPrograms(const plan::Plan &plan) {
  std::vector<const plan::Program *> out;
  for (const char *name : {"micro_step", "apply"})
    for (const plan::Program &p : plan.programs())
      if (p.name() == name)
        out.push_back(&p);
  if (out.empty()) // a plan that does not train: every program
    for (const plan::Program &p : plan.programs())
      out.push_back(&p);
  return out;
}

/// Bytes covered by the union of [begin, end) ranges.
int64_t unionBytes(std::vector<std::pair<int64_t, int64_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  int64_t total = 0, end = INT64_MIN;
  for (auto [b, e] : ranges) {
    b = std::max(b, end);
    if (e > b)
      total += e - b;
    end = std::max(end, e);
  }
  return total;
}

} // namespace

std::string zrt::memoryMapJson(const plan::Plan &plan, const std::string &source,
                               const std::vector<MeasuredMemory> &measured) {
  std::vector<const plan::Program *> programs = stepPrograms(plan);
  // Positions over the step: each program's instructions one after another.
  struct Use {
    int64_t first = -1, last = -1, writer = -1;
    std::set<size_t> programs;
  };
  std::map<int, Use> uses; // device and host buffers
  std::vector<std::pair<const plan::Program *, int>> at;
  std::vector<std::pair<int64_t, int64_t>> programRange;
  for (size_t p = 0; p < programs.size(); ++p) {
    int64_t begin = (int64_t)at.size();
    for (int i = 0; i < programs[p]->instructions_size(); ++i) {
      int64_t pos = (int64_t)at.size();
      at.push_back({programs[p], i});
      for (auto [b, written] : operands(programs[p]->instructions(i))) {
        int arena = plan.buffers(b).arena();
        if (arena != plan::DEVICE && arena != plan::HOST)
          continue;
        Use &u = uses[b];
        if (u.first < 0)
          u.first = pos;
        u.last = pos;
        if (written && u.writer < 0)
          u.writer = pos;
        u.programs.insert(p);
      }
    }
    programRange.push_back({begin, (int64_t)at.size() - 1});
  }
  // A buffer several programs use holds its bytes between them: from its
  // first use to the end of its first program, and from the start of its
  // last program to its last use.
  for (auto &[b, u] : uses)
    if (u.programs.size() > 1) {
      u.first = std::min(u.first, programRange[*u.programs.begin()].first);
      u.last = std::max(u.last, programRange[*u.programs.rbegin()].second);
    }
  // Device-buffer kinds: what produced it.
  std::map<int, std::string> kindOf;
  for (const plan::Program *p : programs)
    for (const plan::Instruction &inst : p->instructions())
      if (inst.has_collective()) {
        const plan::Collective &c = inst.collective();
        if (c.kind() == plan::Collective::ALL_GATHER)
          kindOf[c.output()] = "gathered parameters";
        else if (c.kind() != plan::Collective::LOCAL_SHARD) {
          kindOf.emplace(c.input(), "communication buffers");
          kindOf.emplace(c.output(), "communication buffers");
        }
      }
  auto kind = [&](int b) -> std::string {
    const plan::Buffer &buf = plan.buffers(b);
    if (buf.arena() == plan::HOST) {
      if (buf.role() == "param")
        return "offloaded parameters";
      if (buf.role() == "grad")
        return "offloaded gradients";
      if (!buf.role().empty())
        return "offloaded optimizer state";
      return "host temporaries";
    }
    auto it = kindOf.find(b);
    if (it != kindOf.end())
      return it->second;
    if (buf.role() == "grad")
      return "gradients";
    return "activations";
  };
  auto nodeOf = [&](const Use &u) {
    int64_t pos = u.writer >= 0 ? u.writer : u.first;
    return location(at[pos].first->instructions(at[pos].second));
  };

  json buffers = json::array();
  std::map<std::string, int64_t> statics; // whole-step bytes by kind
  for (int b = 0; b < plan.buffers_size(); ++b) {
    const plan::Buffer &buf = plan.buffers(b);
    int64_t bytes = bytesOf(buf);
    json entry = {{"name", buf.name()},
                  {"arena", arenaName(buf.arena())},
                  {"offset", buf.offset()},
                  {"bytes", bytes}};
    if (buf.view())
      entry["view"] = true;
    if (buf.arena() == plan::STATE) {
      entry["kind"] = stateKind(buf);
      if (!buf.view())
        statics[entry["kind"]] += bytes;
    } else if (buf.arena() == plan::CONSTANT || buf.arena() == plan::INPUT) {
      entry["kind"] = buf.arena() == plan::CONSTANT ? "constants" : "inputs";
    } else {
      auto it = uses.find(b);
      if (it == uses.end())
        continue; // not used by a step program (eval's)
      entry["kind"] = kind(b);
      entry["first"] = it->second.first;
      entry["last"] = it->second.last;
      entry["node"] = nodeOf(it->second);
    }
    buffers.push_back(std::move(entry));
  }
  // The state arena is whole-step by kind, its padding (bucket alignment,
  // views inside buckets counted once) as the difference to its size.
  int64_t stateSum = 0;
  for (auto &[k, v] : statics)
    stateSum += v;
  // Buckets hold their members: a member inside another state buffer's
  // bytes is not counted again.
  if (stateSum > plan.state_arena_bytes()) {
    statics.clear();
    std::vector<std::tuple<int64_t, int64_t, std::string>> ranges;
    for (const plan::Buffer &buf : plan.buffers())
      if (buf.arena() == plan::STATE && !buf.view())
        ranges.push_back({buf.offset(), buf.offset() + bytesOf(buf), stateKind(buf)});
    std::sort(ranges.begin(), ranges.end(), [](const auto &a, const auto &b) {
      return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) < std::get<0>(b)
                                              : std::get<1>(a) > std::get<1>(b);
    });
    int64_t end = 0;
    for (auto &[b, e, k] : ranges) // outermost ranges only
      if (b >= end) {
        statics[k] += e - b;
        end = e;
      }
    stateSum = 0;
    for (auto &[k, v] : statics)
      stateSum += v;
  }
  if (plan.state_arena_bytes() > stateSum)
    statics["state padding"] += plan.state_arena_bytes() - stateSum;
  if (plan.constant_arena_bytes())
    statics["constants"] = plan.constant_arena_bytes();
  if (plan.input_arena_bytes())
    statics["inputs"] = plan.input_arena_bytes();
  int64_t staticBytes =
      plan.state_arena_bytes() + plan.constant_arena_bytes() + plan.input_arena_bytes();

  // The device arena at each instruction: the union of the live buffers'
  // bytes, by kind, and the highest byte in use (the high-water mark).
  std::vector<std::vector<int>> startAt(at.size()), endAt(at.size());
  for (auto &[b, u] : uses)
    if (plan.buffers(b).arena() == plan::DEVICE) {
      startAt[u.first].push_back(b);
      endAt[u.last].push_back(b);
    }
  std::set<int> live;
  json timeline = json::array();
  int64_t highWater = 0, peakPos = 0, hostHighWater = 0;
  std::vector<int> livePeak;
  for (size_t pos = 0; pos < at.size(); ++pos) {
    for (int b : startAt[pos])
      live.insert(b);
    std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> byKind;
    std::vector<std::pair<int64_t, int64_t>> all;
    int64_t top = 0;
    for (int b : live) {
      const plan::Buffer &buf = plan.buffers(b);
      std::pair<int64_t, int64_t> r{buf.offset(), buf.offset() + bytesOf(buf)};
      byKind[kind(b)].push_back(r);
      all.push_back(r);
      top = std::max(top, r.second);
    }
    const plan::Instruction &inst = at[pos].first->instructions(at[pos].second);
    json row = {{"program", at[pos].first->name()}, {"index", at[pos].second}, {"op", opName(inst)},
                {"node", location(inst)},           {"live", unionBytes(all)}, {"high_water", top}};
    json kinds = json::object();
    for (auto &[k, ranges] : byKind)
      kinds[k] = unionBytes(ranges);
    row["by_kind"] = std::move(kinds);
    timeline.push_back(std::move(row));
    if (top > highWater) {
      highWater = top;
      peakPos = (int64_t)pos;
      livePeak.assign(live.begin(), live.end());
    }
    for (int b : endAt[pos])
      live.erase(b);
  }
  for (auto &[b, u] : uses)
    if (plan.buffers(b).arena() == plan::HOST)
      hostHighWater = std::max(hostHighWater, plan.buffers(b).offset() + bytesOf(plan.buffers(b)));
  std::sort(livePeak.begin(), livePeak.end(),
            [&](int a, int b) { return bytesOf(plan.buffers(a)) > bytesOf(plan.buffers(b)); });
  json atPeak = json::array();
  for (int b : livePeak)
    atPeak.push_back({{"name", plan.buffers(b).name()},
                      {"kind", kind(b)},
                      {"bytes", bytesOf(plan.buffers(b))},
                      {"offset", plan.buffers(b).offset()},
                      {"node", nodeOf(uses[b])}});
  json programsJson = json::array();
  for (size_t p = 0; p < programs.size(); ++p)
    programsJson.push_back({{"name", programs[p]->name()},
                            {"first", programRange[p].first},
                            {"last", programRange[p].second}});
  json staticJson = json::object();
  for (auto &[k, v] : statics)
    staticJson[k] = v;
  json measuredJson = json::array();
  for (const MeasuredMemory &m : measured)
    measuredJson.push_back({{"label", m.label}, {"bytes", m.bytes}});
  // The planner allocates the high-water mark rounded up to its alignment
  // (zcc's kArenaAlignment, 64 bytes).
  const int64_t deviceAllocated = (highWater + 63) / 64 * 64;
  int64_t peakBytes = staticBytes + deviceAllocated;
  json out = {
      {"source", source},
      {"model", plan.source()},
      {"world_size", plan.world_size()},
      {"zero_stage", plan.zero_stage()},
      {"target", plan.target().empty() ? "cpu" : plan.target()},
      {"arenas",
       {{"device", plan.device_arena_bytes()},
        {"state", plan.state_arena_bytes()},
        {"constant", plan.constant_arena_bytes()},
        {"input", plan.input_arena_bytes()},
        {"host", plan.host_arena_bytes()}}},
      {"static", std::move(staticJson)},
      {"static_bytes", staticBytes},
      {"programs", std::move(programsJson)},
      {"timeline", std::move(timeline)},
      {"peak",
       {{"position", peakPos},
        {"program", at.empty() ? "" : at[peakPos].first->name()},
        {"index", at.empty() ? 0 : at[peakPos].second},
        {"device_high_water", highWater},
        {"device_allocated", deviceAllocated},
        {"live", std::move(atPeak)}}},
      {"peak_bytes", peakBytes},
      {"host_high_water", hostHighWater},
      {"buffers", std::move(buffers)},
      {"measured", std::move(measuredJson)},
  };
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string zrt::memoryPageHtml(const plan::Plan &plan, const std::string &source,
                                const std::vector<MeasuredMemory> &measured) {
  return renderPage(PageKind::Memory, "zcc memory: " + source,
                    memoryMapJson(plan, source, measured));
}

double zrt::matmulFlops(const plan::Plan &plan, const plan::Kernel &k) {
  const std::string &name = k.name();
  if (!(name == "matmul" || name == "matmul_bias" || name == "matmul_add" ||
        name == "matmul_bgrad" || name == "matmul_bias_gelu" || name == "matmul_gelu_grad") ||
      k.inputs_size() < 1 || k.outputs_size() < 1)
    return 0;
  const plan::Buffer &lhs = plan.buffers(k.inputs(0));
  if (lhs.shape_size() < 2)
    return 0;
  bool transposeLhs = name == "matmul_bgrad" || (k.ints_size() > 0 && k.ints(0));
  int64_t contraction = lhs.shape(lhs.shape_size() - (transposeLhs ? 2 : 1));
  int64_t out = 1;
  for (int64_t d : plan.buffers(k.outputs(0)).shape())
    out *= d;
  return 2.0 * (double)out * (double)contraction;
}

double zrt::stepMatmulFlops(const plan::Plan &plan) {
  double flops = 0;
  for (const plan::Program &p : plan.programs())
    if (p.name() == "micro_step")
      for (const plan::Instruction &inst : p.instructions())
        if (inst.has_kernel())
          flops += matmulFlops(plan, inst.kernel());
  int64_t accum = plan.has_training() ? plan.training().grad_accum_steps() : 1;
  return flops * (double)std::max<int64_t>(accum, 1);
}
