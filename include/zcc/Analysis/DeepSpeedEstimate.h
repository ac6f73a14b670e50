//===- DeepSpeedEstimate.h - DeepSpeed's model-state estimators --*- C++ -*-===//
//
// What a DeepSpeed user checks a config with before a run:
// deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs
// (stages 1 and 2) and stage3.estimate_zero3_model_states_mem_needs, their
// formulas for one GPU's model states (no activations):
//   stage 1-2: 4 Psi + 16 Psi / N; offloaded optimizer: 2 Psi
//   stage 3:   4 L + 18 Psi / N; offloaded optimizer: 4 L + 2 Psi / N;
//              offloaded parameters too: 4 L
// with Psi the parameters, N the GPUs and L the largest layer's own
// parameters (a module's, not its children's). zcc's report and zcc
// estimate print them beside zcc's own figures, with the ratio.
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_ANALYSIS_DEEPSPEEDESTIMATE_H
#define ZCC_ANALYSIS_DEEPSPEEDESTIMATE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace zcc {

struct DeepSpeedEstimate {
  double gpuBytes = 0;
  std::string function; // "estimate_zero2_model_states_mem_needs"
  std::string formula;  // "4 Psi + 16 Psi/N"
};

/// DeepSpeed's per-GPU model-state bytes for |stage| (1-3; none for 0: it
/// has no estimator for plain data parallelism) on |gpus| GPUs.
std::optional<DeepSpeedEstimate> deepspeedEstimate(int stage, double psi, double largestLayer,
                                                   int64_t gpus, bool offloadOptimizer,
                                                   bool offloadParam);

/// The largest layer's parameters as DeepSpeed's model_to_params counts
/// them: parameters grouped by their module (the name up to its last '.'),
/// the largest group's size. |params|: (name, elements).
int64_t largestLayerParams(llvm::ArrayRef<std::pair<std::string, int64_t>> params);

} // namespace zcc

#endif // ZCC_ANALYSIS_DEEPSPEEDESTIMATE_H
