//===- LossScaler.cpp - DeepSpeed's dynamic fp16 loss scaling -------------===//
#include "train/LossScaler.h"

#include <algorithm>

namespace zrt {

LossScaler::LossScaler(const LossScalerConfig &config)
    : config_(config), scale_(config.staticScale > 0 ? config.staticScale : config.initialScale),
      remainingHysteresis_(config.hysteresis) {}

Status LossScaler::update(bool overflow) {
  if (!dynamic())
    return Status::ok();
  if (overflow) {
    if (config_.hysteresis == 1 || remainingHysteresis_ == 1) {
      if (scale_ <= config_.minScale)
        return errorf("fp16 overflow at the minimum loss scale ", config_.minScale,
                      ": the gradients are not finite at any scale (diverged, or NaN in the "
                      "data); lower the learning rate, check the inputs, or train in bf16");
      scale_ = std::max(scale_ / 2, config_.minScale);
    } else {
      --remainingHysteresis_;
    }
    lastOverflow_ = iteration_;
  } else {
    if (config_.consecutiveHysteresis)
      remainingHysteresis_ = config_.hysteresis;
    if ((iteration_ - lastOverflow_) % config_.window == 0) {
      if (!config_.consecutiveHysteresis)
        remainingHysteresis_ = config_.hysteresis;
      scale_ *= 2;
    }
  }
  ++iteration_;
  return Status::ok();
}

} // namespace zrt
