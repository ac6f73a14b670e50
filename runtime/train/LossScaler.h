//===- LossScaler.h - DeepSpeed's dynamic fp16 loss scaling ------*- C++ -*-===//
//
// The host half of fp16 training. The compiled step multiplies the loss by
// the scale (micro_step's "loss_scale" input), unscales the gradients and
// skips the optimizer update in place when they overflow (apply's "overflow"
// output). This class decides the next scale exactly as DeepSpeed's
// DynamicLossScaler.update_scale (deepspeed/runtime/fp16/loss_scaler.py):
//
//   overflow:    if hysteresis == 1 or the remaining hysteresis is 1:
//                  scale = max(scale / 2, min_scale)
//                else: remaining hysteresis -= 1
//                last overflow = this iteration
//   no overflow: if consecutive_hysteresis: remaining hysteresis = hysteresis
//                if (iteration - last overflow) % window == 0:
//                  remaining hysteresis = hysteresis (if not consecutive)
//                  scale *= 2
//   iteration += 1
//
// A static scale (loss_scale > 0) never changes. DeepSpeed raises when an
// overflow happens at the minimum scale (raise_error_at_min_scale); update()
// reports that as an error too, since the run cannot make progress.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAIN_LOSSSCALER_H
#define ZRT_TRAIN_LOSSSCALER_H

#include "support/Status.h"

#include <cstdint>

namespace zrt {

struct LossScalerConfig {
  double staticScale = 0;      // > 0: fixed scale
  double initialScale = 65536; // 2^initial_scale_power
  int64_t window = 1000;       // loss_scale_window
  int64_t hysteresis = 2;      // DeepSpeed's delayed_shift
  bool consecutiveHysteresis = false;
  double minScale = 1; // min_loss_scale
};

class LossScaler {
public:
  explicit LossScaler(const LossScalerConfig &config);

  /// The scale of the coming step.
  double scale() const { return scale_; }
  bool dynamic() const { return config_.staticScale <= 0; }
  /// Overflows still tolerated before the scale halves.
  int64_t remainingHysteresis() const { return remainingHysteresis_; }

  /// Everything update() depends on, for checkpoints.
  struct State {
    double scale;
    int64_t remainingHysteresis, iteration, lastOverflow;
  };
  State state() const { return {scale_, remainingHysteresis_, iteration_, lastOverflow_}; }
  void restore(const State &s) {
    scale_ = s.scale;
    remainingHysteresis_ = s.remainingHysteresis;
    iteration_ = s.iteration;
    lastOverflow_ = s.lastOverflow;
  }

  /// Records the outcome of a step. Fails when an overflow happens at the
  /// minimum scale (the scale cannot go lower; training diverged).
  Status update(bool overflow);

private:
  LossScalerConfig config_;
  double scale_;
  int64_t remainingHysteresis_;
  int64_t iteration_ = 0, lastOverflow_ = -1;
};

} // namespace zrt

#endif // ZRT_TRAIN_LOSSSCALER_H
