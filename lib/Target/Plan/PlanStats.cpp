//===- PlanStats.cpp - what the report and the scaling model count --------===//
#include "PlanStats.h"

#include "zcc/Analysis/MemoryPlan.h"

#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace zcc::plan_stats;

/// Tokens (elements of the first int64 data input, else samples) one rank
/// processes per optimizer step.
int64_t zcc::plan_stats::tokensPerRankStep(ModuleOp module, int64_t accum) {
  for (auto program : module.getOps<zcc::zrt::ProgramOp>()) {
    if (program.getSymName() != "micro_step")
      continue;
    for (NamedAttribute in : program.getInputs()) {
      auto buffer = SymbolTable::lookupNearestSymbolFrom<zcc::zrt::BufferOp>(
          module, cast<FlatSymbolRefAttr>(in.getValue()).getAttr());
      auto t = buffer ? cast<RankedTensorType>(buffer.getType()) : RankedTensorType();
      if (t && t.getElementType().isInteger(64) && in.getName() != "labels")
        return t.getNumElements() * accum;
    }
    for (NamedAttribute in : program.getInputs()) {
      auto buffer = SymbolTable::lookupNearestSymbolFrom<zcc::zrt::BufferOp>(
          module, cast<FlatSymbolRefAttr>(in.getValue()).getAttr());
      if (buffer && in.getName() != "loss_scale")
        return cast<RankedTensorType>(buffer.getType()).getDimSize(0) * accum;
    }
  }
  return 0;
}

/// A matmul-family kernel's FLOPs (2 x batch x M x N x K, from the output's
/// shape and the contraction), else 0. The grouped GEMMs of routed experts
/// count their rows once (tokens x k), not once per expert.
zcc::plan_stats::RoutedShare zcc::plan_stats::routedShares(ModuleOp module, const TypeMap &typeOf) {
  RoutedShare share;
  module.walk([&](zcc::zrt::KernelOp k) {
    ArrayRef<int64_t> ints = k.getInts();
    if (k.getName() != "moe_route" || ints.size() != 3 || k.getOutputs().size() != 3)
      return;
    auto experts = typeOf.lookup(cast<FlatSymbolRefAttr>(k.getInputs()[0]).getAttr());
    auto rows = typeOf.lookup(cast<FlatSymbolRefAttr>(k.getOutputs()[0]).getAttr());
    if (!experts || !rows || experts.getRank() != 2 || rows.getNumElements() == 0 || ints[2] < 1)
      return;
    double used = (double)experts.getNumElements() * (double)ints[0] / (double)ints[2];
    share[cast<FlatSymbolRefAttr>(k.getOutputs()[2]).getAttr()] =
        std::min(1.0, used / (double)rows.getNumElements());
  });
  return share;
}

double zcc::plan_stats::matmulFlops(zcc::zrt::KernelOp kernel, const TypeMap &typeOf,
                                    const RoutedShare *share) {
  StringRef name = kernel.getName();
  auto typeAt = [&](Attribute a) { return typeOf.lookup(cast<FlatSymbolRefAttr>(a).getAttr()); };
  if (name == "conv" || name == "conv_input_grad" || name == "conv_filter_grad") {
    // Each direction: 2 x the forward's outputs x (C / G x K..) per output.
    RankedTensorType y = name == "conv"              ? typeAt(kernel.getOutputs()[0])
                         : name == "conv_input_grad" ? typeAt(kernel.getInputs()[0])
                                                     : typeAt(kernel.getInputs()[1]);
    RankedTensorType w =
        name == "conv_filter_grad" ? typeAt(kernel.getOutputs()[0]) : typeAt(kernel.getInputs()[1]);
    if (!y || !w || w.getRank() < 3)
      return 0;
    return 2.0 * (double)y.getNumElements() * (double)(w.getNumElements() / w.getDimSize(0));
  }
  if (!(name == "matmul" || name == "matmul_bias" || name == "matmul_add" ||
        name == "matmul_bgrad" || name == "matmul_bias_gelu" || name == "matmul_gelu_grad" ||
        name == "grouped_matmul" || name == "grouped_matmul_rhs_grad"))
    return 0;
  auto lhs = typeOf.lookup(cast<FlatSymbolRefAttr>(kernel.getInputs()[0]).getAttr());
  auto out = typeOf.lookup(cast<FlatSymbolRefAttr>(kernel.getOutputs()[0]).getAttr());
  if (!lhs || !out || lhs.getRank() < 2)
    return 0;
  double used = 1; // of the rows: a rank's routed rows under expert parallelism
  if (share && name.starts_with("grouped_matmul"))
    used = share->lookup_or(cast<FlatSymbolRefAttr>(kernel.getInputs()[2]).getAttr(), 1.0);
  if (name == "grouped_matmul_rhs_grad") // sum over experts of 2 x rows_e x K x N
    return used * 2.0 * (double)lhs.getNumElements() *
           (double)(out.getNumElements() / out.getDimSize(0)) / (double)lhs.getDimSize(1);
  if (name == "grouped_matmul")
    return used * 2.0 * (double)out.getNumElements() * (double)lhs.getDimSize(1);
  bool transposeLhs = name == "matmul_bgrad" || (name != "grouped_matmul" &&
                                                 !kernel.getInts().empty() && kernel.getInts()[0]);
  int64_t k = lhs.getDimSize(lhs.getRank() - (transposeLhs ? 2 : 1));
  return 2.0 * (double)out.getNumElements() * (double)k;
}

/// Bytes one rank sends in a ring collective over the ranks its group spans
/// (all-reduce 2(n-1)/n of the buffer, reduce-scatter and all-gather (n-1)/n
/// of the whole; an all-to-all (n-1)/n of its buffer, a step per peer), and
/// the ring's hops; kind (0 all-reduce, 1 reduce-scatter, 2 all-gather, 3
/// all-to-all) -1 for what moves nothing (local_shard).
double zcc::plan_stats::ringBytes(zcc::zrt::CollectiveOp c, const TypeMap &typeOf,
                                  const Ranks &ranks, int &kind, double &hops) {
  double n = (double)ranks.of(c.getGroup());
  kind = c.getKind() == zcc::zrt::CollectiveKind::local_shard ? -1 : (int)c.getKind();
  hops = kind < 0 ? 0 : (kind == 0 ? 2 : 1) * (n - 1);
  if (kind < 0 || n <= 1)
    return 0;
  double full = storageBytes(kind == 2 ? typeOf.lookup(c.getOutputAttr().getAttr())
                                       : typeOf.lookup(c.getInputAttr().getAttr()));
  return full * (n - 1) / n * (kind == 0 ? 2 : 1);
}

/// Gradient-accumulation steps of a compiled module (1 if not training).
int64_t zcc::plan_stats::accumSteps(ModuleOp module) {
  int64_t steps = zcc::zero::gradAccumSteps(module);
  return steps > 0 ? steps : 1;
}
