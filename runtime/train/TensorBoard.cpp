//===- TensorBoard.cpp - zrun train --tensorboard DIR ---------------------===//
#include "train/TensorBoard.h"

#include "tensorboard.pb.h" // train/tensorboard.proto

#include <isa-l/crc.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

using namespace zrt;

uint32_t zrt::maskedCrc32c(const void *data, size_t n) {
  // ISA-L's iSCSI CRC is CRC32C with the initial value and final XOR left
  // to the caller. It takes an int length: long data in pieces.
  uint32_t crc = 0xFFFFFFFFu;
  const unsigned char *p = static_cast<const unsigned char *>(data);
  while (n > 0) {
    int piece = (int)std::min<size_t>(n, 1u << 30);
    crc = crc32_iscsi(const_cast<unsigned char *>(p), piece, crc);
    p += piece;
    n -= (size_t)piece;
  }
  crc ^= 0xFFFFFFFFu;
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static double wallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TensorBoardWriter::~TensorBoardWriter() { (void)close(); }

Status TensorBoardWriter::open(const std::string &dir) {
  (void)close();
  failed_ = false;
  if (dir.empty())
    return Status::ok();
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  auto now = std::chrono::system_clock::now().time_since_epoch();
  path_ = dir + "/events.out.tfevents." +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count()) + "." +
          host + "." + std::to_string(getpid()) + ".zrun";
  int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    return errorf("--tensorboard ", dir, ": cannot create ", path_, " (", std::strerror(errno),
                  ")");
  file_ = ::fdopen(fd, "w");
  tensorboard::Event first;
  first.set_wall_time(wallTime());
  first.set_file_version("brain.Event:2");
  record(first.SerializeAsString());
  return Status::ok();
}

void TensorBoardWriter::record(const std::string &bytes) {
  if (!file_)
    return;
  // TFRecord framing, little-endian.
  uint64_t length = bytes.size();
  unsigned char header[12];
  for (int i = 0; i < 8; ++i)
    header[i] = (unsigned char)(length >> (8 * i));
  uint32_t lengthCrc = maskedCrc32c(header, 8), dataCrc = maskedCrc32c(bytes.data(), bytes.size());
  for (int i = 0; i < 4; ++i)
    header[8 + i] = (unsigned char)(lengthCrc >> (8 * i));
  unsigned char footer[4];
  for (int i = 0; i < 4; ++i)
    footer[i] = (unsigned char)(dataCrc >> (8 * i));
  failed_ |= std::fwrite(header, 1, sizeof header, file_) != sizeof header;
  failed_ |= std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size();
  failed_ |= std::fwrite(footer, 1, sizeof footer, file_) != sizeof footer;
  failed_ |= std::fflush(file_) != 0;
}

void TensorBoardWriter::write(int64_t step,
                              const std::vector<std::pair<std::string, double>> &scalars) {
  if (!file_)
    return;
  tensorboard::Event event;
  event.set_wall_time(wallTime());
  event.set_step(step);
  tensorboard::Summary *summary = event.mutable_summary();
  for (const auto &[tag, value] : scalars) {
    if (!std::isfinite(value))
      continue; // a diverged step's NaN: left out, as the metrics file's null
    tensorboard::Summary::Value *v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value((float)value);
  }
  record(event.SerializeAsString());
}

void TensorBoardWriter::write(const StepRecord &r, int64_t peakBytes, double tflops, double mfu) {
  std::vector<std::pair<std::string, double>> s = {
      {"train/loss", r.loss},
      {"train/learning_rate", r.lr},
      {"train/grad_norm", r.gradNorm},
      {"train/loss_scale", r.lossScale},
      {"train/skipped", r.skipped ? 1.0 : 0.0},
      {"perf/tokens_per_s", r.tokensPerSecond},
      {"perf/step_ms", r.ms},
      {"memory/planned_peak_bytes", (double)peakBytes},
  };
  if (tflops > 0)
    s.push_back({"perf/tflops", tflops});
  if (mfu > 0)
    s.push_back({"perf/mfu", mfu});
  if (r.evalLoss)
    s.push_back({"eval/loss", *r.evalLoss});
  write(r.step + 1, s);
}

Status TensorBoardWriter::close() {
  if (!file_)
    return Status::ok();
  bool ok = std::fclose(file_) == 0 && !failed_;
  file_ = nullptr;
  if (!ok)
    return errorf("--tensorboard: cannot write ", path_, " (disk full?)");
  return Status::ok();
}
