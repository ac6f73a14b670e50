//===- Schedule.h - learning-rate schedules ----------------------*- C++ -*-===//
//
// The learning rate of optimizer step k (0-based) is the schedule evaluated
// at iteration k. Names and formulas follow DeepSpeed's lr_schedules.py
// (WarmupLR, WarmupDecayLR, WarmupCosineLR); "warmup-cosine" is the schedule
// of ../shared/models/references.json.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAIN_SCHEDULE_H
#define ZRT_TRAIN_SCHEDULE_H

#include "support/Status.h"

#include <cstdint>
#include <string>

namespace zrt {

struct Schedule {
  std::string name = "constant"; // constant, warmup-cosine, WarmupLR, WarmupDecayLR, WarmupCosineLR
  double lr = 1e-3;              // base (max) learning rate
  int64_t warmupSteps = 0;
  int64_t totalSteps = 0;
  double warmupMinLr = 0.0;    // WarmupLR, WarmupDecayLR
  bool warmupLog = true;       // DeepSpeed's warmup_type: log (default) or linear
  double warmupMinRatio = 0.0; // WarmupCosineLR
  double cosMinRatio = 1e-4;   // WarmupCosineLR

  /// Checks the parameters (names the option at fault).
  Status validate() const;
  /// The learning rate of step |k|.
  double at(int64_t k) const;
};

} // namespace zrt

#endif // ZRT_TRAIN_SCHEDULE_H
