//===- HostTensor.h - tensors evaluated at import time -----------*- C++ -*-===//
//
// The importer folds ONNX shape computation (Shape, Range, CumSum, masks, ...)
// on the host. HostTensor is the value it folds: a dense row-major tensor of
// an ONNX element type, kept as doubles for floating-point types and int64 for
// integer and boolean types (int64 keeps INT64_MAX slice bounds exact).
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_LIB_IMPORT_ONNX_HOSTTENSOR_H
#define ZCC_LIB_IMPORT_ONNX_HOSTTENSOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/MathExtras.h"

#include <cstdint>
#include <string>
#include <vector>

namespace onnx {
class NodeProto;
}

namespace zcc::onnx_import {

/// ONNX TensorProto.DataType values used by the importer.
enum OnnxType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kBfloat16 = 16,
};

bool isFloatType(int32_t onnxType);
/// Human-readable ONNX type name ("float", "int64", ...).
const char *onnxTypeName(int32_t onnxType);

struct HostTensor {
  int32_t type = kUndefined;
  llvm::SmallVector<int64_t> shape;
  std::vector<double> f;  // floating-point types
  std::vector<int64_t> i; // integer and bool types

  HostTensor() = default;
  HostTensor(int32_t type, llvm::ArrayRef<int64_t> shape);

  bool isFloat() const { return isFloatType(type); }
  int64_t numel() const;
  int64_t rank() const { return (int64_t)shape.size(); }
  /// Element |k| as double / int64 whatever the storage.
  double getF(int64_t k) const { return isFloat() ? f[k] : (double)i[k]; }
  int64_t getI(int64_t k) const { return isFloat() ? (int64_t)f[k] : i[k]; }
  void set(int64_t k, double v);
  /// All elements as int64 (for shape-like inputs).
  std::vector<int64_t> toInts() const;
  /// Returns this tensor converted to |newType| (ONNX Cast semantics).
  HostTensor cast(int32_t newType) const;
};

/// Result of trying to fold one node on constant inputs.
enum class FoldStatus { Folded, NotFoldable, Error };

/// Evaluates |node| on constant |inputs| (null for an omitted optional input)
/// at opset |opset|. On Folded, |outputs| holds one tensor per node output;
/// on Error, |error| says what is wrong with the node; NotFoldable means the
/// op has no host evaluator and must be imported as ops.
FoldStatus foldNode(const onnx::NodeProto &node, int64_t opset,
                    llvm::ArrayRef<const HostTensor *> inputs, std::vector<HostTensor> &outputs,
                    std::string &error);

/// NumPy broadcast of two shapes; false if incompatible.
bool broadcastShape(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b,
                    llvm::SmallVectorImpl<int64_t> &out);

/// Result shape of the view ops Reshape, Flatten, Squeeze and Unsqueeze of a
/// tensor of shape |in|; |arg| is the constant second input (target shape or
/// axes) if the node has one. False with |error| set on an invalid node.
bool inferViewShape(const onnx::NodeProto &node, llvm::ArrayRef<int64_t> in,
                    const std::vector<int64_t> *arg, llvm::SmallVectorImpl<int64_t> &out,
                    std::string &error);

/// Normalized ONNX Slice parameters for one tensor: per-dimension start, step
/// and element count (ONNX clamping rules applied; steps may be negative).
struct SliceParams {
  llvm::SmallVector<int64_t> start, step, count;
};
/// Computes SliceParams for |shape| from Slice's starts/ends/axes/steps.
bool computeSlice(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> starts,
                  llvm::ArrayRef<int64_t> ends, const std::vector<int64_t> *axes,
                  const std::vector<int64_t> *steps, SliceParams &out, std::string &error);

/// Largest element count zcc accepts for any tensor (2^48): far beyond any
/// real model, small enough that byte counts cannot overflow int64.
constexpr int64_t kMaxTensorElements = int64_t(1) << 48;

/// Element count of |shape|, or -1 if a dimension is negative or the count
/// exceeds kMaxTensorElements (malformed models must not overflow).
inline int64_t checkedNumel(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || llvm::MulOverflow(n, d, n) || n > kMaxTensorElements)
      return -1;
  }
  return n;
}

/// Normalizes a possibly negative |axis| against |rank|; false if out of range.
bool normalizeAxis(int64_t &axis, int64_t rank);

} // namespace zcc::onnx_import

#endif // ZCC_LIB_IMPORT_ONNX_HOSTTENSOR_H
