//===- DeepSpeedEstimate.cpp - DeepSpeed's model-state estimators ---------===//
#include "zcc/Analysis/DeepSpeedEstimate.h"

#include "llvm/ADT/StringMap.h"

#include <algorithm>

using namespace zcc;

std::optional<DeepSpeedEstimate> zcc::deepspeedEstimate(int stage, double psi, double largestLayer,
                                                        int64_t gpus, bool offloadOptimizer,
                                                        bool offloadParam) {
  double n = (double)std::max<int64_t>(gpus, 1);
  if (stage == 1 || stage == 2) {
    if (offloadOptimizer)
      return DeepSpeedEstimate{2 * psi, "estimate_zero2_model_states_mem_needs", "2 Psi"};
    return DeepSpeedEstimate{4 * psi + (double)(int64_t)(16 * psi / n),
                             "estimate_zero2_model_states_mem_needs", "4 Psi + 16 Psi/N"};
  }
  if (stage == 3) {
    double layer = 4 * largestLayer;
    if (offloadOptimizer && offloadParam)
      return DeepSpeedEstimate{layer, "estimate_zero3_model_states_mem_needs", "4 L"};
    if (offloadOptimizer)
      return DeepSpeedEstimate{layer + (double)(int64_t)(2 * psi / n),
                               "estimate_zero3_model_states_mem_needs", "4 L + 2 Psi/N"};
    return DeepSpeedEstimate{layer + (double)(int64_t)(18 * psi / n),
                             "estimate_zero3_model_states_mem_needs", "4 L + 18 Psi/N"};
  }
  return std::nullopt;
}

int64_t zcc::largestLayerParams(llvm::ArrayRef<std::pair<std::string, int64_t>> params) {
  llvm::StringMap<int64_t> byModule;
  for (const auto &[name, n] : params) {
    llvm::StringRef s(name);
    size_t dot = s.rfind('.');
    byModule[dot == llvm::StringRef::npos ? llvm::StringRef("") : s.take_front(dot)] += n;
  }
  int64_t largest = 0;
  for (const auto &entry : byModule)
    largest = std::max(largest, entry.getValue());
  return largest;
}
