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
#include <string>
#include <utility>
#include <vector>

namespace zrt {

class DataFeeder {
public:
  /// Loads every file and checks it against |program|'s inputs: every input
  /// has data, no data is left over, dtypes match exactly, per-sample shapes
  /// match the plan, all arrays have the same number of samples.
  Status load(const std::vector<std::pair<std::string, std::string>> &files,
              const plan::Plan &plan, const plan::Program &program);

  /// Copies global batch |k| into the program's input buffers.
  void feed(int64_t k, const Executor &executor, const plan::Program &program) const;

  int64_t samples() const { return samples_; }

private:
  std::map<std::string, NpyArray> arrays_;
  int64_t samples_ = 0;
};

} // namespace zrt

#endif // ZRT_TRAIN_DATA_H
