//===- Metrics.cpp - the step log and the metrics file --------------------===//
#include "train/Metrics.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <unistd.h>

using namespace zrt;

Status MetricsFile::open(const std::string &path) {
  abandon();
  path_ = path;
  if (path.empty())
    return Status::ok();
  std::string tmp = path + ".tmp";
  if (!(file_ = std::fopen(tmp.c_str(), "w")))
    return errorf("--metrics ", path, ": cannot write ", tmp);
  return Status::ok();
}

void MetricsFile::write(const StepRecord &r, int64_t peakBytes) {
  if (!file_)
    return;
  auto finite = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nullptr; };
  nlohmann::ordered_json line = {
      {"step", r.step},
      {"loss", finite(r.loss)},
      {"lr", r.lr},
      {"grad_norm", finite(r.gradNorm)},
      {"loss_scale", r.lossScale},
      {"skipped", r.skipped},
      {"tokens_per_s", std::round(r.tokensPerSecond * 10) / 10},
      {"step_ms", std::round(r.ms * 1000) / 1000},
      {"peak_bytes", peakBytes},
  };
  std::string text = line.dump() + "\n";
  std::fwrite(text.data(), 1, text.size(), file_);
}

Status MetricsFile::commit() {
  if (!file_)
    return Status::ok();
  std::string tmp = path_ + ".tmp";
  bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!closed || std::rename(tmp.c_str(), path_.c_str()) != 0) {
    std::remove(tmp.c_str());
    return errorf("--metrics ", path_, ": cannot write the file");
  }
  return Status::ok();
}

void MetricsFile::abandon() {
  if (!file_)
    return;
  std::fclose(file_);
  file_ = nullptr;
  std::remove((path_ + ".tmp").c_str());
}

StepLog::StepLog(int64_t steps, bool scaling)
    : steps_(steps), scaling_(scaling), tty_(isatty(fileno(stdout))) {}

void StepLog::print(const StepRecord &r) {
  const int64_t k = r.step;
  if (tty_)
    std::printf("\r\033[K"); // clear the progress bar
  std::printf("step %lld/%lld | loss %.6f | lr %.3e | grad_norm %.4f", (long long)k + 1,
              (long long)steps_, r.loss, r.lr, r.gradNorm);
  if (scaling_)
    std::printf(" | loss_scale %.0f", r.lossScale);
  std::printf(" | %.1f ms | %.0f tokens/s%s\n", r.ms, r.tokensPerSecond, r.note.c_str());
  if (tty_) {
    // A progress bar under the log lines, on a terminal only.
    elapsedMs_ += r.ms;
    int width = 30, done = (int)(width * (k + 1) / steps_);
    double eta = elapsedMs_ / (k + 1) * (steps_ - k - 1) / 1000.0;
    std::printf("[%s%s] %lld/%lld, eta %.1f s", std::string(done, '#').c_str(),
                std::string(width - done, '.').c_str(), (long long)k + 1, (long long)steps_, eta);
    if (k + 1 == steps_)
      std::printf("\n");
  }
  std::fflush(stdout);
}
