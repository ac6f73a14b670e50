//===- DType.h - the runtime's element types --------------------*- C++ -*-===//
//
// The element types of plan tensors, .npy data, kernel operands and
// collectives' buffers: the one list the runtime's layers share (the plan's
// own enum in plan.proto is mapped to it by PlanLoader; collectives move
// the subset CommType names, comm/Communicator.h).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_SUPPORT_DTYPE_H
#define ZRT_SUPPORT_DTYPE_H

#include <cstddef>

namespace zrt {

enum class DType { F32, F64, F16, BF16, I64, I32, U16, U8, Bool, I8 };

/// Size in bytes of one element of |dtype|.
inline size_t dtypeSize(DType d) {
  switch (d) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
  case DType::U16:
    return 2;
  case DType::U8:
  case DType::I8:
  case DType::Bool:
    return 1;
  }
  return 0;
}

/// NumPy's name ("float32", "int64", ...).
inline const char *dtypeName(DType d) {
  switch (d) {
  case DType::F32:
    return "float32";
  case DType::F64:
    return "float64";
  case DType::F16:
    return "float16";
  case DType::BF16:
    return "bfloat16";
  case DType::I64:
    return "int64";
  case DType::I32:
    return "int32";
  case DType::U16:
    return "uint16";
  case DType::U8:
    return "uint8";
  case DType::I8:
    return "int8";
  case DType::Bool:
    return "bool";
  }
  return "?";
}

} // namespace zrt

#endif // ZRT_SUPPORT_DTYPE_H
