//===- Data.h - feeding .npy sample arrays to a program ----------*- C++ -*-===//
//
// DESIGN.md §6: each `--data NAME=FILE.npy` is an array whose first axis is
// samples; batch k consumes samples [k*B, (k+1)*B) modulo the sample count,
// B = the global batch (micro-batch x world size x accumulation steps).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAIN_DATA_H
#define ZRT_TRAIN_DATA_H

#include "exec/Executor.h"
#include "train/Npy.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace zrt {

/// Program inputs that the trainer fills itself, not from data: the fp16
/// loss scale.
inline bool isTrainerInput(const std::string &name) { return name == "loss_scale"; }

/// A token file's bytes (the layout of DataFeeder::loadTokens) as sequences
/// of |seq| tokens: |x| the input ids, |y| the same shifted by one (int64,
/// [sequences, seq]). |path| for messages.
Status tokenSequences(const std::string &bytes, const std::string &path, int bytesPerToken,
                      int64_t seq, NpyArray &x, NpyArray &y);

class DataFeeder {
public:
  /// Loads every file and checks it against |program|'s inputs: every input
  /// has data, no data is left over, dtypes match exactly, per-sample shapes
  /// match the plan, all arrays have the same number of samples. Trainer
  /// inputs (isTrainerInput) take no data.
  Status load(const std::vector<std::pair<std::string, std::string>> &files, const plan::Plan &plan,
              const plan::Program &program);

  /// Token files (the nanoGPT / llm.c layout): a flat array of uint16 or
  /// uint32 token ids, with llm.c's 1024-byte header (magic 20240520) or
  /// none. Sequence i is tokens [i*T, (i+1)*T) as `input_ids` and the same
  /// shifted by one as `labels`, T the plan's sequence length.
  Status loadTokens(const std::string &path, int bytesPerToken, const plan::Plan &plan,
                    const plan::Program &program);

  /// Visits the samples in a fixed pseudo-random order (a new permutation of
  /// all samples each epoch) instead of in file order.
  void shuffle(uint64_t seed) { shuffleSeed_ = seed, shuffled_ = true; }

  /// Copies global batch |k| into the program's input buffers.
  void feed(int64_t k, const ExecutorBase &executor, const plan::Program &program) const;

  int64_t samples() const { return samples_; }

  /// The samples (rows of the --data arrays) that global batch |k| of
  /// |batch| samples reads, for messages: "samples 8-11", or a list.
  std::string samplesOf(int64_t k, int64_t batch) const;

private:
  /// The sample that position |i| of the stream reads.
  int64_t sampleAt(int64_t i) const;

  std::map<std::string, NpyArray> arrays_;
  int64_t samples_ = 0;
  bool shuffled_ = false;
  uint64_t shuffleSeed_ = 0;
  mutable int64_t permutationEpoch_ = -1;
  mutable std::vector<int64_t> permutation_;
  mutable std::mutex permutationMutex_;
};

} // namespace zrt

#endif // ZRT_TRAIN_DATA_H
