//===- ZeroOpsSupport.h - what the zero ops' verifiers share -----*- C++ -*-===//
//
// Shape text for messages and axis checks, shared by ZeroOps.cpp (state,
// layout, elementwise, contractions) and ZeroOpsTraining.cpp (the fused
// ops, attention, norms, losses, optimizers, collectives).
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_ZEROOPSSUPPORT_H
#define ZERO_ZEROOPSSUPPORT_H

#include "zero/ZeroOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace zcc::zero {
using namespace mlir;

inline std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleave(shape, os, "x");
  os << "]";
  return s;
}

inline std::string listStr(ArrayRef<int64_t> values) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(values, os);
  os << "]";
  return s;
}

inline RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Normalizes |axis| in [-rank, rank) to [0, rank).
inline FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return failure();
  return axis < 0 ? axis + rank : axis;
}

inline LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < 0 || axis >= rank)
    return op->emitOpError("axis ") << axis << " must be in [0, " << rank << ")";
  return success();
}

} // namespace zcc::zero

#endif // ZERO_ZEROOPSSUPPORT_H
