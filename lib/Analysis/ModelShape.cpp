//===- ModelShape.cpp - what a pass may infer from the model --------------===//
#include "zcc/Analysis/ModelShape.h"
#include "zero/ZeroOps.h"

#include <algorithm>
#include <map>

using namespace mlir;

int64_t zcc::hiddenSize(ModuleOp module) {
  std::map<int64_t, int> count;
  for (auto g : module.getOps<zero::GlobalOp>())
    if (g.getTrainable() && g.getTensorType().getRank() == 1)
      ++count[g.getTensorType().getDimSize(0)];
  int64_t best = 1;
  int bestCount = 0;
  for (auto [size, n] : count)
    if (n >= bestCount)
      best = size, bestCount = n;
  return best;
}

int64_t zcc::autoSize(int64_t value, ModuleOp module, double perH2, double perH) {
  if (value >= 0)
    return value;
  int64_t h = hiddenSize(module);
  return std::max<int64_t>(1, (int64_t)(perH2 * h * h + perH * h));
}
