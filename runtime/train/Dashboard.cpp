//===- Dashboard.cpp - zrun train --dashboard: a live HTML page -----------===//
#include "train/Dashboard.h"

#include "observe/Pages.h"
#include "support/Files.h"
#include "train/Metrics.h" // stepRecordJson

#include <nlohmann/json.hpp>

#include <cmath>

using namespace zrt;
using json = nlohmann::ordered_json;

Status Dashboard::open(const std::string &path, Run run) {
  path_ = path;
  run_ = std::move(run);
  records_.clear();
  failed_ = false;
  if (path_.empty())
    return Status::ok();
  return write("running", "");
}

void Dashboard::step(const StepRecord &r, int64_t peakBytes, double tflops, double mfu) {
  if (path_.empty())
    return;
  json rec = stepRecordJson(r, peakBytes); // the metrics file's fields
  if (tflops > 0)
    rec["tflops"] = tflops;
  if (mfu > 0)
    rec["mfu"] = mfu;
  json memory = json::array();
  if (run_.measure)
    for (const MeasuredMemory &m : run_.measure())
      memory.push_back({{"label", m.label}, {"bytes", m.bytes}});
  rec["memory"] = std::move(memory);
  records_.push_back(rec.dump(-1, ' ', false, json::error_handler_t::replace));
  auto now = std::chrono::steady_clock::now();
  if (records_.size() > 1 && now - lastWrite_ < std::chrono::seconds(2))
    return;
  // A failed write (a full disk) is reported when the run ends; training
  // goes on.
  if (Status s = write("running", ""); !s && !failed_) {
    failed_ = true;
    error_ = s.message();
  }
}

Status Dashboard::close(const std::string &state, const std::string &reason) {
  if (path_.empty())
    return Status::ok();
  Status s = write(state, reason);
  path_.clear();
  if (failed_)
    return errorf("--dashboard: ", error_);
  return s;
}

Status Dashboard::write(const std::string &state, const std::string &reason) {
  const plan::Plan *p = run_.planProto;
  json head = {{"plan", run_.plan},
               {"model", p ? p->source() : ""},
               {"world_size", p ? p->world_size() : 1},
               {"zero_stage", p ? p->zero_stage() : 0},
               {"backend", run_.backend},
               {"steps", run_.steps},
               {"matmul_flops_per_rank_step", run_.matmulFlops},
               {"peak_tflops", run_.peakTflops},
               {"state", state},
               {"reason", reason},
               {"refresh", kRefreshSeconds}};
  std::string text = head.dump(-1, ' ', false, json::error_handler_t::replace);
  text.pop_back(); // the closing brace: the records follow
  text += ",\"records\":[";
  for (size_t i = 0; i < records_.size(); ++i)
    text += (i ? "," : "") + records_[i];
  text += "]}";
  std::string html = renderPage(PageKind::Dashboard, "zrun: " + run_.plan, text,
                                state == "running" ? kRefreshSeconds : 0);
  lastWrite_ = std::chrono::steady_clock::now();
  if (Status s = writeFileAtomically(path_, html.data(), html.size()); !s)
    return errorf("--dashboard ", path_, ": ", s.message());
  return Status::ok();
}
