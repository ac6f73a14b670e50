//===- Schedule.cpp - learning-rate schedules -----------------------------===//
#include "train/Schedule.h"

#include <algorithm>
#include <cmath>

using namespace zrt;

Status Schedule::validate() const {
  static const char *names[] = {"constant", "warmup-cosine", "WarmupLR", "WarmupDecayLR",
                                "WarmupCosineLR"};
  if (std::find(std::begin(names), std::end(names), name) == std::end(names))
    return errorf("--lr-schedule ", name,
                  ": expected constant, warmup-cosine, WarmupLR, WarmupDecayLR or WarmupCosineLR");
  if (!(lr >= 0) || warmupSteps < 0 || !(warmupMinLr >= 0))
    return Status::error("--lr, --warmup-steps and --warmup-min-lr must be non-negative");
  bool needsTotal = name == "warmup-cosine" || name == "WarmupDecayLR" || name == "WarmupCosineLR";
  if (needsTotal && totalSteps <= warmupSteps)
    return errorf("--lr-schedule ", name, " needs --total-steps greater than --warmup-steps (",
                  totalSteps, " <= ", warmupSteps, ")");
  return Status::ok();
}

double Schedule::at(int64_t k) const {
  if (name == "warmup-cosine") {
    if (k < warmupSteps)
      return lr * (double)k / (double)std::max<int64_t>(1, warmupSteps);
    double progress =
        (double)(k - warmupSteps) / (double)std::max<int64_t>(1, totalSteps - warmupSteps);
    return lr * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * progress)));
  }
  if (name == "constant")
    return lr;
  // DeepSpeed: warmup_num_steps is at least 2; the warmup fraction is
  // log(k + 1) / log(W) (log) or k / W (linear).
  int64_t w = std::max<int64_t>(2, warmupSteps);
  double warm = warmupLog ? std::log((double)k + 1) / std::log((double)w) : (double)k / w;
  if (name == "WarmupCosineLR") {
    double ratio;
    if (k < w) {
      ratio = warmupMinRatio + warm * (1.0 - warmupMinRatio);
    } else {
      double step = (double)(k - w + 1), span = (double)(totalSteps - w);
      ratio =
          std::max(0.0, cosMinRatio + (1.0 - cosMinRatio) * (1 + std::cos(M_PI * step / span)) / 2);
    }
    return lr * ratio;
  }
  double gamma = 1.0;
  if (k < w)
    gamma = warm;
  else if (name == "WarmupDecayLR")
    gamma = std::max(0.0, (double)(totalSteps - k) / (double)std::max<int64_t>(1, totalSteps - w));
  return warmupMinLr + (lr - warmupMinLr) * gamma;
}
