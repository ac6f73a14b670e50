//===- Dashboard.h - zrun train --dashboard: a live HTML page ----*- C++ -*-===//
//
// A self-contained HTML page (observe/Pages.h: Chart.js inlined, no
// network) rewritten after every step with the run so far: loss (and
// eval loss), learning rate, gradient norm, loss scale and skipped steps,
// tokens/s, matmul TFLOP/s per rank (MFU with --peak-tflops), and memory
// per rank. While the run goes on the page reloads itself every few
// seconds; the last write marks it finished, failed or stopped. Each write
// replaces the file atomically: a browser never reads half a page.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAIN_DASHBOARD_H
#define ZRT_TRAIN_DASHBOARD_H

#include "observe/MemoryMap.h"
#include "support/Status.h"
#include "train/Trainer.h"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace zrt {

class Dashboard {
public:
  struct Run {
    std::string plan, backend;
    const plan::Plan *planProto = nullptr;
    int64_t steps = 0;
    double matmulFlops = 0; // one rank's per step (stepMatmulFlops)
    double peakTflops = 0;  // per rank, for MFU; 0: unknown
    /// The memory to show with each step (per rank / per GPU).
    std::function<std::vector<MeasuredMemory>()> measure;
  };
  /// Starts the page at |path| (empty: no dashboard; the calls do nothing).
  /// A resumed run's page starts at its first step.
  Status open(const std::string &path, Run run);
  /// Adds |record| (rank 0's, with the planned peak) and rewrites the page
  /// (at most every 2 seconds: a fast run does not wait on its disk).
  /// |tflops| and |mfu|: the step's rate (0: unknown).
  void step(const StepRecord &record, int64_t peakBytes, double tflops, double mfu);
  /// The last write: "finished", "failed" or "stopped", with why.
  Status close(const std::string &state, const std::string &reason = "");

private:
  static constexpr int kRefreshSeconds = 5;
  Status write(const std::string &state, const std::string &reason);
  std::string path_;
  Run run_;
  std::vector<std::string> records_;                // JSON objects
  std::chrono::steady_clock::time_point lastWrite_; // writes at most every 2 s
  bool failed_ = false;
  std::string error_;
};

} // namespace zrt

#endif // ZRT_TRAIN_DASHBOARD_H
