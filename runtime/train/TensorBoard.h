//===- TensorBoard.h - zrun train --tensorboard DIR ---------------*- C++ -*-===//
//
// TensorBoard's event files: DIR/events.out.tfevents.<seconds>.<host>.zrun,
// a TFRecord stream (each record: its length as a little-endian uint64,
// the length's masked CRC32C, the bytes, their masked CRC32C) of Event
// protobufs (train/tensorboard.proto: TensorFlow's field numbers). The
// first record names the file version; then one Event per step with the
// step's scalars under Hugging Face Trainer's tags (train/loss,
// train/learning_rate, train/grad_norm, eval/loss) and zrun's
// (train/loss_scale, train/skipped, perf/tokens_per_s, perf/step_ms,
// perf/tflops, perf/mfu, memory/planned_peak_bytes). Each step's record is
// flushed as it is written; a resumed run starts a new file in DIR, as
// TensorBoard expects (it reads every events file of a directory).
// CRC32C: Intel's ISA-L (crc32_iscsi).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAIN_TENSORBOARD_H
#define ZRT_TRAIN_TENSORBOARD_H

#include "support/Status.h"
#include "train/Trainer.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace zrt {

/// TFRecord's masked CRC32C of |n| bytes at |data|.
uint32_t maskedCrc32c(const void *data, size_t n);

class TensorBoardWriter {
public:
  TensorBoardWriter() = default;
  TensorBoardWriter(const TensorBoardWriter &) = delete;
  TensorBoardWriter &operator=(const TensorBoardWriter &) = delete;
  ~TensorBoardWriter();

  /// Creates the event file in |dir| (empty: none; the other calls do
  /// nothing); |dir| passed checkOutputDirectory.
  Status open(const std::string &dir);
  /// One step's scalars (|step| as TensorBoard's step: steps done, 1-based).
  void write(int64_t step, const std::vector<std::pair<std::string, double>> &scalars);
  /// The scalars of a step record, with the planned peak and (when known)
  /// TFLOP/s and MFU.
  void write(const StepRecord &record, int64_t peakBytes, double tflops, double mfu);
  /// Closes the file; an error if a write failed (a full disk).
  Status close();
  const std::string &path() const { return path_; }

private:
  void record(const std::string &bytes);
  std::string path_;
  FILE *file_ = nullptr;
  bool failed_ = false;
};

} // namespace zrt

#endif // ZRT_TRAIN_TENSORBOARD_H
