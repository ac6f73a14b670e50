//===- OnnxOps.cpp - ONNX ops to zero ops ---------------------------------===//
//
// One case per ONNX op whose result is not known at import. Attributes and
// constant inputs (axes, shapes, split sizes) are read here and become static
// attributes of the zero ops; a dynamic value where zcc needs a static one is
// an error that says so.
//
//===----------------------------------------------------------------------===//
#include "OnnxNodeEmitter.h"

#include "llvm/ADT/StringMap.h"

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

/// x != x: true only for NaN (PyTorch's SDPA export guards softmax with it).
LogicalResult NodeEmitter::isNaN() { //
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  results.push_back(zero::CmpOp::create(b, loc, zero::CmpPredicate::ne, x, x));
  return success();
}

LogicalResult NodeEmitter::softmax(bool log) {
  Value x = in(0);
  if (failed(requireFloat(x)))
    return failure();
  int64_t axis = attrInt(node, "axis", -1);
  if (!normalizeAxis(axis, typeOf(x).getRank()))
    return error() << "axis " << attrInt(node, "axis", -1) << " is out of range";
  if (!log)
    results.push_back(zero::SoftmaxOp::create(b, loc, x, b.getI64IntegerAttr(axis)));
  else
    results.push_back(zero::LogSoftmaxOp::create(b, loc, x, b.getI64IntegerAttr(axis)));
  return success();
}

LogicalResult NodeEmitter::logicalNot() {
  Value x = in(0);
  if (!typeOf(x).getElementType().isInteger(1))
    return error() << "expects a bool tensor, got " << x.getType();
  results.push_back(zero::NotOp::create(b, loc, x));
  return success();
}

LogicalResult NodeEmitter::gelu() {
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

LogicalResult NodeEmitter::where() {
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

LogicalResult NodeEmitter::identity() {
  results.push_back(in(0));
  return success();
}

LogicalResult NodeEmitter::dropout() {
  // Inference mode (or ratio 0): the identity. Training mode: zero.dropout,
  // its mask from micro_step's "dropout_rng" input and a key of the node
  // (docs/models.md, "Dropout").
  if (node.output_size() > 1 && !node.output(1).empty())
    return error() << "the mask output of Dropout is not supported";
  double ratio =
      has(1) && inputs[1]->constant ? inputs[1]->constant->getF(0) : attrFloat(node, "ratio", 0.5f);
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

LogicalResult NodeEmitter::castNode() {
  Value x = in(0);
  Type et = node.op_type() == "Cast" ? imp.elementType(attrInt(node, "to", kFloat))
                                     : typeOf(in(1)).getElementType();
  if (!et)
    return error() << "unsupported target type " << onnxTypeName(attrInt(node, "to", kUndefined));
  auto t = RankedTensorType::get(typeOf(x).getShape(), et);
  results.push_back(t == x.getType() ? x : Value(zero::CastOp::create(b, loc, t, x)));
  return success();
}

LogicalResult NodeEmitter::view() {
  Value x = in(0);
  std::optional<std::vector<int64_t>> arg;
  if (has(1)) {
    auto v = constInts(1, node.op_type() == "Reshape" ? "the target shape" : "axes");
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

LogicalResult NodeEmitter::transpose() {
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

LogicalResult NodeEmitter::concat() {
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

LogicalResult NodeEmitter::gather() {
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
      Value s = zero::SliceOp::create(b, loc, x, b.getDenseI64ArrayAttr(start),
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

LogicalResult NodeEmitter::expand() {
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

LogicalResult NodeEmitter::foldOnly() {
  return error() << "needs inputs known at compile time, but '" << node.input(0)
                 << "' depends on the graph inputs or parameters";
}

LogicalResult NodeEmitter::run() {
  using Emit = LogicalResult (*)(NodeEmitter &);
  static const llvm::StringMap<Emit> emitters = [] {
    llvm::StringMap<Emit> table;
#define ONNX_OP(NAME, MIN_INPUTS, MAX_INPUTS, EMIT)                                                \
  table[#NAME] = [](NodeEmitter &e) { return e.EMIT; };
#include "OnnxOps.def"
    return table;
  }();
  auto it = emitters.find(node.op_type());
  if (it == emitters.end()) // importNode checked the op against the same table
    return error() << "unsupported op '" << node.op_type() << "'";
  return it->second(*this);
}

LogicalResult OnnxImporter::emitNode(const onnx::NodeProto &node, SmallVectorImpl<Entry *> &inputs,
                                     SmallVectorImpl<Value> &results) {
  for (size_t k = 0; k < inputs.size(); ++k)
    if (!inputs[k] && k == 0)
      return nodeError(node) << "the first input must not be omitted";
  NodeEmitter emitter{*this, node, inputs, results, nodeLoc(node), builder};
  return emitter.run();
}
