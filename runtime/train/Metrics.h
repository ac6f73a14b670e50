//===- Metrics.h - the step log and the metrics file -------------*- C++ -*-===//
//
// What rank 0 reports after each step (train/Trainer.h's StepRecord):
//  - a log line on stdout, and on a terminal a progress bar under it;
//  - with zrun --metrics FILE.jsonl, one JSON object per step, written to
//    FILE.tmp and renamed to FILE when the run ends well. A run that fails
//    leaves neither (no file claims a run that did not finish).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAIN_METRICS_H
#define ZRT_TRAIN_METRICS_H

#include "support/Status.h"
#include "train/Trainer.h"

#include <cstdio>
#include <string>

namespace zrt {

class MetricsFile {
public:
  MetricsFile() = default;
  MetricsFile(const MetricsFile &) = delete;
  MetricsFile &operator=(const MetricsFile &) = delete;
  /// Removes the temporary file unless commit() succeeded.
  ~MetricsFile() { abandon(); }

  /// Starts |path|.tmp (empty |path|: no file; write and commit do nothing).
  Status open(const std::string &path);
  /// One line: {"step", "loss", "lr", "grad_norm", "loss_scale", "skipped",
  /// "tokens_per_s", "step_ms", "peak_bytes"}; a non-finite loss or norm is
  /// null (JSON has no inf or NaN).
  void write(const StepRecord &record, int64_t peakBytes);
  /// Closes the file and renames it into place.
  Status commit();
  /// Closes and removes the temporary file.
  void abandon();

private:
  std::string path_;
  FILE *file_ = nullptr;
};

/// The step log: "step K/N | loss ... | lr ... | grad_norm ..." per step
/// (with the loss scale when |scaling|), and a progress bar with the time
/// left when stdout is a terminal.
class StepLog {
public:
  StepLog(int64_t steps, bool scaling);
  void print(const StepRecord &record);

private:
  int64_t steps_;
  bool scaling_, tty_;
  double elapsedMs_ = 0;
};

} // namespace zrt

#endif // ZRT_TRAIN_METRICS_H
