//===- OnnxNodeEmitter.h - one ONNX node to zero ops -------------*- C++ -*-===//
//
// The translation context of one node (OnnxOps.cpp dispatches on the op
// through OnnxOps.def; the emitters live in OnnxOps.cpp, OnnxOpsComposite.cpp
// and OnnxEinsum.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_LIB_IMPORT_ONNX_ONNXNODEEMITTER_H
#define ZCC_LIB_IMPORT_ONNX_ONNXNODEEMITTER_H

#include "OnnxImporterImpl.h"

#include <optional>
#include <string>
#include <vector>

namespace zcc::onnx_import {
namespace zero = zcc::zero;

/// Translation context of one node.
struct NodeEmitter {
  OnnxImporter &imp;
  const onnx::NodeProto &node;
  SmallVectorImpl<Entry *> &inputs;
  SmallVectorImpl<Value> &results;
  Location loc;
  OpBuilder &b;

  InFlightDiagnostic error() { return imp.nodeError(node); }
  bool has(size_t k) const { return k < inputs.size() && inputs[k]; }
  Value in(size_t k) { return imp.materialize(*inputs[k], loc); }
  RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

  /// The constant integer contents of input |k|, or failure with a message
  /// naming |what|.
  FailureOr<std::vector<int64_t>> constInts(size_t k, StringRef what) {
    if (!has(k) || !inputs[k]->constant) {
      error() << what << " (input " << k << ") must be known at compile time; zcc "
              << "compiles static shapes (bind symbolic dimensions with --micro-batch "
              << "or --input-shape)";
      return failure();
    }
    return inputs[k]->constant->toInts();
  }

  /// Axes from the `axes` attribute (older opsets) or input |k| (newer ones).
  FailureOr<std::optional<std::vector<int64_t>>> axesFrom(size_t k) {
    if (auto a = attrInts(node, "axes"))
      return std::optional<std::vector<int64_t>>(*a);
    if (has(k)) {
      auto v = constInts(k, "axes");
      if (failed(v))
        return failure();
      return std::optional<std::vector<int64_t>>(*v);
    }
    return std::optional<std::vector<int64_t>>();
  }

  Value reshape(Value v, ArrayRef<int64_t> shape) {
    auto t = RankedTensorType::get(shape, typeOf(v).getElementType());
    if (t == v.getType())
      return v;
    return zero::ReshapeOp::create(b, loc, t, v);
  }

  /// Gather, OneHot and the scatters take int32 or int64 positions.
  LogicalResult requireIndices(Value idx) {
    Type it = typeOf(idx).getElementType();
    if (!it.isInteger(64) && !it.isInteger(32))
      return error() << "indices must be int32 or int64, got " << idx.getType();
    return success();
  }
  /// The scatters' `reduction`: true for add, false for none (others refused).
  FailureOr<bool> scatterAdds() {
    std::string reduction = attrString(node, "reduction", "none");
    if (reduction != "none" && reduction != "add")
      return error() << "reduction '" << reduction << "' is not supported (none and add are)";
    return reduction == "add";
  }

  LogicalResult requireFloat(Value v) {
    if (!isa<FloatType>(typeOf(v).getElementType()))
      return error() << "operates on floating-point tensors only, got " << v.getType();
    return success();
  }

  template <typename OpTy> LogicalResult binary() {
    Value l = in(0), r = in(1);
    if (typeOf(l).getElementType() != typeOf(r).getElementType()) {
      // ONNX Pow allows an exponent of another type: convert it.
      if (node.op_type() != "Pow")
        return error() << "operand element types differ: " << l.getType() << " and " << r.getType();
      r = zero::CastOp::create(
          b, loc, RankedTensorType::get(typeOf(r).getShape(), typeOf(l).getElementType()), r);
    }
    if (failed(zcc::zero::broadcastShapes(typeOf(l).getShape(), typeOf(r).getShape())))
      return error() << "operand shapes " << l.getType() << " and " << r.getType()
                     << " do not broadcast";
    results.push_back(OpTy::create(b, loc, l, r));
    return success();
  }

  template <typename OpTy> LogicalResult variadic() {
    Value acc = in(0);
    for (size_t k = 1; k < inputs.size(); ++k) {
      Value r = in(k);
      if (failed(zcc::zero::broadcastShapes(typeOf(acc).getShape(), typeOf(r).getShape())) ||
          typeOf(acc).getElementType() != typeOf(r).getElementType())
        return error() << "operands " << acc.getType() << " and " << r.getType()
                       << " do not broadcast";
      acc = OpTy::create(b, loc, acc, r);
    }
    results.push_back(acc);
    return success();
  }

  LogicalResult compare(zero::CmpPredicate pred) {
    Value l = in(0), r = in(1);
    if (typeOf(l).getElementType() != typeOf(r).getElementType() ||
        failed(zcc::zero::broadcastShapes(typeOf(l).getShape(), typeOf(r).getShape())))
      return error() << "operands " << l.getType() << " and " << r.getType()
                     << " must have one element type and broadcast";
    results.push_back(zero::CmpOp::create(b, loc, pred, l, r));
    return success();
  }

  template <typename OpTy> LogicalResult floatUnary() {
    Value x = in(0);
    if (failed(requireFloat(x)))
      return failure();
    results.push_back(OpTy::create(b, loc, x));
    return success();
  }

  // One per ONNX op or family (OnnxOps.def says which op takes which).
  LogicalResult isNaN();
  LogicalResult softmax(bool log);
  LogicalResult logicalNot();
  LogicalResult gelu();
  LogicalResult where();
  LogicalResult identity();
  LogicalResult dropout();
  LogicalResult castNode();
  LogicalResult view();
  LogicalResult transpose();
  LogicalResult concat();
  LogicalResult gather();
  LogicalResult expand();
  /// Ops zcc only evaluates at compile time (Shape, Range, ...): an error
  /// where an input is not known then.
  LogicalResult foldOnly();
  LogicalResult reduce(zero::ReduceKind kind);
  LogicalResult matmul();
  LogicalResult gemm();
  LogicalResult slice();
  LogicalResult split(bool toSequence);
  LogicalResult layerNorm();
  LogicalResult clip();
  LogicalResult softplus();
  LogicalResult tile();
  LogicalResult pad();
  LogicalResult einsum();
  LogicalResult oneHot();
  LogicalResult scatterElements();
  LogicalResult cumSum();
  LogicalResult scatterND();
  LogicalResult mod();
  LogicalResult conv();
  LogicalResult convGeneral();
  LogicalResult convTranspose();
  LogicalResult pool(bool max);
  LogicalResult globalPool(bool max);
  LogicalResult groupNorm(bool instance);
  LogicalResult resize();
  /// The slices of |x| at constant positions |rows| along |axis| (a
  /// zero.gather; its gradient adds each row's back where it was read).
  Value takeAlong(Value x, int64_t axis, ArrayRef<int64_t> rows);
  LogicalResult batchNorm();
  LogicalResult topK();
  LogicalResult argExtreme(bool max);
  void selectRounds(Value x, int64_t axis, int64_t k, bool largest, bool last,
                    SmallVectorImpl<Value> &values, SmallVectorImpl<Value> &positions);
  LogicalResult run();

  /// A constant of |shape| filled with |v|.
  Value splat(Type et, ArrayRef<int64_t> shape, double v) {
    auto t = RankedTensorType::get(shape, et);
    Attribute a = isa<FloatType>(et) ? Attribute(b.getFloatAttr(et, v))
                                     : Attribute(b.getIntegerAttr(et, (int64_t)v));
    return zero::ConstantOp::create(b, loc, DenseElementsAttr::get(t, a));
  }
  /// (unsqueeze(idx, axis) == j) for j in [0, depth) along the new |axis|.
  Value oneHotMask(Value idx, int64_t axis, int64_t depth) {
    Type it = typeOf(idx).getElementType();
    SmallVector<int64_t> idxShape(typeOf(idx).getShape());
    idxShape.insert(idxShape.begin() + axis, 1);
    SmallVector<int64_t> rangeShape(idxShape.size(), 1);
    rangeShape[axis] = depth;
    HostTensor range(it.isInteger(64) ? kInt64 : kInt32, {depth});
    for (int64_t k = 0; k < depth; ++k)
      range.set(k, (double)k);
    Value r = reshape(zero::ConstantOp::create(b, loc, imp.toAttr(range)), rangeShape);
    return zero::CmpOp::create(b, loc, zero::CmpPredicate::eq, reshape(idx, idxShape), r);
  }
  /// |v| with its dimensions permuted (itself for the identity).
  Value transposed(Value v, ArrayRef<int64_t> perm) {
    bool identity = true;
    for (size_t k = 0; k < perm.size(); ++k)
      identity &= perm[k] == (int64_t)k;
    if (identity)
      return v;
    return zero::TransposeOp::create(b, loc, v, b.getDenseI64ArrayAttr(perm));
  }
  /// |v| cast to element type |et| (itself if it has it).
  Value castTo(Value v, Type et) {
    if (typeOf(v).getElementType() == et)
      return v;
    return zero::CastOp::create(b, loc, typeOf(v).clone(et), v);
  }
};

} // namespace zcc::onnx_import

#endif // ZCC_LIB_IMPORT_ONNX_ONNXNODEEMITTER_H
