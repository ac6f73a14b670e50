//===- Trace.cpp - zrun --trace: the step as a Chrome trace ---------------===//
#include "exec/Trace.h"

#include "exec/Profile.h"
#include "observe/MemoryMap.h" // matmulFlops
#include "observe/Pages.h"
#include "plan/PlanLoader.h"
#include "support/DType.h"
#include "support/Files.h"
#include "support/JsonDepth.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

using namespace zrt;
using json = nlohmann::ordered_json;

namespace {

int64_t bufferBytes(const plan::Plan &plan, int index) {
  TensorRef t = describeBuffer(plan.buffers(index));
  return t.numel() * (int64_t)dtypeSize(t.dtype);
}

/// The args of an instruction's slice: where it came from and what it moves.
json instructionArgs(const plan::Plan &plan, const plan::Program &program, int index) {
  const plan::Instruction &inst = program.instructions(index);
  std::string what, where;
  describeInstruction(plan, inst, what, where);
  json args = {{"program", program.name()}, {"index", index}};
  auto space = where.find(' ');
  std::string node = where.substr(0, space);
  if (!node.empty())
    args["node"] = node;
  if (space != std::string::npos && space + 1 < where.size())
    args["operands"] = where.substr(space + 1);
  if (inst.has_kernel()) {
    int64_t bytes = 0;
    for (int i : inst.kernel().inputs())
      bytes += bufferBytes(plan, i);
    for (int o : inst.kernel().outputs())
      bytes += bufferBytes(plan, o);
    args["bytes"] = bytes;
    if (double flops = matmulFlops(plan, inst.kernel()))
      args["flops"] = flops;
  } else if (inst.has_collective()) {
    const plan::Collective &c = inst.collective();
    args["bucket"] = plan.buffers(c.output()).name();
    args["bytes_in"] = bufferBytes(plan, c.input());
    args["bytes_out"] = bufferBytes(plan, c.output());
    args["group"] = plan::Collective::Group_Name(c.group());
    args["async"] = c.async();
  } else if (inst.has_copy()) {
    args["bytes"] = bufferBytes(plan, inst.copy().source());
    args["from"] = plan.buffers(inst.copy().source()).name();
    args["to"] = plan.buffers(inst.copy().target()).name();
  } else if (inst.has_wait()) {
    args["for"] = plan.buffers(inst.wait().output()).name();
  }
  return args;
}

double rounded(double us) { return std::round(us * 1000) / 1000; } // nanoseconds

const char *kTrackNames[] = {"steps", "compute", "communication", "copy"};

} // namespace

std::string zrt::traceJson(const plan::Plan &plan, const std::vector<RankTrace> &ranks,
                           const std::string &backend, const std::string &planPath) {
  double origin = INFINITY;
  for (const RankTrace &r : ranks)
    for (const auto &s : r.slices)
      origin = std::min(origin, s.startUs);
  json events = json::array();
  // An instruction's args once per (program, index), shared by its slices.
  std::map<std::pair<const plan::Program *, int>, json> argsOf;
  for (const RankTrace &r : ranks) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", r.rank},
                      {"args", {{"name", "rank " + std::to_string(r.rank)}}}});
    events.push_back({{"name", "process_sort_index"},
                      {"ph", "M"},
                      {"pid", r.rank},
                      {"args", {{"sort_index", r.rank}}}});
    for (int tid = 0; tid < 4; ++tid) {
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", r.rank},
                        {"tid", tid},
                        {"args", {{"name", kTrackNames[tid]}}}});
      events.push_back({{"name", "thread_sort_index"},
                        {"ph", "M"},
                        {"pid", r.rank},
                        {"tid", tid},
                        {"args", {{"sort_index", tid}}}});
    }
    std::vector<ExecutorBase::TraceSlice> slices = r.slices;
    std::stable_sort(slices.begin(), slices.end(),
                     [](const auto &a, const auto &b) { return a.startUs < b.startUs; });
    // The steps and the program runs inside them (a run starts where the
    // compute track's instruction index goes back or the program changes).
    struct Span {
      std::string name;
      double start, end;
      int64_t step;
    };
    std::vector<Span> spans;
    std::map<int64_t, Span> steps;
    const plan::Program *program = nullptr;
    int last = -1;
    for (const auto &s : slices) {
      double end = s.startUs + s.durUs;
      auto [it, fresh] =
          steps.try_emplace(s.step, Span{"step " + std::to_string(s.step), s.startUs, end, s.step});
      it->second.start = std::min(it->second.start, s.startUs);
      it->second.end = std::max(it->second.end, end);
      if (s.track != ExecutorBase::Track::Compute)
        continue;
      if (s.program != program || s.index <= last || spans.empty() || spans.back().step != s.step)
        spans.push_back({s.program->name(), s.startUs, end, s.step});
      spans.back().end = std::max(spans.back().end, end);
      program = s.program;
      last = s.index;
    }
    auto span = [&](const Span &sp, const char *cat) {
      events.push_back({{"name", sp.name},
                        {"cat", cat},
                        {"ph", "X"},
                        {"pid", r.rank},
                        {"tid", 0},
                        {"ts", rounded(sp.start - origin)},
                        {"dur", rounded(sp.end - sp.start)},
                        {"args", {{"step", sp.step}}}});
    };
    for (const auto &[step, sp] : steps)
      span(sp, "step");
    for (const Span &sp : spans)
      span(sp, "program");
    for (const auto &s : slices) {
      const plan::Instruction &inst = s.program->instructions(s.index);
      std::string what, where;
      describeInstruction(plan, inst, what, where);
      const char *cat = inst.has_kernel()       ? "kernel"
                        : inst.has_collective() ? "collective"
                        : inst.has_copy()       ? "copy"
                                                : "wait";
      auto [args, fresh] = argsOf.try_emplace({s.program, s.index});
      if (fresh)
        args->second = instructionArgs(plan, *s.program, s.index);
      json a = args->second;
      a["step"] = s.step;
      events.push_back({{"name", what},
                        {"cat", cat},
                        {"ph", "X"},
                        {"pid", r.rank},
                        {"tid", 1 + (int)s.track},
                        {"ts", rounded(s.startUs - origin)},
                        {"dur", rounded(s.durUs)},
                        {"args", std::move(a)}});
    }
  }
  json trace = {{"traceEvents", std::move(events)},
                {"displayTimeUnit", "ms"},
                {"otherData",
                 {{"producer", "zrun --trace"},
                  {"plan", planPath},
                  {"backend", backend},
                  {"world_size", plan.world_size()},
                  {"zero_stage", plan.zero_stage()}}}};
  return trace.dump(-1, ' ', false, json::error_handler_t::replace);
}

Status zrt::writeTrace(const std::string &path, const plan::Plan &plan,
                       const std::vector<RankTrace> &ranks, const std::string &backend,
                       const std::string &planPath) {
  std::string text = traceJson(plan, ranks, backend, planPath);
  if (Status s = writeFileAtomically(path, text.data(), text.size()); !s)
    return errorf("--trace ", path, ": ", s.message());
  return Status::ok();
}

Status zrt::writeTracePage(const std::vector<std::string> &traces, const std::string &out,
                           size_t &slices) {
  if (traces.empty())
    return errorf("trace-page: no trace given (zrun trace-page TRACE.json... -o PAGE.html)");
  ZRT_RETURN_IF_ERROR(checkOutputPath("-o", out, traces));
  json events = json::array(), sources = json::array(), other = json::object();
  std::map<int64_t, std::string> pidFile; // a process (rank) comes from one file
  slices = 0;
  for (const std::string &path : traces) {
    std::string text;
    if (Status s = readRegularFile(path, text); !s)
      return errorf("trace-page: ", s.message());
    if (std::string deep = jsonDepthError(text); !deep.empty())
      return errorf("trace-page: ", path, ": ", deep,
                    "; expected a Chrome trace (zrun train --trace FILE.json)");
    json trace = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (trace.is_discarded())
      return errorf("trace-page: ", path,
                    ": not JSON; expected a Chrome trace (zrun train --trace FILE.json)");
    // The format's two forms: {"traceEvents": [...]} or the bare array.
    json *list = trace.is_array()                                     ? &trace
                 : trace.is_object() && trace.contains("traceEvents") ? &trace["traceEvents"]
                                                                      : nullptr;
    if (!list || !list->is_array())
      return errorf("trace-page: ", path,
                    ": no traceEvents array; expected a Chrome trace (zrun train --trace "
                    "FILE.json)");
    if (trace.is_object() && trace.contains("otherData") && other.empty())
      other = trace["otherData"];
    std::set<int64_t> pidsHere;
    for (size_t i = 0; i < list->size(); ++i) {
      json &e = (*list)[i];
      auto where = [&] { return path + ": traceEvents[" + std::to_string(i) + "]"; };
      if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string())
        return errorf("trace-page: ", where(), ": not an event (an object with a 'ph' string)");
      const std::string ph = e["ph"];
      if (ph != "X" && ph != "M")
        continue; // instant, counter and flow events are not drawn
      if (!e.contains("pid") || !e["pid"].is_number_integer())
        return errorf("trace-page: ", where(), ": '", ph, "' event without an integer pid");
      int64_t pid = e["pid"];
      pidsHere.insert(pid);
      if (ph == "X") {
        if (!e.contains("ts") || !e["ts"].is_number() || !e.contains("dur") ||
            !e["dur"].is_number() || e["dur"].get<double>() < 0 || !e.contains("name") ||
            !e["name"].is_string())
          return errorf("trace-page: ", where(),
                        ": a complete event ('ph': 'X') needs a name, a numeric ts and a "
                        "non-negative dur");
        if (!e.contains("tid"))
          e["tid"] = 0;
        ++slices;
      }
      events.push_back(std::move(e));
    }
    for (int64_t pid : pidsHere) {
      auto [it, fresh] = pidFile.try_emplace(pid, path);
      if (!fresh)
        return errorf("trace-page: ", it->second, " and ", path, " both hold process ", pid,
                      " (rank ", pid,
                      "); give the files of one run (a launched job's NAME.json and "
                      "NAME.rank<r>.json)");
    }
    sources.push_back(path);
  }
  if (slices == 0)
    return errorf("trace-page: ", traces.front(),
                  ": no complete events ('ph': 'X') to draw; was the trace written by zrun "
                  "train --trace?");
  json data = {{"sources", std::move(sources)},
               {"otherData", std::move(other)},
               {"traceEvents", std::move(events)}};
  std::string html = renderPage(PageKind::Trace, "zrun trace: " + traces.front(),
                                data.dump(-1, ' ', false, json::error_handler_t::replace));
  if (Status s = writeFileAtomically(out, html.data(), html.size()); !s)
    return errorf("-o ", out, ": ", s.message());
  return Status::ok();
}

std::string zrt::rankTracePath(const std::string &path, int rank) {
  if (rank == 0 || path.empty()) // no --trace: no rank writes one
    return path;
  std::string stem = path;
  if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".json") == 0)
    stem.resize(stem.size() - 5);
  return stem + ".rank" + std::to_string(rank) + ".json";
}
