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
  std::printf("%s\n", r.note.c_str());
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
