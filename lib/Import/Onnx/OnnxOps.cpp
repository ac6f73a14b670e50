//===- OnnxOps.cpp - ONNX ops to zero ops ---------------------------------===//
//
// One case per ONNX op whose result is not known at import. Attributes and
// constant inputs (axes, shapes, split sizes) are read here and become static
// attributes of the zero ops; a dynamic value where zcc needs a static one is
// an error that says so.
//
//===----------------------------------------------------------------------===//
#include "OnnxImporterImpl.h"

#include "llvm/ADT/StringSwitch.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

using namespace mlir;
using namespace zcc;
using namespace zcc::onnx_import;
namespace zero = zcc::zero;

namespace {
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
  LogicalResult groupNorm();
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
} // namespace

LogicalResult NodeEmitter::reduce(zero::ReduceKind kind) {
  Value x = in(0);
  int64_t rank = typeOf(x).getRank();
  // ReduceSum takes axes as an input from opset 13, the others from opset 18.
  auto axesOr = axesFrom(1);
  if (failed(axesOr))
    return failure();
  SmallVector<int64_t> axes;
  if (*axesOr && !(*axesOr)->empty()) {
    for (int64_t a : **axesOr) {
      if (!normalizeAxis(a, rank))
        return error() << "axis " << a << " is out of range for rank " << rank;
      if (!llvm::is_contained(axes, a))
        axes.push_back(a);
    }
    llvm::sort(axes);
  } else if (attrInt(node, "noop_with_empty_axes", 0)) {
    results.push_back(x);
    return success();
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  Value r = zero::ReduceOp::create(b, loc, kind, x, axes, attrInt(node, "keepdims", 1) != 0);
  // A sum of squares accumulates to float32; ONNX gives the input's type.
  if (auto want = typeOf(x).getElementType(); typeOf(r).getElementType() != want)
    r = zero::CastOp::create(b, loc, typeOf(r).clone(want), r);
  results.push_back(r);
  return success();
}

LogicalResult NodeEmitter::matmul() {
  Value l = in(0), r = in(1);
  if (failed(requireFloat(l)) || failed(requireFloat(r)))
    return failure();
  // NumPy matmul: a 1-D operand is a row (lhs) or column (rhs) vector whose
  // unit dimension is removed from the result.
  bool lhsVec = typeOf(l).getRank() == 1, rhsVec = typeOf(r).getRank() == 1;
  if (lhsVec)
    l = reshape(l, {1, typeOf(l).getDimSize(0)});
  if (rhsVec)
    r = reshape(r, {typeOf(r).getDimSize(0), 1});
  SmallVector<Type> inferred;
  if (failed(zero::MatmulOp::inferReturnTypes(b.getContext(), loc,
                                              zero::MatmulOp::Adaptor(ValueRange{l, r}), inferred)))
    return failure();
  Value y = zero::MatmulOp::create(b, loc, l, r, false, false);
  SmallVector<int64_t> shape(typeOf(y).getShape());
  if (rhsVec)
    shape.erase(shape.end() - 1);
  if (lhsVec)
    shape.erase(shape.end() - 1 - (rhsVec ? 0 : 1));
  results.push_back(reshape(y, shape));
  return success();
}

LogicalResult NodeEmitter::gemm() {
  Value a = in(0), bm = in(1);
  if (typeOf(a).getRank() != 2 || typeOf(bm).getRank() != 2)
    return error() << "A and B must be matrices, got " << a.getType() << " and " << bm.getType();
  if (failed(requireFloat(a)) || failed(requireFloat(bm)))
    return failure();
  if (typeOf(a).getElementType() != typeOf(bm).getElementType())
    return error() << "A and B element types differ: " << a.getType() << " and " << bm.getType();
  bool ta = attrInt(node, "transA", 0), tb = attrInt(node, "transB", 0);
  int64_t k1 = typeOf(a).getDimSize(ta ? 0 : 1), k2 = typeOf(bm).getDimSize(tb ? 1 : 0);
  if (k1 != k2)
    return error() << "inner dimensions differ: " << a.getType() << " x " << bm.getType();
  Value y = zero::MatmulOp::create(b, loc, a, bm, ta, tb);
  Type et = typeOf(y).getElementType();
  auto scalar = [&](float v) {
    return zero::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({}, et), b.getFloatAttr(et, v).getValue()));
  };
  float alpha = attrFloat(node, "alpha", 1.0f), beta = attrFloat(node, "beta", 1.0f);
  if (alpha != 1.0f)
    y = zero::MulOp::create(b, loc, y, scalar(alpha));
  if (has(2) && beta != 0.0f) {
    Value c = in(2);
    if (typeOf(c).getElementType() != et ||
        !zcc::zero::isBroadcastableTo(typeOf(c).getShape(), typeOf(y).getShape()))
      return error() << "C " << c.getType() << " does not broadcast to " << y.getType();
    if (beta != 1.0f)
      c = zero::MulOp::create(b, loc, c, scalar(beta));
    y = zero::AddOp::create(b, loc, y, c);
  }
  results.push_back(y);
  return success();
}

LogicalResult NodeEmitter::slice() {
  Value x = in(0);
  auto starts = constInts(1, "starts"), ends = constInts(2, "ends");
  if (failed(starts) || failed(ends))
    return failure();
  std::optional<std::vector<int64_t>> axes, steps;
  if (has(3)) {
    auto v = constInts(3, "axes");
    if (failed(v))
      return failure();
    axes = *v;
  }
  if (has(4)) {
    auto v = constInts(4, "steps");
    if (failed(v))
      return failure();
    steps = *v;
  }
  SliceParams p;
  std::string msg;
  if (!computeSlice(typeOf(x).getShape(), *starts, *ends, axes ? &*axes : nullptr,
                    steps ? &*steps : nullptr, p, msg))
    return error() << msg;
  SmallVector<int64_t> limit;
  for (size_t d = 0; d < p.start.size(); ++d) {
    if (p.step[d] < 0)
      return error() << "negative steps are supported only on constant tensors";
    limit.push_back(p.start[d] + (p.count[d] ? (p.count[d] - 1) * p.step[d] + 1 : 0));
  }
  results.push_back(zero::SliceOp::create(b, loc, x, b.getDenseI64ArrayAttr(p.start),
                                          b.getDenseI64ArrayAttr(limit),
                                          b.getDenseI64ArrayAttr(p.step)));
  return success();
}

LogicalResult NodeEmitter::split(bool toSequence) {
  Value x = in(0);
  auto type = typeOf(x);
  int64_t axis = attrInt(node, "axis", 0);
  if (!normalizeAxis(axis, type.getRank()))
    return error() << "axis " << attrInt(node, "axis", 0) << " is out of range for rank "
                   << type.getRank();
  int64_t dim = type.getDimSize(axis);
  SmallVector<int64_t> sizes;
  bool scalarChunk = false;
  if (has(1)) {
    auto v = constInts(1, "split");
    if (failed(v))
      return failure();
    scalarChunk = toSequence && inputs[1]->constant->rank() == 0;
    if (scalarChunk) {
      int64_t chunk = (*v)[0];
      if (chunk <= 0)
        return error() << "split size must be positive";
      for (int64_t s = 0; s < dim; s += chunk)
        sizes.push_back(std::min(chunk, dim - s));
    } else {
      sizes.assign(v->begin(), v->end());
    }
  } else if (auto a = attrInts(node, "split")) {
    sizes.assign(a->begin(), a->end());
  } else {
    int64_t n = toSequence ? dim : attrInt(node, "num_outputs", node.output_size());
    if (n <= 0)
      return error() << "cannot split into " << n << " parts";
    int64_t chunk = (dim + n - 1) / n;
    for (int64_t s = 0; s < dim; s += chunk)
      sizes.push_back(std::min(chunk, dim - s));
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      return error() << "split sizes must be non-negative, got " << s;
    total += s;
  }
  if (total != dim)
    return error() << "split sizes add up to " << total << ", the axis has " << dim;
  if (!toSequence && (int64_t)sizes.size() != node.output_size())
    return error() << "splits into " << sizes.size() << " parts but names " << node.output_size()
                   << " outputs";
  auto op =
      zero::SplitOp::create(b, loc, x, b.getI64IntegerAttr(axis), b.getDenseI64ArrayAttr(sizes));
  bool squeeze = toSequence && !has(1) && !attrInt(node, "keepdims", 1);
  for (Value v : op.getResults()) {
    if (squeeze) {
      SmallVector<int64_t> shape(typeOf(v).getShape());
      shape.erase(shape.begin() + axis);
      v = reshape(v, shape);
    }
    results.push_back(v);
  }
  return success();
}

LogicalResult NodeEmitter::layerNorm() {
  if (node.output_size() > 1)
    for (int k = 1; k < node.output_size(); ++k)
      if (!node.output(k).empty())
        return error() << "the Mean and InvStdDev outputs are not supported";
  Value x = in(0), scale = in(1);
  if (failed(requireFloat(x)))
    return failure();
  int64_t rank = typeOf(x).getRank(), axis = attrInt(node, "axis", -1);
  if (!normalizeAxis(axis, rank))
    return error() << "axis " << attrInt(node, "axis", -1) << " is out of range for rank " << rank;
  ArrayRef<int64_t> normShape = typeOf(x).getShape().drop_front(axis);
  auto fit = [&](Value p) -> FailureOr<Value> {
    // Scale and bias may be given in a broadcastable shape: expand them.
    if (!zcc::zero::isBroadcastableTo(typeOf(p).getShape(), normShape) &&
        !(typeOf(p).getNumElements() ==
          RankedTensorType::get(normShape, b.getF32Type()).getNumElements()))
      return error() << "scale/bias " << p.getType() << " do not match the normalized shape";
    if (typeOf(p).getNumElements() ==
        RankedTensorType::get(normShape, b.getF32Type()).getNumElements())
      return reshape(p, normShape);
    return Value(zero::ExpandOp::create(
        b, loc, RankedTensorType::get(normShape, typeOf(p).getElementType()), p));
  };
  auto s = fit(scale);
  if (failed(s))
    return failure();
  Value bias;
  if (has(2)) {
    auto bb = fit(in(2));
    if (failed(bb))
      return failure();
    bias = *bb;
  }
  results.push_back(
      zero::LayerNormOp::create(b, loc, x.getType(), x, *s, bias, b.getI64IntegerAttr(axis),
                                b.getF64FloatAttr(attrFloat(node, "epsilon", 1e-5f))));
  return success();
}

LogicalResult NodeEmitter::run() {
  const std::string &op = node.op_type();
  using K = zero::CmpPredicate;

  if (op == "Add")
    return binary<zero::AddOp>();
  if (op == "Sub")
    return binary<zero::SubOp>();
  if (op == "Mul")
    return binary<zero::MulOp>();
  if (op == "Div")
    return binary<zero::DivOp>();
  if (op == "Pow")
    return binary<zero::PowOp>();
  if (op == "And")
    return binary<zero::AndOp>();
  if (op == "Or")
    return binary<zero::OrOp>();
  if (op == "Max")
    return variadic<zero::MaxOp>();
  if (op == "Min")
    return variadic<zero::MinOp>();
  if (op == "Equal")
    return compare(K::eq);
  if (op == "IsNaN") { // x != x only for NaN (PyTorch's SDPA export guards softmax with it)
    Value x = in(0);
    if (failed(requireFloat(x)))
      return failure();
    results.push_back(zero::CmpOp::create(b, loc, K::ne, x, x));
    return success();
  }
  if (op == "Less")
    return compare(K::lt);
  if (op == "LessOrEqual")
    return compare(K::le);
  if (op == "Greater")
    return compare(K::gt);
  if (op == "GreaterOrEqual")
    return compare(K::ge);
  if (op == "Neg")
    return floatUnary<zero::NegOp>();
  if (op == "Abs")
    return floatUnary<zero::AbsOp>();
  if (op == "Exp")
    return floatUnary<zero::ExpOp>();
  if (op == "Log")
    return floatUnary<zero::LogOp>();
  if (op == "Sqrt")
    return floatUnary<zero::SqrtOp>();
  if (op == "Reciprocal")
    return floatUnary<zero::ReciprocalOp>();
  if (op == "Tanh")
    return floatUnary<zero::TanhOp>();
  if (op == "Erf")
    return floatUnary<zero::ErfOp>();
  if (op == "Sigmoid")
    return floatUnary<zero::SigmoidOp>();
  if (op == "Relu")
    return floatUnary<zero::ReluOp>();
  if (op == "Cos")
    return floatUnary<zero::CosOp>();
  if (op == "Sin")
    return floatUnary<zero::SinOp>();
  if (op == "Softmax" || op == "LogSoftmax") {
    Value x = in(0);
    if (failed(requireFloat(x)))
      return failure();
    int64_t axis = attrInt(node, "axis", -1);
    if (!normalizeAxis(axis, typeOf(x).getRank()))
      return error() << "axis " << attrInt(node, "axis", -1) << " is out of range";
    if (op == "Softmax")
      results.push_back(zero::SoftmaxOp::create(b, loc, x, b.getI64IntegerAttr(axis)));
    else
      results.push_back(zero::LogSoftmaxOp::create(b, loc, x, b.getI64IntegerAttr(axis)));
    return success();
  }
  if (op == "Not") {
    Value x = in(0);
    if (!typeOf(x).getElementType().isInteger(1))
      return error() << "expects a bool tensor, got " << x.getType();
    results.push_back(zero::NotOp::create(b, loc, x));
    return success();
  }
  if (op == "Gelu") {
    Value x = in(0);
    if (failed(requireFloat(x)))
      return failure();
    std::string approx = attrString(node, "approximate", "none");
    if (approx != "none" && approx != "tanh")
      return error() << "unknown approximate '" << approx << "' (none or tanh)";
    results.push_back(zero::GeluOp::create(
        b, loc, x, approx == "tanh" ? zero::GeluApprox::tanh : zero::GeluApprox::none));
    return success();
  }
  if (op == "Where") {
    Value c = in(0), l = in(1), r = in(2);
    if (!typeOf(c).getElementType().isInteger(1))
      return error() << "condition must be bool, got " << c.getType();
    SmallVector<Type> inferred;
    if (failed(zero::WhereOp::inferReturnTypes(
            b.getContext(), loc, zero::WhereOp::Adaptor(ValueRange{c, l, r}), inferred)))
      return failure();
    results.push_back(zero::WhereOp::create(b, loc, c, l, r));
    return success();
  }
  if (op == "Identity") {
    results.push_back(in(0));
    return success();
  }
  if (op == "Dropout") {
    // Inference mode (or ratio 0): the identity. Training mode: zero.dropout,
    // its mask from micro_step's "dropout_rng" input and a key of the node
    // (docs/models.md, "Dropout").
    if (node.output_size() > 1 && !node.output(1).empty())
      return error() << "the mask output of Dropout is not supported";
    double ratio = has(1) && inputs[1]->constant ? inputs[1]->constant->getF(0)
                                                 : attrFloat(node, "ratio", 0.5f);
    if (has(1) && !inputs[1]->constant)
      return error() << "the ratio of Dropout must be a constant";
    if (has(2) && !inputs[2]->constant)
      return error() << "training_mode of Dropout must be a constant (export with "
                        "model.train() or model.eval())";
    bool training = has(2) && inputs[2]->constant->getI(0);
    if (!training || ratio == 0) {
      results.push_back(in(0));
      return success();
    }
    if (!(ratio > 0 && ratio < 1))
      return error() << "ratio " << ratio << " is not in [0, 1)";
    // The exporter rounded the model's ratio (a Python float) to float32: its
    // shortest decimal is the ratio PyTorch scales by (0.1, not 0.1000000015).
    {
      char text[32];
      auto end = std::to_chars(text, text + sizeof text, (float)ratio).ptr;
      ratio = std::strtod(std::string(text, end).c_str(), nullptr);
    }
    Value x = in(0);
    if (!isa<FloatType>(typeOf(x).getElementType()))
      return error() << "Dropout of a non-float tensor";
    int64_t samples = imp.batchSamples;
    if (samples < 1 || typeOf(x).getNumElements() % samples != 0)
      samples = 1; // not batch-major: one run (the mask still trains; it depends on the world size)
    // FNV-1a of the output's name: stable across recompiles and exports.
    uint32_t key = 2166136261u;
    for (unsigned char ch : node.output(0))
      key = (key ^ ch) * 16777619u;
    Value rng = imp.dropoutRng(loc);
    if (!rng)
      return error() << "cannot add the dropout_rng input";
    results.push_back(zero::DropoutOp::create(b, loc, typeOf(x), x, rng, b.getF64FloatAttr(ratio),
                                              b.getI64IntegerAttr(key),
                                              b.getI64IntegerAttr(samples)));
    return success();
  }
  if (op == "Cast" || op == "CastLike") {
    Value x = in(0);
    Type et = op == "Cast" ? imp.elementType(attrInt(node, "to", kFloat))
                           : typeOf(in(1)).getElementType();
    if (!et)
      return error() << "unsupported target type " << onnxTypeName(attrInt(node, "to", kUndefined));
    auto t = RankedTensorType::get(typeOf(x).getShape(), et);
    results.push_back(t == x.getType() ? x : Value(zero::CastOp::create(b, loc, t, x)));
    return success();
  }
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
    Value x = in(0);
    std::optional<std::vector<int64_t>> arg;
    if (has(1)) {
      auto v = constInts(1, op == "Reshape" ? "the target shape" : "axes");
      if (failed(v))
        return failure();
      arg = *v;
    }
    SmallVector<int64_t> shape;
    std::string msg;
    if (!inferViewShape(node, typeOf(x).getShape(), arg ? &*arg : nullptr, shape, msg))
      return error() << msg << " (input " << x.getType() << ")";
    results.push_back(reshape(x, shape));
    return success();
  }
  if (op == "Transpose") {
    Value x = in(0);
    SmallVector<int64_t> perm;
    if (auto p = attrInts(node, "perm"))
      perm.assign(p->begin(), p->end());
    else
      for (int64_t d = typeOf(x).getRank() - 1; d >= 0; --d)
        perm.push_back(d);
    SmallVector<Type> inferred;
    auto attr = b.getDenseI64ArrayAttr(perm);
    zero::TransposeOp::Properties props;
    props.permutation = attr;
    if (failed(zero::TransposeOp::inferReturnTypes(
            b.getContext(), loc, zero::TransposeOp::Adaptor(ValueRange{x}, nullptr, props),
            inferred)))
      return failure();
    results.push_back(zero::TransposeOp::create(b, loc, x, attr));
    return success();
  }
  if (op == "Concat") {
    SmallVector<Value> xs;
    for (size_t k = 0; k < inputs.size(); ++k)
      if (has(k))
        xs.push_back(in(k));
    int64_t axis = attrInt(node, "axis", 0);
    int64_t rank = typeOf(xs[0]).getRank();
    if (!normalizeAxis(axis, rank))
      return error() << "axis " << attrInt(node, "axis", 0) << " is out of range";
    SmallVector<Type> inferred;
    zero::ConcatOp::Properties props;
    props.axis = b.getI64IntegerAttr(axis);
    if (failed(zero::ConcatOp::inferReturnTypes(
            b.getContext(), loc, zero::ConcatOp::Adaptor(xs, nullptr, props), inferred)))
      return failure();
    results.push_back(zero::ConcatOp::create(b, loc, xs, b.getI64IntegerAttr(axis)));
    return success();
  }
  if (op == "Split")
    return split(false);
  if (op == "SplitToSequence")
    return split(true);
  if (op == "Slice")
    return slice();
  if (op == "Gather") {
    Value x = in(0), idx = in(1);
    int64_t axis = attrInt(node, "axis", 0);
    if (!normalizeAxis(axis, typeOf(x).getRank()))
      return error() << "axis is out of range";
    if (failed(requireIndices(idx)))
      return failure();
    if (inputs[1]->constant) {
      // Constant indices are normalized here; runtime indices are checked by the runtime.
      int64_t dim = typeOf(x).getDimSize(axis);
      HostTensor norm = *inputs[1]->constant;
      for (int64_t &j : norm.i) {
        if (j < -dim || j >= dim)
          return error() << "index " << j << " is out of range for dimension " << dim;
        j = j < 0 ? j + dim : j;
      }
      // One constant position (W[e] of a stacked weight, as a mixture of
      // experts reads its experts): a slice, whose gradient is that block of
      // the table rather than a scatter into all of it.
      if (norm.shape.empty() && !imp.paddingIdx.count(node.input(0))) {
        ArrayRef<int64_t> shape = typeOf(x).getShape();
        SmallVector<int64_t> start(shape.size(), 0), limit(shape), step(shape.size(), 1), out;
        start[axis] = norm.i[0], limit[axis] = norm.i[0] + 1;
        for (size_t d = 0; d < shape.size(); ++d)
          if ((int64_t)d != axis)
            out.push_back(shape[d]);
        Value s =
            zero::SliceOp::create(b, loc, x, b.getDenseI64ArrayAttr(start),
                                  b.getDenseI64ArrayAttr(limit), b.getDenseI64ArrayAttr(step));
        results.push_back(reshape(s, out));
        return success();
      }
      idx = zero::ConstantOp::create(b, loc, imp.toAttr(norm));
    }
    auto gather = zero::GatherOp::create(b, loc, x, idx, b.getI64IntegerAttr(axis), nullptr);
    auto pad = imp.paddingIdx.find(node.input(0));
    if (pad != imp.paddingIdx.end()) {
      gather.setPaddingIdxAttr(b.getI64IntegerAttr(pad->second));
      imp.paddingUsed.insert(node.input(0));
    }
    results.push_back(gather);
    return success();
  }
  if (op == "Expand") {
    Value x = in(0);
    auto target = constInts(1, "the target shape");
    if (failed(target))
      return failure();
    for (int64_t d : *target)
      if (d < 0)
        return error() << "invalid target dimension " << d;
    auto shape = zcc::zero::broadcastShapes(typeOf(x).getShape(),
                                            SmallVector<int64_t>(target->begin(), target->end()));
    if (failed(shape))
      return error() << "cannot expand " << x.getType() << " to the shape of " << target->size()
                     << " dimensions given";
    if (checkedNumel(*shape) < 0)
      return error() << "the expanded tensor would be impossibly large";
    auto t = RankedTensorType::get(*shape, typeOf(x).getElementType());
    results.push_back(t == x.getType() ? x : Value(zero::ExpandOp::create(b, loc, t, x)));
    return success();
  }
  if (op == "MatMul")
    return matmul();
  if (op == "Gemm")
    return gemm();
  if (op == "LayerNormalization")
    return layerNorm();
  if (op == "ReduceMean")
    return reduce(zero::ReduceKind::mean);
  if (op == "ReduceSum")
    return reduce(zero::ReduceKind::sum);
  if (op == "ReduceMax")
    return reduce(zero::ReduceKind::max);
  if (op == "ReduceMin")
    return reduce(zero::ReduceKind::min);
  if (op == "ReduceProd")
    return reduce(zero::ReduceKind::prod);
  if (op == "ReduceSumSquare")
    return reduce(zero::ReduceKind::sum_squares);

  if (op == "Clip")
    return clip();
  if (op == "Softplus")
    return softplus();
  if (op == "Tile")
    return tile();
  if (op == "Pad")
    return pad();
  if (op == "Einsum")
    return einsum();
  if (op == "OneHot")
    return oneHot();
  if (op == "ScatterElements")
    return scatterElements();
  if (op == "CumSum")
    return cumSum();
  if (op == "ScatterND")
    return scatterND();
  if (op == "Mod")
    return mod();
  if (op == "Conv")
    return conv();
  if (op == "GroupNormalization")
    return groupNorm();
  if (op == "TopK")
    return topK();
  if (op == "ArgMax" || op == "ArgMin")
    return argExtreme(op == "ArgMax");
  if (op == "BatchNormalization")
    return batchNorm();

  // The rest (Shape, Range, GatherND, ...) only exist as constants.
  return error() << "needs inputs known at compile time, but '" << node.input(0)
                 << "' depends on the graph inputs or parameters";
}

LogicalResult OnnxImporter::emitNode(const onnx::NodeProto &node, SmallVectorImpl<Entry *> &inputs,
                                     SmallVectorImpl<Value> &results) {
  for (size_t k = 0; k < inputs.size(); ++k)
    if (!inputs[k] && k == 0)
      return nodeError(node) << "the first input must not be omitted";
  NodeEmitter emitter{*this, node, inputs, results, nodeLoc(node), builder};
  return emitter.run();
}

//===----------------------------------------------------------------------===//
// Ops made of other zero ops (their gradients are those ops')
//===----------------------------------------------------------------------===//

/// Clip: max(x, min) then min(·, max) (PyTorch's clamp: the gradient passes
/// where min <= x <= max). Bounds from inputs (opset 11+) or attributes.
LogicalResult NodeEmitter::clip() {
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  Type et = typeOf(x).getElementType();
  auto bound = [&](size_t k, const char *attr) -> Value {
    if (has(k)) {
      Value v = in(k);
      return typeOf(v).getRank() == 0 ? castTo(v, et) : Value();
    }
    if (findAttr(node, attr)) // opset < 11
      return splat(et, {}, attrFloat(node, attr, 0));
    return Value(); // no bound
  };
  Value lo = bound(1, "min"), hi = bound(2, "max");
  if ((has(1) && !lo) || (has(2) && !hi))
    return error() << "min and max must be scalars";
  Value y = x;
  if (lo)
    y = zero::MaxOp::create(b, loc, y, lo);
  if (hi)
    y = zero::MinOp::create(b, loc, y, hi);
  results.push_back(y);
  return success();
}

/// Softplus: log(1 + exp(x)), as max(x, 0) + log(1 + exp(-|x|)) (no
/// overflow for large x).
LogicalResult NodeEmitter::softplus() {
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  Type et = typeOf(x).getElementType();
  Value tail =
      zero::ExpOp::create(b, loc, zero::NegOp::create(b, loc, zero::AbsOp::create(b, loc, x)));
  tail = zero::LogOp::create(b, loc, zero::AddOp::create(b, loc, splat(et, {}, 1.0), tail));
  results.push_back(zero::AddOp::create(b, loc, zero::ReluOp::create(b, loc, x), tail));
  return success();
}

/// Tile: x [d0, d1, ...] as [1, d0, 1, d1, ...], expanded to
/// [r0, d0, r1, d1, ...] and read as [r0 d0, r1 d1, ...].
LogicalResult NodeEmitter::tile() {
  Value x = in(0);
  auto repeats = constInts(1, "repeats");
  if (failed(repeats))
    return failure();
  ArrayRef<int64_t> shape = typeOf(x).getShape();
  if (repeats->size() != shape.size())
    return error() << "repeats has " << repeats->size() << " values for a tensor of rank "
                   << shape.size();
  SmallVector<int64_t> split, expanded, out;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t r = (*repeats)[d];
    if (r < 1)
      return error() << "repeat " << r << " of dimension " << d << " is not positive";
    split.append({1, shape[d]});
    expanded.append({r, shape[d]});
    out.push_back(r * shape[d]);
  }
  if (checkedNumel(out) < 0)
    return error() << "the tiled tensor would be impossibly large";
  Value y = reshape(x, split);
  auto t = RankedTensorType::get(expanded, typeOf(x).getElementType());
  if (t != y.getType())
    y = zero::ExpandOp::create(b, loc, t, y);
  results.push_back(reshape(y, out));
  return success();
}

/// Pad (mode "constant"): negative pads slice, positive ones concatenate
/// constants of the pad value, one axis at a time.
LogicalResult NodeEmitter::pad() {
  Value x = in(0);
  std::string mode = attrString(node, "mode", "constant");
  if (mode != "constant")
    return error() << "mode '" << mode << "' is not supported (only 'constant'; reflect and "
                   << "edge padding are not implemented)";
  std::vector<int64_t> pads;
  if (has(1)) {
    auto v = constInts(1, "pads");
    if (failed(v))
      return failure();
    pads = *v;
  } else if (auto a = attrInts(node, "pads")) { // opset < 11
    pads = *a;
  }
  int64_t rank = typeOf(x).getRank();
  std::vector<int64_t> axes;
  if (has(3)) {
    auto v = constInts(3, "axes");
    if (failed(v))
      return failure();
    for (int64_t a : *v) {
      if (!normalizeAxis(a, rank))
        return error() << "axis " << a << " is out of range for rank " << rank;
      axes.push_back(a);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size())
    return error() << "pads has " << pads.size() << " values; " << 2 * axes.size()
                   << " expected (begin and end of each axis)";
  double value = 0;
  if (has(2)) {
    if (!inputs[2]->constant || inputs[2]->constant->numel() != 1)
      return error() << "constant_value must be a constant scalar";
    value = inputs[2]->constant->getF(0);
  } else {
    value = attrFloat(node, "value", 0.0f);
  }
  Type et = typeOf(x).getElementType();
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t axis = axes[k], before = pads[k], after = pads[k + axes.size()];
    SmallVector<int64_t> shape(typeOf(x).getShape());
    if (before < 0 || after < 0) { // crop first
      int64_t begin = std::max<int64_t>(0, -before),
              end = shape[axis] - std::max<int64_t>(0, -after);
      if (end <= begin)
        return error() << "pads crop all of axis " << axis;
      SmallVector<int64_t> start(rank, 0), limit(shape), step(rank, 1);
      start[axis] = begin, limit[axis] = end;
      x = zero::SliceOp::create(b, loc, x, b.getDenseI64ArrayAttr(start),
                                b.getDenseI64ArrayAttr(limit), b.getDenseI64ArrayAttr(step));
      shape[axis] = end - begin;
    }
    SmallVector<Value> parts;
    auto fill = [&](int64_t n) {
      SmallVector<int64_t> s(shape);
      s[axis] = n;
      parts.push_back(splat(et, s, value));
    };
    if (before > 0)
      fill(before);
    parts.push_back(x);
    if (after > 0)
      fill(after);
    if (parts.size() > 1)
      x = zero::ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(axis));
  }
  results.push_back(x);
  return success();
}

/// OneHot: where(unsqueeze(indices, axis) == range(depth), on, off), with
/// the range shaped to broadcast along |axis|. Indices must be in [0, depth)
/// (a negative one, which ONNX counts from the end, selects nothing).
LogicalResult NodeEmitter::oneHot() {
  Value idx = in(0);
  if (failed(requireIndices(idx)))
    return failure();
  if (!has(1) || !inputs[1]->constant || inputs[1]->constant->numel() != 1)
    return error() << "depth must be a constant scalar";
  int64_t depth = (int64_t)inputs[1]->constant->getF(0);
  if (depth < 1)
    return error() << "depth " << depth << " is not positive";
  Value values = in(2);
  if (typeOf(values).getNumElements() != 2)
    return error() << "values must hold [off, on], got " << values.getType();
  int64_t rank = typeOf(idx).getRank() + 1, axis = attrInt(node, "axis", -1);
  if (!normalizeAxis(axis, rank))
    return error() << "axis " << attrInt(node, "axis", -1) << " is out of range for rank " << rank;
  Value hit = oneHotMask(idx, axis, depth);
  auto pick = [&](int64_t k) {
    Value flat = reshape(values, {2});
    return reshape(zero::SliceOp::create(b, loc, flat, b.getDenseI64ArrayAttr({k}),
                                         b.getDenseI64ArrayAttr({k + 1}),
                                         b.getDenseI64ArrayAttr({1})),
                   {});
  };
  results.push_back(zero::WhereOp::create(b, loc, hit, pick(1), pick(0)));
  return success();
}

/// ScatterElements: each update compared with every position along |axis|
/// (a one-hot [indices..., n]), the hits summed over the indices' |axis| and
/// moved back into place; `add` adds the sums to the data, `none` replaces
/// the positions hit (ONNX leaves duplicate indices undefined for `none`:
/// here they add up). Integer tensors (torch.bincount's counts) are scattered
/// in float32, exact up to 2^24, and cast back. Indices and updates must span
/// the data along every other axis; negative indices count from the end.
LogicalResult NodeEmitter::scatterElements() {
  Value data = in(0), idx = in(1), upd = in(2);
  Type it = typeOf(idx).getElementType(), dt = typeOf(data).getElementType();
  if (failed(requireIndices(idx)))
    return failure();
  FailureOr<bool> adds = scatterAdds();
  if (failed(adds))
    return failure();
  if (typeOf(upd).getElementType() != dt || typeOf(upd).getShape() != typeOf(idx).getShape())
    return error() << "updates " << upd.getType() << " must have the data's element type and "
                   << "the indices' shape " << idx.getType();
  int64_t rank = typeOf(data).getRank(), axis = attrInt(node, "axis", 0);
  if (typeOf(idx).getRank() != rank)
    return error() << "indices " << idx.getType() << " must have the data's rank " << rank;
  if (!normalizeAxis(axis, rank))
    return error() << "axis " << attrInt(node, "axis", 0) << " is out of range for rank " << rank;
  ArrayRef<int64_t> ds = typeOf(data).getShape(), is = typeOf(idx).getShape();
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && is[d] != ds[d])
      return error() << "indices " << idx.getType() << " must span data " << data.getType()
                     << " along axis " << d << " (only the scatter axis " << axis << " may differ)";
  int64_t n = ds[axis];
  // Negative indices count from the end (not needed where the importer knows
  // they are not negative: a router's top-k positions).
  if (!(inputs[1]->range && inputs[1]->range->first >= 0)) {
    Value zeroI = splat(it, {}, 0), nI = splat(it, {}, (double)n);
    Value neg = zero::CmpOp::create(b, loc, zero::CmpPredicate::lt, idx, zeroI);
    idx = zero::WhereOp::create(b, loc, neg, zero::AddOp::create(b, loc, idx, nI), idx);
  }
  // hit[p..., j] = (idx[p...] == j), shape is + [n].
  SmallVector<int64_t> idxShape(is);
  idxShape.push_back(1);
  Value hit = oneHotMask(idx, rank, n);
  Type ft = isa<FloatType>(dt) ? dt : b.getF32Type();
  Value u = reshape(castTo(upd, ft), idxShape);
  Value contrib = zero::WhereOp::create(b, loc, hit, u, splat(ft, {}, 0));
  // Sum over the indices' |axis|, then put the new last dimension (n) there.
  auto sumAxis = [&](Value v) {
    Value s = zero::ReduceOp::create(b, loc, zero::ReduceKind::sum, v, {axis}, false);
    SmallVector<int64_t> perm;
    for (int64_t d = 0; d < rank; ++d)
      perm.push_back(d == axis ? rank - 1 : d < axis ? d : d - 1);
    return transposed(s, perm);
  };
  Value summed = sumAxis(contrib);
  Value x = castTo(data, ft), out;
  if (*adds) {
    out = zero::AddOp::create(b, loc, x, summed);
  } else {
    Value any = sumAxis(castTo(hit, ft));
    Value some = zero::CmpOp::create(b, loc, zero::CmpPredicate::gt, any, splat(ft, {}, 0));
    out = zero::WhereOp::create(b, loc, some, summed, x);
  }
  results.push_back(castTo(out, dt));
  return success();
}

/// Mod of tensors computed from the data: r = a - b x trunc(a / b), the
/// truncation a cast to int64 and back; with fmod = 0 (integers only, by the
/// ONNX rule) a remainder whose sign differs from the divisor's gets the
/// divisor added (Python's %). Integers are computed in float32: exact for
/// magnitudes below 2^24.
LogicalResult NodeEmitter::mod() {
  Value a = in(0), d = in(1);
  Type et = typeOf(a).getElementType();
  if (typeOf(d).getElementType() != et ||
      failed(zcc::zero::broadcastShapes(typeOf(a).getShape(), typeOf(d).getShape())))
    return error() << "operands " << a.getType() << " and " << d.getType()
                   << " must have one element type and broadcast";
  bool fmod = attrInt(node, "fmod", 0) != 0, isFloat = isa<FloatType>(et);
  if (isFloat && !fmod)
    return error() << "Mod of floating-point tensors needs fmod = 1 (the ONNX rule)";
  if (!isFloat && !et.isInteger(64) && !et.isInteger(32))
    return error() << "operates on float, int32 or int64 tensors, got " << a.getType();
  Type ft = isFloat ? et : b.getF32Type();
  Value x = castTo(a, ft), y = castTo(d, ft);
  Value q = zero::DivOp::create(b, loc, x, y);
  Value t = castTo(castTo(q, b.getI64Type()), ft);
  Value r = zero::SubOp::create(b, loc, x, zero::MulOp::create(b, loc, y, t));
  if (!fmod) {
    Value wrongSign = zero::CmpOp::create(b, loc, zero::CmpPredicate::lt,
                                          zero::MulOp::create(b, loc, r, y), splat(ft, {}, 0));
    r = zero::WhereOp::create(b, loc, wrongSign, zero::AddOp::create(b, loc, r, y), r);
  }
  results.push_back(castTo(r, et));
  return success();
}

/// ScatterND (reduction none or add): the data as [M, R] (M the positions its
/// first k dimensions index, R the rest), each index tuple as a linear
/// position (in float32, exact below 2^24), a one-hot [N, M] of the N updates'
/// positions, and the updates [N, R] scattered by one matmul (hitᵀ x
/// updates). `none` replaces the rows hit (duplicates, undefined in ONNX,
/// add up), `add` adds to them. Negative indices count from the end.
LogicalResult NodeEmitter::scatterND() {
  Value data = in(0), idx = in(1), upd = in(2);
  Type dt = typeOf(data).getElementType();
  if (failed(requireIndices(idx)))
    return failure();
  FailureOr<bool> adds = scatterAdds();
  if (failed(adds))
    return failure();
  ArrayRef<int64_t> ds = typeOf(data).getShape(), is = typeOf(idx).getShape(),
                    us = typeOf(upd).getShape();
  if (is.empty())
    return error() << "indices must have rank >= 1, got " << idx.getType();
  int64_t k = is.back(), rank = ds.size();
  if (k < 1 || k > rank)
    return error() << "indices' last dimension " << k << " must be in [1, " << rank << "]";
  SmallVector<int64_t> want(is.drop_back());
  want.append(ds.begin() + k, ds.end());
  if (us != ArrayRef<int64_t>(want) || typeOf(upd).getElementType() != dt)
    return error() << "updates " << upd.getType() << " must be indices' leading shape + data's "
                   << "trailing shape, of the data's element type";
  int64_t n = 1, m = 1, r = 1;
  for (int64_t d : is.drop_back())
    n *= d;
  for (int64_t d = 0; d < k; ++d)
    m *= ds[d];
  for (int64_t d = k; d < rank; ++d)
    r *= ds[d];
  if (m > (int64_t(1) << 24))
    return error() << "the " << m << " positions the indices address are more than 2^24";
  Type ft = isa<FloatType>(dt) ? dt : b.getF32Type();
  Type f32 = b.getF32Type();
  // Linear positions: sum_j (idx_j, from the end when negative) x stride_j.
  Value fi = reshape(castTo(idx, f32), {n, k});
  HostTensor dims(kFloat, {1, k}), strides(kFloat, {1, k});
  for (int64_t d = k - 1, stride = 1; d >= 0; stride *= ds[d], --d) {
    dims.set(d, (double)ds[d]);
    strides.set(d, (double)stride);
  }
  Value dimsV = zero::ConstantOp::create(b, loc, imp.toAttr(dims));
  Value neg = zero::CmpOp::create(b, loc, zero::CmpPredicate::lt, fi, splat(f32, {}, 0));
  fi = zero::WhereOp::create(b, loc, neg, zero::AddOp::create(b, loc, fi, dimsV), fi);
  Value lin =
      zero::MulOp::create(b, loc, fi, zero::ConstantOp::create(b, loc, imp.toAttr(strides)));
  lin = zero::ReduceOp::create(b, loc, zero::ReduceKind::sum, lin, {1}, true); // [n, 1]
  HostTensor range(kFloat, {1, m});
  for (int64_t j = 0; j < m; ++j)
    range.set(j, (double)j);
  Value hit = zero::CmpOp::create(b, loc, zero::CmpPredicate::eq, lin,
                                  zero::ConstantOp::create(b, loc, imp.toAttr(range))); // [n, m]
  Value hitF = castTo(hit, ft);
  Value u = reshape(castTo(upd, ft), {n, r});
  Value summed = zero::MatmulOp::create(b, loc, hitF, u, /*transpose_lhs=*/true, false); // [m, r]
  Value x = reshape(castTo(data, ft), {m, r}), out;
  if (*adds) {
    out = zero::AddOp::create(b, loc, x, summed);
  } else {
    Value any = zero::ReduceOp::create(b, loc, zero::ReduceKind::sum, hitF, {0}, false); // [m]
    Value some =
        zero::CmpOp::create(b, loc, zero::CmpPredicate::gt, reshape(any, {m, 1}), splat(ft, {}, 0));
    out = zero::WhereOp::create(b, loc, some, summed, x);
  }
  results.push_back(castTo(reshape(out, ds), dt));
  return success();
}

/// CumSum of a tensor computed from the data (a constant one is folded): a
/// log-step scan, ceil(log2 n) rounds of x + x shifted by 1, 2, 4, ... along
/// the axis (concatenations of zeros and slices, so the gradient follows);
/// `exclusive` shifts the result by one more, `reverse` shifts the other way.
/// Integers (OPT's positions from an attention mask) are summed in float32,
/// exact up to 2^24, and cast back. The sums associate differently from a
/// sequential loop: float results may differ from PyTorch's in the last bits.
LogicalResult NodeEmitter::cumSum() {
  Value x = in(0);
  Type et = typeOf(x).getElementType();
  auto axisV = constInts(1, "axis");
  if (failed(axisV))
    return failure();
  if (axisV->size() != 1)
    return error() << "axis must hold one value";
  int64_t rank = typeOf(x).getRank(), axis = (*axisV)[0];
  if (!normalizeAxis(axis, rank))
    return error() << "axis " << (*axisV)[0] << " is out of range for rank " << rank;
  bool reverse = attrInt(node, "reverse", 0) != 0, exclusive = attrInt(node, "exclusive", 0) != 0;
  Type ft = isa<FloatType>(et) ? et : b.getF32Type();
  if (!isa<FloatType>(et) && !et.isInteger(64) && !et.isInteger(32))
    return error() << "operates on float, int32 or int64 tensors, got " << x.getType();
  x = castTo(x, ft);
  ArrayRef<int64_t> shape = typeOf(x).getShape();
  int64_t n = shape[axis];
  // x shifted by s along the axis (towards the end, or the start if reverse),
  // zeros filling in.
  auto shifted = [&](Value v, int64_t s) -> Value {
    SmallVector<int64_t> zshape(shape), start(rank, 0), limit(shape), step(rank, 1);
    zshape[axis] = s;
    Value zeros = splat(ft, zshape, 0);
    if (reverse)
      start[axis] = s;
    else
      limit[axis] = n - s;
    Value kept = zero::SliceOp::create(b, loc, v, b.getDenseI64ArrayAttr(start),
                                       b.getDenseI64ArrayAttr(limit), b.getDenseI64ArrayAttr(step));
    SmallVector<Value> parts =
        reverse ? SmallVector<Value>{kept, zeros} : SmallVector<Value>{zeros, kept};
    return zero::ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(axis));
  };
  Value y = x;
  for (int64_t s = 1; s < n; s *= 2)
    y = zero::AddOp::create(b, loc, y, shifted(y, s));
  if (exclusive && n > 0)
    y = n == 1 ? splat(ft, shape, 0) : shifted(y, 1);
  results.push_back(castTo(y, et));
  return success();
}

/// Einsum: operands contracted pairwise, left to right, each pair as one
/// batched matmul ([batch, left, contracted] x [batch, contracted, right])
/// between transposes and reshapes; a label no later operand or the output
/// needs is summed first. Ellipses are labels of their own; a label repeated
/// within one operand (a diagonal) is refused.
LogicalResult NodeEmitter::einsum() {
  std::string eq;
  for (char c : attrString(node, "equation", ""))
    if (c != ' ')
      eq += c;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  SmallVector<std::string> terms;
  {
    SmallVector<StringRef> parts;
    StringRef(lhs).split(parts, ',');
    for (StringRef t : parts)
      terms.push_back(t.str());
  }
  size_t operands = 0;
  for (size_t k = 0; k < inputs.size(); ++k)
    operands += has(k);
  if (terms.size() != operands)
    return error() << "equation '" << eq << "' names " << terms.size() << " operands, the node has "
                   << operands;
  // Labels: letters, and '0' + k for the k-th dimension an ellipsis covers
  // (counted from the right, so that ellipses of different ranks align).
  SmallVector<Value> xs;
  SmallVector<std::string> labels;
  int64_t ellipsisRank = 0;
  auto expand = [&](const std::string &term, int64_t rank, std::string &out) -> bool {
    size_t dots = term.find("...");
    std::string named =
        dots == std::string::npos ? term : term.substr(0, dots) + term.substr(dots + 3);
    for (char c : named)
      if (!std::isalpha((unsigned char)c))
        return false;
    int64_t covered = dots == std::string::npos ? 0 : rank - (int64_t)named.size();
    if (covered < 0 || (dots == std::string::npos && (int64_t)named.size() != rank))
      return false;
    ellipsisRank = std::max(ellipsisRank, covered);
    if (dots == std::string::npos) {
      out = named;
      return true;
    }
    std::string e;
    for (int64_t k = covered - 1; k >= 0; --k)
      e += (char)('0' + k);
    out = term.substr(0, dots) + e + term.substr(dots + 3);
    return true;
  };
  for (size_t k = 0, t = 0; k < inputs.size(); ++k) {
    if (!has(k))
      continue;
    Value x = in(k);
    if (failed(requireFloat(x)))
      return failure();
    std::string l;
    if (!expand(terms[t], typeOf(x).getRank(), l))
      return error() << "operand " << t << " ('" << terms[t] << "') does not match its rank "
                     << typeOf(x).getRank();
    for (size_t i = 0; i < l.size(); ++i)
      if (l.find(l[i], i + 1) != std::string::npos)
        return error() << "label '" << l[i] << "' repeats within operand " << t
                       << " (diagonals are not supported)";
    xs.push_back(x);
    labels.push_back(l);
    ++t;
  }
  if (xs.size() > 1 && typeOf(xs[0]).getElementType() != typeOf(xs[1]).getElementType())
    return error() << "operand element types differ";
  // The output: given, or (NumPy's implicit form) the ellipsis then the
  // labels that appear once, in alphabetical order.
  std::string out;
  if (arrow != std::string::npos) {
    std::string given = eq.substr(arrow + 2);
    if (!expand(given,
                (int64_t)(given.find("...") == std::string::npos ? given.size()
                                                                 : given.size() - 3 + ellipsisRank),
                out))
      return error() << "the output '" << given << "' is not a list of labels";
  } else {
    for (int64_t k = ellipsisRank - 1; k >= 0; --k)
      out += (char)('0' + k);
    std::map<char, int> count;
    for (const std::string &l : labels)
      for (char c : l)
        count[c] += std::isalpha((unsigned char)c) ? 1 : 0;
    for (auto [c, n] : count)
      if (n == 1)
        out += c;
  }
  // Every label's size, checked across operands.
  std::map<char, int64_t> size;
  for (size_t t = 0; t < xs.size(); ++t)
    for (size_t i = 0; i < labels[t].size(); ++i) {
      int64_t d = typeOf(xs[t]).getDimSize(i);
      auto [it, fresh] = size.insert({labels[t][i], d});
      if (!fresh && it->second != d)
        return error() << "label '" << labels[t][i] << "' has sizes " << it->second << " and " << d
                       << " (broadcasting is not supported)";
    }
  for (char c : out)
    if (!size.count(c))
      return error() << "output label '" << c << "' is in no operand";
  auto shapeOf = [&](const std::string &l) {
    SmallVector<int64_t> s;
    for (char c : l)
      s.push_back(size[c]);
    return s;
  };
  // Sums over the labels of |l| not in |keep|.
  auto sumAway = [&](Value x, std::string &l, const std::string &keep) {
    SmallVector<int64_t> axes;
    std::string kept;
    for (size_t i = 0; i < l.size(); ++i)
      if (keep.find(l[i]) == std::string::npos)
        axes.push_back((int64_t)i);
      else
        kept += l[i];
    if (axes.empty())
      return x;
    l = kept;
    return Value(zero::ReduceOp::create(b, loc, zero::ReduceKind::sum, x, axes, false));
  };
  auto permutation = [](const std::string &from, const std::string &to) {
    SmallVector<int64_t> perm;
    for (char c : to)
      perm.push_back((int64_t)from.find(c));
    return perm;
  };
  auto product = [&](const std::string &l) {
    int64_t n = 1;
    for (char c : l)
      n *= size[c];
    return n;
  };
  Value acc = xs[0];
  std::string accLabels = labels[0];
  for (size_t t = 1; t <= xs.size(); ++t) {
    // What later operands and the output still need.
    std::string needed = out;
    for (size_t u = t + 1; u < xs.size(); ++u)
      needed += labels[u];
    if (t == xs.size()) {
      acc = sumAway(acc, accLabels, needed);
      break;
    }
    Value x = xs[t];
    std::string xl = labels[t];
    acc = sumAway(acc, accLabels, needed + xl);
    x = sumAway(x, xl, needed + accLabels);
    std::string batch, left, contract, right;
    for (char c : accLabels)
      (xl.find(c) == std::string::npos       ? left
       : needed.find(c) != std::string::npos ? batch
                                             : contract) += c;
    for (char c : xl)
      if (accLabels.find(c) == std::string::npos)
        right += c;
    Value a = reshape(transposed(acc, permutation(accLabels, batch + left + contract)),
                      {product(batch), product(left), product(contract)});
    Value m = reshape(transposed(x, permutation(xl, batch + contract + right)),
                      {product(batch), product(contract), product(right)});
    acc = zero::MatmulOp::create(b, loc, a, m, false, false);
    accLabels = batch + left + right;
    acc = reshape(acc, shapeOf(accLabels));
  }
  results.push_back(transposed(acc, permutation(accLabels, out)));
  return success();
}

/// Conv as a patch embedding (a vision transformer's): strides equal to the
/// kernel, no padding or dilation, one group. x [N, C, S1.., Sk] is cut into
/// patches ([N, S1/K1, .., C, K1, ..] as rows of C K1..Kk values), one
/// matmul with the weights [M, C K1..Kk] (+ bias), and laid back as
/// [N, M, S1/K1, ..].
LogicalResult NodeEmitter::conv() {
  Value x = in(0), w = in(1);
  if (failed(requireFloat(x)) || failed(requireFloat(w)))
    return failure();
  auto xt = typeOf(x), wt = typeOf(w);
  int64_t spatial = xt.getRank() - 2;
  if (spatial < 1 || wt.getRank() != xt.getRank())
    return error() << "expects x [N, C, spatial...] and w [M, C, kernel...], got " << x.getType()
                   << " and " << w.getType();
  SmallVector<int64_t> kernel(wt.getShape().drop_front(2));
  auto strides = attrInts(node, "strides"), pads = attrInts(node, "pads"),
       dilations = attrInts(node, "dilations");
  std::string autoPad = attrString(node, "auto_pad", "NOTSET");
  bool patches = attrInt(node, "group", 1) == 1 && (autoPad == "NOTSET" || autoPad == "VALID") &&
                 wt.getDimSize(1) == xt.getDimSize(1);
  for (int64_t d = 0; d < spatial && patches; ++d) {
    int64_t k = kernel[d], s = strides ? (*strides)[d] : 1;
    patches &= s == k && xt.getDimSize(2 + d) % k == 0 && (!dilations || (*dilations)[d] == 1) &&
               (!pads || ((*pads)[d] == 0 && (*pads)[d + spatial] == 0));
  }
  if (!patches)
    return error() << "only patch embeddings are supported (strides equal to the kernel "
                   << "size, no padding or dilation, one group, spatial sizes divisible by the "
                   << "kernel): general convolution is not implemented";
  int64_t n = xt.getDimSize(0), c = xt.getDimSize(1), m = wt.getDimSize(0);
  // x -> [N, C, S1/K1, K1, S2/K2, K2, ..] -> [N, S1/K1, S2/K2, .., C, K1, K2, ..]
  SmallVector<int64_t> cut = {n, c}, grid, permX = {0};
  for (int64_t d = 0; d < spatial; ++d) {
    cut.append({xt.getDimSize(2 + d) / kernel[d], kernel[d]});
    grid.push_back(xt.getDimSize(2 + d) / kernel[d]);
    permX.push_back(2 + 2 * d);
  }
  permX.push_back(1);
  for (int64_t d = 0; d < spatial; ++d)
    permX.push_back(3 + 2 * d);
  int64_t cells = 1, patch = c;
  for (int64_t d = 0; d < spatial; ++d)
    cells *= grid[d], patch *= kernel[d];
  Value rows = reshape(transposed(reshape(x, cut), permX), {n * cells, patch});
  Value y = zero::MatmulOp::create(b, loc, rows, reshape(w, {m, patch}), false, true);
  if (has(2)) {
    Value bias = in(2);
    if (typeOf(bias).getNumElements() != m)
      return error() << "bias " << bias.getType() << " does not have " << m << " values";
    y = zero::AddOp::create(b, loc, y, reshape(castTo(bias, typeOf(y).getElementType()), {m}));
  }
  // [N cells, M] -> [N, S1/K1, .., M] -> [N, M, S1/K1, ..]
  SmallVector<int64_t> out = {n}, permY = {0, spatial + 1};
  out.append(grid.begin(), grid.end());
  out.push_back(m);
  for (int64_t d = 0; d < spatial; ++d)
    permY.push_back(1 + d);
  results.push_back(transposed(reshape(y, out), permY));
  return success();
}

/// |v| ([C] values of channel axis 1) shaped to broadcast over |rank|
/// dimensions: [C, 1, ...].
static SmallVector<int64_t> channelShape(int64_t c, int64_t rank) {
  SmallVector<int64_t> s = {c};
  s.append(rank - 2, 1);
  return s;
}

/// GroupNormalization: x [N, C, ...] as [N, G, C/G ...], a layer norm over
/// the last axis (zero.layer_norm, unit scale), back to [N, C, ...], then
/// the per-channel scale and bias (opset 21; opset 18's per-group ones are
/// repeated over each group's channels).
LogicalResult NodeEmitter::groupNorm() {
  Value x = in(0), scale = in(1), bias = in(2);
  if (failed(requireFloat(x)))
    return failure();
  auto xt = typeOf(x);
  int64_t groups = attrInt(node, "num_groups", 0), rank = xt.getRank();
  if (rank < 3 || groups < 1 || xt.getDimSize(1) % groups != 0)
    return error() << "expects x [N, C, ...] with C divisible by num_groups " << groups << ", got "
                   << x.getType();
  int64_t n = xt.getDimSize(0), c = xt.getDimSize(1), per = xt.getNumElements() / (n * groups);
  Type et = xt.getElementType();
  Value grouped = reshape(x, {n, groups, per});
  Value normed = zero::LayerNormOp::create(b, loc, grouped.getType(), grouped,
                                           splat(et, {per}, 1.0), Value(), b.getI64IntegerAttr(2),
                                           b.getF64FloatAttr(attrFloat(node, "epsilon", 1e-5f)));
  Value y = reshape(normed, xt.getShape());
  auto perChannel = [&](Value p) -> FailureOr<Value> {
    int64_t k = typeOf(p).getNumElements();
    if (k == c)
      return reshape(castTo(p, et), channelShape(c, rank));
    if (k == groups) { // opset 18: one value per group
      Value g = reshape(castTo(p, et), {groups, 1});
      auto t = RankedTensorType::get({groups, c / groups}, et);
      return reshape(zero::ExpandOp::create(b, loc, t, g), channelShape(c, rank));
    }
    return error() << "scale/bias " << p.getType() << " hold neither " << c << " channels nor "
                   << groups << " groups";
  };
  auto s = perChannel(scale), bb = perChannel(bias);
  if (failed(s) || failed(bb))
    return failure();
  results.push_back(zero::AddOp::create(b, loc, zero::MulOp::create(b, loc, y, *s), *bb));
  return success();
}

/// BatchNormalization. Inference mode (the default, and an eval-mode
/// export): (x - mean) / sqrt(var + eps) * scale + bias with the given
/// statistics (frozen buffers). Training mode: the batch's statistics over
/// every axis but the channels (this rank's micro-batch, as PyTorch without
/// SyncBatchNorm); the running statistics outputs are refused: zcc does not
/// update buffers.
LogicalResult NodeEmitter::batchNorm() {
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  if (rank < 2)
    return error() << "expects x [N, C, ...], got " << x.getType();
  int64_t c = xt.getDimSize(1);
  Type et = xt.getElementType();
  double eps = attrFloat(node, "epsilon", 1e-5f);
  bool training = attrInt(node, "training_mode", 0) != 0;
  for (int k = 1; k < node.output_size(); ++k)
    if (!node.output(k).empty())
      return error() << "the running mean and variance outputs are not supported (zcc does not "
                        "update buffers): export in eval mode, whose statistics stay fixed";
  SmallVector<Value> params;
  for (size_t k = 1; k < 5; ++k) {
    Value p = in(k);
    if (typeOf(p).getNumElements() != c)
      return error() << "input " << k << " " << p.getType() << " does not hold " << c
                     << " channels";
    params.push_back(reshape(castTo(p, et), channelShape(c, rank)));
  }
  Value y;
  if (training) {
    // Channels first, everything else as one row: [C, N S], a layer norm per
    // row (unit scale), back.
    SmallVector<int64_t> perm = {1, 0};
    for (int64_t d = 2; d < rank; ++d)
      perm.push_back(d);
    Value t = transposed(x, perm);
    int64_t rest = xt.getNumElements() / c;
    Value rows = reshape(t, {c, rest});
    Value normed =
        zero::LayerNormOp::create(b, loc, rows.getType(), rows, splat(et, {rest}, 1.0), Value(),
                                  b.getI64IntegerAttr(1), b.getF64FloatAttr(eps));
    y = transposed(reshape(normed, typeOf(t).getShape()), perm); // {1, 0, ...} is its own inverse
  } else {
    Value inv =
        zero::RsqrtOp::create(b, loc, zero::AddOp::create(b, loc, params[3], splat(et, {}, eps)));
    y = zero::MulOp::create(b, loc, zero::SubOp::create(b, loc, x, params[2]), inv);
  }
  results.push_back(
      zero::AddOp::create(b, loc, zero::MulOp::create(b, loc, y, params[0]), params[1]));
  return success();
}

/// k rounds along |axis| of x (of -x unless |largest|): each finds the
/// extreme, the first position holding it (the last with |last|), the value
/// there as a masked sum (so that the gradient goes to that position only:
/// where and sum have gradients, the selection needs none), and masks the
/// position out for the next round. Positions are float (exact below 2^24),
/// each of x's shape with 1 at |axis|.
void NodeEmitter::selectRounds(Value x, int64_t axis, int64_t k, bool largest, bool last,
                               SmallVectorImpl<Value> &values, SmallVectorImpl<Value> &positions) {
  auto xt = typeOf(x);
  Type et = xt.getElementType();
  int64_t n = xt.getDimSize(axis), rank = xt.getRank();
  SmallVector<int64_t> rangeShape(rank, 1);
  rangeShape[axis] = n;
  HostTensor range(kFloat, {n});
  for (int64_t j = 0; j < n; ++j)
    range.set(j, (double)j);
  Value positionsOf =
      castTo(reshape(zero::ConstantOp::create(b, loc, imp.toAttr(range)), rangeShape), et);
  Value scores = largest ? x : Value(zero::NegOp::create(b, loc, x));
  for (int64_t j = 0; j < k; ++j) {
    Value best = zero::ReduceOp::create(b, loc, zero::ReduceKind::max, scores, {axis}, true);
    Value atBest = zero::CmpOp::create(b, loc, zero::CmpPredicate::eq, scores, best);
    Value candidates =
        zero::WhereOp::create(b, loc, atBest, positionsOf, splat(et, {}, last ? -1.0 : (double)n));
    Value position = zero::ReduceOp::create(
        b, loc, last ? zero::ReduceKind::max : zero::ReduceKind::min, candidates, {axis}, true);
    Value hit = zero::CmpOp::create(b, loc, zero::CmpPredicate::eq, positionsOf, position);
    values.push_back(zero::ReduceOp::create(
        b, loc, zero::ReduceKind::sum, zero::WhereOp::create(b, loc, hit, x, splat(et, {}, 0.0)),
        {axis}, true));
    positions.push_back(position);
    if (j + 1 < k)
      scores = zero::WhereOp::create(b, loc, hit, splat(et, {}, -INFINITY), scores);
  }
}

/// TopK: values and int64 indices, sorted, ties to the lower index (ONNX's
/// order), by k rounds of selectRounds: for the small k of a router (top-2
/// of 8 experts), not for sorting a vocabulary.
LogicalResult NodeEmitter::topK() {
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  auto kv = constInts(1, "K");
  if (failed(kv))
    return failure();
  if (kv->size() != 1)
    return error() << "K must hold one value";
  int64_t rank = typeOf(x).getRank(), axis = attrInt(node, "axis", -1), k = (*kv)[0];
  if (!normalizeAxis(axis, rank))
    return error() << "axis " << attrInt(node, "axis", -1) << " is out of range for rank " << rank;
  int64_t n = typeOf(x).getDimSize(axis);
  if (k < 1 || k > n)
    return error() << "K " << k << " is not in [1, " << n << "]";
  if (k > 64)
    return error() << "K " << k << " is more than 64: TopK is built from K rounds of a max, for "
                   << "the small K of a router";
  if (!attrInt(node, "sorted", 1))
    return error() << "sorted = 0 is not supported";
  SmallVector<Value> values, positions;
  selectRounds(x, axis, k, attrInt(node, "largest", 1) != 0, false, values, positions);
  auto join = [&](SmallVector<Value> &parts) -> Value {
    return parts.size() == 1
               ? parts[0]
               : Value(zero::ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(axis)));
  };
  results.push_back(join(values));
  results.push_back(castTo(join(positions), b.getI64Type()));
  return success();
}

/// ArgMax / ArgMin: one round of selectRounds, int64.
LogicalResult NodeEmitter::argExtreme(bool max) {
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  int64_t rank = typeOf(x).getRank(), axis = attrInt(node, "axis", 0);
  if (!normalizeAxis(axis, rank))
    return error() << "axis " << attrInt(node, "axis", 0) << " is out of range for rank " << rank;
  SmallVector<Value> values, positions;
  selectRounds(x, axis, 1, max, attrInt(node, "select_last_index", 0) != 0, values, positions);
  Value idx = castTo(positions[0], b.getI64Type());
  if (!attrInt(node, "keepdims", 1)) {
    SmallVector<int64_t> shape(typeOf(idx).getShape());
    shape.erase(shape.begin() + axis);
    idx = reshape(idx, shape);
  }
  results.push_back(idx);
  return success();
}
