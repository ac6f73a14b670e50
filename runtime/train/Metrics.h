//===- Metrics.h - the step log and the metrics file -------------*- C++ -*-===//
//
// What rank 0 reports after each step (train/Trainer.h's StepRecord):
//  - a log line on stdout, and on a terminal a progress bar under it;
//  - with zrun --metrics FILE.jsonl, one JSON object per step, appended and
//    flushed as each step ends: a run that is killed keeps every step it
//    finished. A run that fails or is stopped by a signal ends the file with
//    a record saying so ({"event": "failed" | "stopped", ...}); a run that
//    finishes adds nothing after its last step.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAIN_METRICS_H
#define ZRT_TRAIN_METRICS_H

#include "support/Status.h"
#include "train/Trainer.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

namespace zrt {

/// One step as the metrics file writes it: {"step", "loss", "lr",
/// "grad_norm", "loss_scale", "skipped", "tokens_per_s", "step_ms",
/// "peak_bytes"}, and "eval_loss", "eval_ms" on the steps that evaluate; a
/// non-finite loss or norm is null (JSON has no inf or NaN). The dashboard
/// adds its fields to the same object.
nlohmann::ordered_json stepRecordJson(const StepRecord &record, int64_t peakBytes);

class MetricsFile {
public:
  MetricsFile() = default;
  MetricsFile(const MetricsFile &) = delete;
  MetricsFile &operator=(const MetricsFile &) = delete;
  ~MetricsFile();

  /// Opens |path| (empty: no file; the other calls do nothing): truncated,
  /// or with |append| (a resumed run) continued. Never through a symlink,
  /// never a device: checkOutputPath ran before.
  Status open(const std::string &path, bool append);
  /// One line: stepRecordJson. Flushed.
  void write(const StepRecord &record, int64_t peakBytes);
  /// The last line of a run that did not finish: {"event": |event|,
  /// "steps_done": N, "reason": |reason|}.
  void end(const std::string &event, int64_t stepsDone, const std::string &reason);
  /// Closes the file; an error if any write failed (a full disk).
  Status close();

private:
  std::string path_;
  FILE *file_ = nullptr;
  bool failed_ = false;
};

/// The step log: "step K/N | loss ... | lr ... | grad_norm ... | ... |
/// epoch E | elapsed T, eta T" per step (with the loss scale when
/// |scaling|), a progress bar under it when stdout is a terminal, and a
/// summary line at the end (summary()).
class StepLog {
public:
  StepLog(int64_t steps, bool scaling);
  void print(const StepRecord &record);
  /// "trained K steps in T (M ms a step, N tokens/s); loss A -> B[, eval
  /// loss C]" after the last step printed; empty if none was.
  std::string summary() const;

private:
  int64_t steps_, printed_ = 0, first_ = -1, last_ = -1;
  bool scaling_, tty_;
  double elapsedMs_ = 0, tokensPerSecondSum_ = 0, firstLoss_ = 0, lastLoss_ = 0;
  std::optional<double> lastEval_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// Seconds as "42.1 s", "12 min 5 s" or "3 h 20 min".
std::string showDuration(double seconds);

} // namespace zrt

#endif // ZRT_TRAIN_METRICS_H
