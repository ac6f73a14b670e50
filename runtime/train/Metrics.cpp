//===- Metrics.cpp - the step log and the metrics file --------------------===//
#include "train/Metrics.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace zrt;

MetricsFile::~MetricsFile() { (void)close(); }

Status MetricsFile::open(const std::string &path, bool append) {
  (void)close();
  path_ = path;
  failed_ = false;
  if (path.empty())
    return Status::ok();
  int fd =
      ::open(path.c_str(),
             O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (append ? O_APPEND : O_TRUNC), 0644);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0 || (!S_ISREG(st.st_mode) && path != "/dev/null")) {
    int error = errno;
    if (fd >= 0)
      ::close(fd);
    return errorf("--metrics ", path, ": cannot write (",
                  fd >= 0 ? "not a regular file" : std::strerror(error), ")");
  }
  file_ = ::fdopen(fd, append ? "a" : "w");
  return Status::ok();
}

void MetricsFile::write(const StepRecord &r, int64_t peakBytes) {
  if (!file_)
    return;
  std::string text = stepRecordJson(r, peakBytes).dump() + "\n";
  failed_ |= std::fwrite(text.data(), 1, text.size(), file_) != text.size();
  failed_ |= std::fflush(file_) != 0;
}

nlohmann::ordered_json zrt::stepRecordJson(const StepRecord &r, int64_t peakBytes) {
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
      {"epoch", std::round(r.epoch * 1e4) / 1e4},
  };
  if (r.evalLoss) {
    line["eval_loss"] = finite(*r.evalLoss);
    line["eval_ms"] = std::round(r.evalMs * 1000) / 1000;
  }
  return line;
}

void MetricsFile::end(const std::string &event, int64_t stepsDone, const std::string &reason) {
  if (!file_)
    return;
  nlohmann::ordered_json line = {{"event", event}, {"steps_done", stepsDone}, {"reason", reason}};
  std::string text =
      line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  failed_ |= std::fwrite(text.data(), 1, text.size(), file_) != text.size();
  failed_ |= std::fflush(file_) != 0;
}

Status MetricsFile::close() {
  if (!file_)
    return Status::ok();
  bool ok = std::fclose(file_) == 0 && !failed_;
  file_ = nullptr;
  if (!ok)
    return errorf("--metrics ", path_, ": cannot write the file (disk full?)");
  return Status::ok();
}

StepLog::StepLog(int64_t steps, bool scaling)
    : steps_(steps), scaling_(scaling), tty_(isatty(fileno(stdout))) {}

std::string zrt::showDuration(double seconds) {
  char buf[64];
  if (seconds < 60)
    std::snprintf(buf, sizeof buf, "%.1f s", seconds);
  else if (seconds < 3600)
    std::snprintf(buf, sizeof buf, "%d min %d s", (int)(seconds / 60), (int)seconds % 60);
  else
    std::snprintf(buf, sizeof buf, "%d h %d min", (int)(seconds / 3600), (int)(seconds / 60) % 60);
  return buf;
}

void StepLog::print(const StepRecord &r) {
  const int64_t k = r.step;
  if (tty_)
    std::printf("\r\033[K"); // clear the progress bar
  std::printf("step %lld/%lld | loss %.6f | lr %.3e | grad_norm %.4f", (long long)k + 1,
              (long long)steps_, r.loss, r.lr, r.gradNorm);
  if (scaling_)
    std::printf(" | loss_scale %.0f", r.lossScale);
  std::printf(" | %.1f ms | %.0f tokens/s", r.ms, r.tokensPerSecond);
  if (r.evalLoss)
    std::printf(" | eval_loss %.6f", *r.evalLoss);
  // Wall time since the log began (loading, evaluation and checkpoints
  // included) and the time left at the mean pace of the steps so far.
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (first_ < 0)
    first_ = k, firstLoss_ = r.loss;
  last_ = k, lastLoss_ = r.loss, lastEval_ = r.evalLoss ? r.evalLoss : lastEval_;
  ++printed_;
  elapsedMs_ += r.ms;
  tokensPerSecondSum_ += r.tokensPerSecond;
  double eta = elapsed / (double)(k + 1 - first_) * (double)(steps_ - k - 1);
  std::printf(" | epoch %.2f | %s, eta %s", r.epoch, showDuration(elapsed).c_str(),
              showDuration(eta).c_str());
  std::printf("%s\n", r.note.c_str());
  if (tty_) {
    // A progress bar under the log lines, on a terminal only.
    int width = 30, done = (int)(width * (k + 1) / steps_);
    std::printf("[%s%s] %lld/%lld, eta %s", std::string(done, '#').c_str(),
                std::string(width - done, '.').c_str(), (long long)k + 1, (long long)steps_,
                showDuration(eta).c_str());
    if (k + 1 == steps_)
      std::printf("\n");
  }
  std::fflush(stdout);
}

std::string StepLog::summary() const {
  if (printed_ == 0)
    return "";
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "trained steps %lld to %lld in %s (%.1f ms a step, %.0f tokens/s); loss %.6f -> "
                "%.6f",
                (long long)first_ + 1, (long long)last_ + 1, showDuration(elapsed).c_str(),
                elapsedMs_ / printed_, tokensPerSecondSum_ / printed_, firstLoss_, lastLoss_);
  std::string out = buf;
  if (lastEval_) {
    std::snprintf(buf, sizeof buf, ", eval_loss %.6f", *lastEval_);
    out += buf;
  }
  return out;
}
