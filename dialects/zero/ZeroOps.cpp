//===- ZeroOps.cpp - zero dialect operations ------------------------------===//
//
// Verifiers, result-type inference and folders. Shape rules follow NumPy and
// ONNX, so that a verified module means the same thing the ONNX graph meant.
//
//===----------------------------------------------------------------------===//
#include "zero/ZeroOps.h"
#include "kernels/KernelId.h"
#include "support/Shape.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace zcc::zero;

//===----------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<int64_t>> zcc::zero::broadcastShapes(ArrayRef<int64_t> lhs,
                                                           ArrayRef<int64_t> rhs) {
  SmallVector<int64_t> out;
  if (!zrt::broadcastShapes(lhs, rhs, out))
    return failure();
  return out;
}

int64_t zcc::zero::gradAccumSteps(Operation *module) {
  auto training = module->getAttrOfType<DictionaryAttr>("zero.training");
  auto steps = training ? training.getAs<FloatAttr>("grad_accum_steps") : FloatAttr();
  return steps ? (int64_t)steps.getValueAsDouble() : 0;
}

bool zcc::zero::isBroadcastableTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i])
      return false;
  return true;
}

static std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleave(shape, os, "x");
  os << "]";
  return s;
}

static std::string listStr(ArrayRef<int64_t> values) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(values, os);
  os << "]";
  return s;
}

static RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Normalizes |axis| in [-rank, rank) to [0, rank).
static FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return failure();
  return axis < 0 ? axis + rank : axis;
}

/// Infers the broadcast result of an elementwise op over |operands|, with
/// element type |elementType| (or the first operand's if null).
static LogicalResult inferBroadcast(std::optional<Location> loc, ValueRange operands,
                                    Type elementType, SmallVectorImpl<Type> &inferred) {
  SmallVector<int64_t> shape;
  Type commonElement;
  for (Value v : operands) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type)
      return emitOptionalError(loc, "operands must be ranked tensors");
    auto b = broadcastShapes(shape, type.getShape());
    if (failed(b))
      return emitOptionalError(loc, "operand shapes ", shapeStr(shape), " and ",
                               shapeStr(type.getShape()), " are not broadcast-compatible");
    shape = *b;
    if (commonElement && commonElement != type.getElementType())
      return emitOptionalError(loc, "operand element types differ: ", commonElement, " vs ",
                               type.getElementType());
    commonElement = type.getElementType();
  }
  inferred.push_back(RankedTensorType::get(shape, elementType ? elementType : commonElement));
  return success();
}

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

LogicalResult GlobalOp::verify() {
  if (auto shardOf = getShardOf()) {
    int64_t n = getTensorType().getNumElements();
    if (getTensorType().getRank() != 1 || *shardOf < n || n <= 0 || *shardOf % n)
      return emitOpError("a shard must be 1-D with a number of elements that divides shard_of (")
             << *shardOf << "), got " << getType();
    if (auto init = getInitialValueAttr())
      if (cast<ShapedType>(init.getType()).getNumElements() != *shardOf ||
          cast<ShapedType>(init.getType()).getElementType() != getTensorType().getElementType())
        return emitOpError("the initial value of a shard holds all ")
               << *shardOf << " elements, got " << init.getType();
  } else if (auto init = getInitialValueAttr()) {
    if (init.getType() != getType())
      return emitOpError("initial value type ")
             << init.getType() << " does not match the global's type " << getType();
  }
  if ((bool)getBucket() != getBucketOffset().has_value())
    return emitOpError("bucket and bucket_offset go together");
  if (getBucketOffset() && *getBucketOffset() < 0)
    return emitOpError("bucket_offset must be >= 0");
  if (getTrainable() && !isa<FloatType>(getTensorType().getElementType()))
    return emitOpError("a trainable global must have a floating-point type, got ") << getType();
  return success();
}

/// Looks up the global named by |user|'s symbol and checks its type.
static LogicalResult verifyGlobalUse(Operation *user, FlatSymbolRefAttr sym, Type type,
                                     SymbolTableCollection &symbolTable) {
  auto global = symbolTable.lookupNearestSymbolFrom<GlobalOp>(user, sym.getAttr());
  if (!global)
    return user->emitOpError("refers to '") << sym.getValue() << "', which is not a zero.global";
  if (global.getType() != type)
    return user->emitOpError("type ") << type << " does not match global '" << sym.getValue()
                                      << "' of type " << global.getType();
  return success();
}

LogicalResult LoadOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyGlobalUse(*this, getGlobalAttr(), getType(), symbolTable);
}

LogicalResult StoreOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyGlobalUse(*this, getGlobalAttr(), getValue().getType(), symbolTable);
}

LogicalResult FillOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto global = symbolTable.lookupNearestSymbolFrom<GlobalOp>(*this, getGlobalAttr().getAttr());
  if (!global)
    return emitOpError("refers to '") << getGlobal() << "', which is not a zero.global";
  return success();
}

//===----------------------------------------------------------------------===//
// Constants, casts and shape manipulation
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, ValueRange,
                                           DictionaryAttr attributes, OpaqueProperties properties,
                                           RegionRange, SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(ValueRange(), attributes, properties);
  auto type = dyn_cast<RankedTensorType>(adaptor.getValue().getType());
  if (!type)
    return emitOptionalError(loc, "constant value must be a ranked tensor");
  inferred.push_back(type);
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

void zcc::zero::eraseDropout(Operation *op) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func || func.isExternal())
    return;
  SmallVector<DropoutOp> dropouts;
  func.walk([&](DropoutOp d) { dropouts.push_back(d); });
  for (DropoutOp d : dropouts) {
    d.getResult().replaceAllUsesWith(d.getInput());
    d.erase();
  }
  for (unsigned k = 0; k < func.getNumArguments(); ++k)
    if (auto name = func.getArgAttrOfType<StringAttr>(k, "zero.input");
        name && name.getValue() == "dropout_rng" && func.getArgument(k).use_empty()) {
      (void)func.eraseArgument(k);
      return;
    }
}

LogicalResult DropoutOp::verify() {
  double ratio = getRatio().convertToDouble();
  if (!(ratio > 0 && ratio < 1))
    return emitOpError("ratio ") << ratio << " is not in (0, 1)";
  if (getKey() < 0 || getKey() > 0xFFFFFFFFLL)
    return emitOpError("key ") << getKey() << " is not a 32-bit value";
  auto in = tensorOf(getInput());
  if (getSamples() < 1 || in.getNumElements() % getSamples() != 0)
    return emitOpError("") << getSamples() << " samples do not divide " << in.getNumElements()
                           << " elements";
  if (tensorOf(getRng()).getShape() != ArrayRef<int64_t>{2})
    return emitOpError("rng must be tensor<2xi64> [seed, position]");
  return success();
}

LogicalResult GatherGradOp::verify() {
  if (Value addend = getAddend(); addend && addend.getType() != getType())
    return emitOpError("addend ") << addend.getType() << " is not the result's type " << getType();
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = tensorOf(getInput()), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type changes from ")
           << in.getElementType() << " to " << out.getElementType();
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << shapeStr(in.getShape()) << " (" << in.getNumElements() << " elements) to "
           << shapeStr(out.getShape()) << " (" << out.getNumElements() << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) -> reshape(x)
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  if (auto dense = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(getType());
  return {};
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  auto type = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if ((int64_t)perm.size() != type.getRank())
    return emitOptionalError(loc, "permutation has ", perm.size(), " entries for a tensor of rank ",
                             type.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= type.getRank() || seen[p])
      return emitOptionalError(loc, "permutation ", listStr(perm), " is not a permutation of 0..",
                               type.getRank() - 1);
    seen[p] = true;
    shape.push_back(type.getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getInput();
  // transpose(transpose(x, p1), p2) -> transpose(x, p1 o p2)
  if (auto producer = getInput().getDefiningOp<TransposeOp>()) {
    ArrayRef<int64_t> inner = producer.getPermutation();
    SmallVector<int64_t> composed;
    for (int64_t p : perm)
      composed.push_back(inner[p]);
    setPermutation(composed);
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  return {};
}

LogicalResult ExpandOp::verify() {
  auto in = tensorOf(getInput()), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type changes from ")
           << in.getElementType() << " to " << out.getElementType();
  if (!isBroadcastableTo(in.getShape(), out.getShape()))
    return emitOpError("cannot broadcast ")
           << shapeStr(in.getShape()) << " to " << shapeStr(out.getShape());
  return success();
}

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto dense = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    if (dense.isSplat())
      return DenseElementsAttr::get(getType(), dense.getSplatValue<Attribute>());
  return {};
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto type = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> start = adaptor.getStart(), limit = adaptor.getLimit(),
                    stride = adaptor.getStride();
  int64_t rank = type.getRank();
  if ((int64_t)start.size() != rank || (int64_t)limit.size() != rank ||
      (int64_t)stride.size() != rank)
    return emitOptionalError(loc, "start, limit and stride need one entry per dimension (", rank,
                             ")");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t dim = type.getDimSize(d);
    if (stride[d] < 1)
      return emitOptionalError(loc, "stride of dimension ", d, " must be >= 1, got ", stride[d]);
    if (start[d] < 0 || start[d] > dim || limit[d] < start[d] || limit[d] > dim)
      return emitOptionalError(loc, "bounds [", start[d], ", ", limit[d], ") of dimension ", d,
                               " are outside [0, ", dim, "]");
    shape.push_back((limit[d] - start[d] + stride[d] - 1) / stride[d]);
  }
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "needs at least one input");
  auto first = tensorOf(adaptor.getInputs()[0]);
  auto axis = normalizeAxis(adaptor.getAxis(), first.getRank());
  if (failed(axis))
    return emitOptionalError(loc, "axis ", adaptor.getAxis(), " is out of range for rank ",
                             first.getRank());
  SmallVector<int64_t> shape(first.getShape());
  shape[*axis] = 0;
  for (Value v : adaptor.getInputs()) {
    auto t = tensorOf(v);
    if (t.getRank() != first.getRank() || t.getElementType() != first.getElementType())
      return emitOptionalError(loc, "inputs must share rank and element type");
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != *axis && t.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(loc, "input shapes ", shapeStr(first.getShape()), " and ",
                                 shapeStr(t.getShape()), " differ outside axis ", *axis);
    shape[*axis] += t.getDimSize(*axis);
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  // The one input of the result's type, every other input empty along the
  // axis (Phi-3's partial rotary embedding exports concat(rotated, x[..,
  // D:]) with a zero-width pass-through part when all of a head rotates).
  Value whole;
  for (Value v : getInputs()) {
    if (tensorOf(v).getNumElements() == 0 && tensorOf(v) != getType())
      continue;
    if (whole || v.getType() != getType())
      return {};
    whole = v;
  }
  return whole ? OpFoldResult(whole) : OpFoldResult();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto type = tensorOf(adaptor.getInput());
  auto axis = normalizeAxis(adaptor.getAxis(), type.getRank());
  if (failed(axis))
    return emitOptionalError(loc, "axis ", adaptor.getAxis(), " is out of range for rank ",
                             type.getRank());
  int64_t total = 0;
  for (int64_t size : adaptor.getSizes()) {
    if (size < 0)
      return emitOptionalError(loc, "split sizes must be non-negative");
    SmallVector<int64_t> shape(type.getShape());
    shape[*axis] = size;
    inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
    total += size;
  }
  if (total != type.getDimSize(*axis))
    return emitOptionalError(loc, "split sizes add up to ", total, " but dimension ", *axis,
                             " has ", type.getDimSize(*axis));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  auto type = tensorOf(adaptor.getInput());
  auto indices = tensorOf(adaptor.getIndices());
  auto axis = normalizeAxis(adaptor.getAxis(), type.getRank());
  if (failed(axis))
    return emitOptionalError(loc, "axis ", adaptor.getAxis(), " is out of range for rank ",
                             type.getRank());
  SmallVector<int64_t> shape(type.getShape().take_front(*axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, type.getShape().drop_front(*axis + 1));
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define ZERO_BROADCAST_INFER(OP)                                                                   \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,  \
                                     SmallVectorImpl<Type> &inferred) {                            \
    return inferBroadcast(loc, {adaptor.getLhs(), adaptor.getRhs()}, Type(), inferred);            \
  }
ZERO_BROADCAST_INFER(AddOp)
ZERO_BROADCAST_INFER(SubOp)
ZERO_BROADCAST_INFER(MulOp)
ZERO_BROADCAST_INFER(DivOp)
ZERO_BROADCAST_INFER(PowOp)
ZERO_BROADCAST_INFER(MaxOp)
ZERO_BROADCAST_INFER(MinOp)
ZERO_BROADCAST_INFER(AndOp)
ZERO_BROADCAST_INFER(OrOp)
#undef ZERO_BROADCAST_INFER

LogicalResult CmpOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  return inferBroadcast(loc, {adaptor.getLhs(), adaptor.getRhs()}, IntegerType::get(ctx, 1),
                        inferred);
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  SmallVector<Type> tmp;
  if (failed(inferBroadcast(loc, {adaptor.getLhs(), adaptor.getRhs()}, Type(), tmp)))
    return failure();
  auto cond = tensorOf(adaptor.getCondition());
  auto value = cast<RankedTensorType>(tmp[0]);
  auto shape = broadcastShapes(cond.getShape(), value.getShape());
  if (failed(shape))
    return emitOptionalError(loc, "condition shape ", shapeStr(cond.getShape()),
                             " does not broadcast with ", shapeStr(value.getShape()));
  inferred.push_back(RankedTensorType::get(*shape, value.getElementType()));
  return success();
}

/// Returns true if |attr| is a splat of the floating-point or integer |value|.
static bool isSplatOf(Attribute attr, double value) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return false;
  Type et = dense.getElementType();
  if (isa<FloatType>(et))
    return dense.getSplatValue<APFloat>().convertToDouble() == value;
  if (et.isInteger(1))
    return false;
  if (isa<IntegerType>(et))
    return dense.getSplatValue<APInt>().getSExtValue() == (int64_t)value;
  return false;
}

/// x op identity -> x, when that keeps the result type (no broadcast growth).
static OpFoldResult foldIdentityRhs(Value lhs, Attribute rhs, Type resultType, double identity) {
  if (lhs.getType() == resultType && isSplatOf(rhs, identity))
    return lhs;
  return {};
}

OpFoldResult AddOp::fold(FoldAdaptor a) {
  if (auto r = foldIdentityRhs(getLhs(), a.getRhs(), getType(), 0.0))
    return r;
  return foldIdentityRhs(getRhs(), a.getLhs(), getType(), 0.0);
}
OpFoldResult SubOp::fold(FoldAdaptor a) {
  return foldIdentityRhs(getLhs(), a.getRhs(), getType(), 0.0);
}
OpFoldResult MulOp::fold(FoldAdaptor a) {
  if (auto r = foldIdentityRhs(getLhs(), a.getRhs(), getType(), 1.0))
    return r;
  return foldIdentityRhs(getRhs(), a.getLhs(), getType(), 1.0);
}
OpFoldResult DivOp::fold(FoldAdaptor a) {
  return foldIdentityRhs(getLhs(), a.getRhs(), getType(), 1.0);
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  auto cond = dyn_cast_if_present<DenseElementsAttr>(adaptor.getCondition());
  if (!cond || !cond.isSplat())
    return {};
  Value chosen = cond.getSplatValue<bool>() ? getLhs() : getRhs();
  if (chosen.getType() == getType())
    return chosen;
  return {};
}

//===----------------------------------------------------------------------===//
// Contractions, reductions and normalizations
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  auto lhs = tensorOf(adaptor.getLhs()), rhs = tensorOf(adaptor.getRhs());
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptionalError(loc, "operands must have rank >= 2, got ", lhs.getRank(), " and ",
                             rhs.getRank());
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, "operand element types differ: ", lhs.getElementType(), " vs ",
                             rhs.getElementType());
  int64_t m = lhs.getDimSize(lhs.getRank() - (adaptor.getTransposeLhs() ? 1 : 2));
  int64_t kl = lhs.getDimSize(lhs.getRank() - (adaptor.getTransposeLhs() ? 2 : 1));
  int64_t kr = rhs.getDimSize(rhs.getRank() - (adaptor.getTransposeRhs() ? 1 : 2));
  int64_t n = rhs.getDimSize(rhs.getRank() - (adaptor.getTransposeRhs() ? 2 : 1));
  if (kl != kr)
    return emitOptionalError(loc, "contraction dimensions differ: ", shapeStr(lhs.getShape()),
                             " x ", shapeStr(rhs.getShape()), " (", kl, " vs ", kr, ")");
  auto batch = broadcastShapes(lhs.getShape().drop_back(2), rhs.getShape().drop_back(2));
  if (failed(batch))
    return emitOptionalError(loc, "batch dimensions of ", shapeStr(lhs.getShape()), " and ",
                             shapeStr(rhs.getShape()), " do not broadcast");
  SmallVector<int64_t> shape = *batch;
  shape.push_back(m);
  shape.push_back(n);
  inferred.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

namespace {
/// matmul(transpose(a, swap last two), b) -> matmul(a, b) {transpose_lhs}, and
/// the same for the rhs: PyTorch exports nn.Linear as MatMul(x, Transpose(W)),
/// and the GEMM reads W transposed for free.
struct FoldTransposeIntoMatmul : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  static Value swappedInput(Value v) {
    auto t = v.getDefiningOp<TransposeOp>();
    if (!t)
      return {};
    ArrayRef<int64_t> perm = t.getPermutation();
    int64_t r = perm.size();
    for (int64_t d = 0; d < r - 2; ++d)
      if (perm[d] != d)
        return {};
    if (r < 2 || perm[r - 2] != r - 1 || perm[r - 1] != r - 2)
      return {};
    return t.getInput();
  }

  LogicalResult matchAndRewrite(MatmulOp op, PatternRewriter &rewriter) const override {
    Value lhs = swappedInput(op.getLhs()), rhs = swappedInput(op.getRhs());
    if (!lhs && !rhs)
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      if (lhs) {
        op.getLhsMutable().assign(lhs);
        op.setTransposeLhs(!op.getTransposeLhs());
      }
      if (rhs) {
        op.getRhsMutable().assign(rhs);
        op.setTransposeRhs(!op.getTransposeRhs());
      }
    });
    return success();
  }
};
} // namespace

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<FoldTransposeIntoMatmul>(context);
}

namespace {
/// reshape(slice(x)) -> slice(reshape(x)) where the slice cuts whole heads
/// out of x's last axis and the reshape splits that axis into heads: a
/// fused projection's parts (Phi-3's qkv_proj, GPT-NeoX's query_key_value)
/// become slices of one [.., heads, D] view, which the elementwise kernels
/// read in place (RoPE) and whose gradients join into one concatenation.
struct SliceBeforeReshape : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op, PatternRewriter &rewriter) const override {
    auto slice = op.getInput().getDefiningOp<SliceOp>();
    if (!slice || !slice->hasOneUse())
      return failure();
    auto in = tensorOf(slice.getInput()), mid = tensorOf(slice.getResult()), out = op.getType();
    int64_t rank = in.getRank();
    if (!in.hasStaticShape() || rank < 1 || out.getRank() != rank + 1)
      return failure();
    for (int64_t d = 0; d < rank; ++d)
      if (slice.getStride()[d] != 1 || (d < rank - 1 && (mid.getDimSize(d) != in.getDimSize(d) ||
                                                         out.getDimSize(d) != in.getDimSize(d))))
        return failure();
    int64_t k = out.getDimSize(rank), start = slice.getStart()[rank - 1];
    if (k <= 0 || start % k || in.getDimSize(rank - 1) % k ||
        out.getDimSize(rank - 1) * k != mid.getDimSize(rank - 1))
      return failure();
    SmallVector<int64_t> shape(in.getShape());
    shape.back() /= k;
    shape.push_back(k);
    Value view = ReshapeOp::create(
        rewriter, op.getLoc(), RankedTensorType::get(shape, in.getElementType()), slice.getInput());
    SmallVector<int64_t> begin(rank + 1, 0), limit(shape), step(rank + 1, 1);
    begin[rank - 1] = start / k;
    limit[rank - 1] = begin[rank - 1] + out.getDimSize(rank - 1);
    rewriter.replaceOpWithNewOp<SliceOp>(op, out, view, rewriter.getDenseI64ArrayAttr(begin),
                                         rewriter.getDenseI64ArrayAttr(limit),
                                         rewriter.getDenseI64ArrayAttr(step));
    return success();
  }
};
} // namespace

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<SliceBeforeReshape>(context);
}

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  auto type = tensorOf(adaptor.getInput());
  SmallVector<bool> reduced(type.getRank(), false);
  for (int64_t axis : adaptor.getAxes()) {
    if (axis < 0 || axis >= type.getRank() || reduced[axis])
      return emitOptionalError(loc, "axes ", listStr(adaptor.getAxes()),
                               " must be distinct and in [0, ", type.getRank(), ")");
    reduced[axis] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (!reduced[d])
      shape.push_back(type.getDimSize(d));
    else if (adaptor.getKeepdims())
      shape.push_back(1);
  }
  // A sum of squares is a norm's accumulation: float32 whatever the input.
  Type elem = adaptor.getKind() == ReduceKind::sum_squares && isa<FloatType>(type.getElementType())
                  ? Float32Type::get(type.getContext())
                  : type.getElementType();
  inferred.push_back(RankedTensorType::get(shape, elem));
  return success();
}

static LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < 0 || axis >= rank)
    return op->emitOpError("axis ") << axis << " must be in [0, " << rank << ")";
  return success();
}

LogicalResult SoftmaxOp::verify() { return verifyAxis(*this, getAxis(), getType().getRank()); }
LogicalResult MatmulBiasOp::verify() {
  auto out = getType(), bias = getBias().getType();
  if (bias.getRank() != 1 || out.getRank() < 2 || bias.getDimSize(0) != out.getShape().back() ||
      bias.getElementType() != out.getElementType())
    return emitOpError() << "bias " << bias << " is not one value per column of " << out;
  return success();
}
LogicalResult MatmulAddOp::verify() {
  if (getAddend().getType() != getType())
    return emitOpError() << "addend " << getAddend().getType() << " is not of the result's type "
                         << getType();
  return success();
}
LogicalResult ElementwiseOp::verify() {
  using ::zrt::ElementwiseOpcode;
  ArrayRef<int64_t> program = getProgram(), offsets = getOffsets();
  int64_t inputs = getInputs().size(), steps = program.size() / 4;
  if (getNumResults() == 0)
    return emitOpError() << "expects at least one result";
  auto out = getType();
  int64_t rank = out.getRank(), noffsets = offsets.size();
  if (program.empty() || program.size() % 4 != 0 || (int64_t)getStepTypes().size() != steps)
    return emitOpError() << "expects a program of (opcode, a, b, c) steps and one type per step";
  for (int64_t s = 0; s < steps; ++s) {
    int64_t code = program[4 * s], a = program[4 * s + 1], b = program[4 * s + 2],
            c = program[4 * s + 3];
    bool ok = code >= 0 && code < ::zrt::kNumElementwiseOpcodes;
    if (ok && code == (int64_t)ElementwiseOpcode::Load)
      ok = a >= 0 && a < inputs && b == -1 && (c == -1 || (c >= 0 && c + rank <= noffsets));
    else if (ok && code == (int64_t)ElementwiseOpcode::Pick)
      ok = a >= 0 && a < s && b >= 0 && b < s && c >= 0 && c + 2 <= noffsets && offsets[c] >= 0 &&
           offsets[c] < rank;
    else if (ok)
      ok = a >= 0 && a < s && (::zrt::isUnaryOpcode(code) ? b == -1 : (b >= 0 && b < s)) && c == -1;
    if (!ok)
      return emitOpError() << "step " << s << " (" << code << ", " << a << ", " << b << ", " << c
                           << ") is not a load of an input, a pick or an opcode over earlier steps";
    if (!isa<FloatType>(cast<TypeAttr>(getStepTypes()[s]).getValue()))
      return emitOpError() << "step " << s << " has no float type";
  }
  if (getOutputs().empty() ? getNumResults() != 1
                           : (int64_t)getOutputs().size() != (int64_t)getNumResults())
    return emitOpError() << "expects one output step per result (none: one result, the last "
                            "step); got "
                         << getOutputs().size() << " for " << getNumResults() << " results";
  for (unsigned k = 0; k < getNumResults(); ++k) {
    auto type = cast<RankedTensorType>(getResult(k).getType());
    int64_t s = outputStep(k);
    if (type.getShape() != out.getShape())
      return emitOpError() << "result " << k << " " << type << " is not of result 0's shape";
    if (s < 0 || s >= steps)
      return emitOpError() << "result " << k << " stores step " << s << " of " << steps;
    if (cast<TypeAttr>(getStepTypes()[s]).getValue() != type.getElementType())
      return emitOpError() << "step " << s << "'s type is not result " << k << "'s "
                           << type.getElementType();
  }
  for (Value v : getInputs()) {
    auto in = cast<RankedTensorType>(v.getType());
    if (in.getRank() > rank)
      return emitOpError() << "input " << v.getType() << " has a higher rank than " << out;
    // Loads clamp each coordinate into [0, dim): static, non-empty inputs.
    if (!in.hasStaticShape() || llvm::is_contained(in.getShape(), 0))
      return emitOpError() << "input " << v.getType() << " is not of a static, non-empty shape";
  }
  return success();
}
LogicalResult CastManyOp::verify() {
  if (getInputs().empty() || getInputs().size() != getResults().size())
    return emitOpError() << "expects as many results as inputs, at least one; got "
                         << getInputs().size() << " inputs and " << getResults().size()
                         << " results";
  Type from = cast<RankedTensorType>(getInputs()[0].getType()).getElementType();
  Type to = cast<RankedTensorType>(getResults()[0].getType()).getElementType();
  for (auto [k, pair] : llvm::enumerate(llvm::zip(getInputs(), getResults()))) {
    auto in = cast<RankedTensorType>(std::get<0>(pair).getType());
    auto out = cast<RankedTensorType>(std::get<1>(pair).getType());
    if (in.getShape() != out.getShape() || in.getElementType() != from ||
        out.getElementType() != to)
      return emitOpError() << "pair " << k << ": " << in << " -> " << out << " is not a " << from
                           << " -> " << to << " cast of one shape";
  }
  return success();
}
LogicalResult CastConcatOp::verify() {
  auto out = cast<RankedTensorType>(getResult().getType());
  if (getInputs().empty() || out.getRank() != 1)
    return emitOpError() << "expects at least one input and a 1-D result, got " << out;
  int64_t total = 0;
  for (Value v : getInputs())
    total += cast<RankedTensorType>(v.getType()).getNumElements();
  if (total != out.getDimSize(0))
    return emitOpError() << "the inputs hold " << total << " elements, the result "
                         << out.getDimSize(0);
  return success();
}
LogicalResult MatmulBiasGeluOp::verify() {
  auto out = getResult().getType(), pre = getPre().getType(), bias = getBias().getType();
  if (out != pre || out.getRank() != 2)
    return emitOpError() << "expects a 2-D result and pre-activation of one type, got " << out
                         << " and " << pre;
  if (bias.getRank() != 1 || bias.getDimSize(0) != out.getDimSize(1) ||
      bias.getElementType() != out.getElementType())
    return emitOpError() << "bias " << bias << " is not one value per column of " << out;
  return success();
}
LogicalResult MatmulGeluGradOp::verify() {
  auto out = getResult().getType(), pre = getPre().getType();
  if (out != pre || out.getRank() != 2)
    return emitOpError() << "expects a 2-D result and pre-activation of one type, got " << out
                         << " and " << pre;
  return success();
}
LogicalResult MatmulBgradOp::verify() {
  auto lhs = getLhs().getType(), rhs = getRhs().getType(), weight = getWeight().getType(),
       bias = getBias().getType();
  if (lhs.getRank() != 2 || rhs.getRank() != 2 || lhs.getDimSize(0) != rhs.getDimSize(0))
    return emitOpError() << "expects 2-D operands with as many rows, got " << lhs << " and " << rhs;
  int64_t k = lhs.getDimSize(1), n = rhs.getDimSize(1);
  Type elem = lhs.getElementType();
  if (rhs.getElementType() != elem || weight.getElementType() != elem ||
      bias.getElementType() != elem)
    return emitOpError() << "operands and results must share one element type";
  if (weight.getShape() != ArrayRef<int64_t>{k, n})
    return emitOpError() << "weight gradient " << weight << " should be " << k << "x" << n;
  bool flat = bias.getRank() == 1 && bias.getDimSize(0) == n;
  bool kept = bias.getRank() == 2 && bias.getDimSize(0) == 1 && bias.getDimSize(1) == n;
  if (!flat && !kept)
    return emitOpError() << "bias gradient " << bias << " should be [" << n << "] or [1, " << n
                         << "]";
  return success();
}
LogicalResult BiasSoftmaxOp::verify() {
  auto in = getInput().getType(), bias = getBias().getType();
  if (getType() != in)
    return emitOpError() << "result type " << getType() << " differs from the input's " << in;
  if (bias.getElementType() != in.getElementType() || bias.getRank() > in.getRank() ||
      in.getRank() == 0)
    return emitOpError() << "bias " << bias << " does not broadcast to " << in;
  for (int64_t k = 1; k <= bias.getRank(); ++k) {
    int64_t b = bias.getDimSize(bias.getRank() - k), x = in.getDimSize(in.getRank() - k);
    if (b != 1 && b != x)
      return emitOpError() << "bias " << bias << " does not broadcast to " << in;
  }
  return success();
}
/// zero.attention(_packed)'s mask: a bias [B or 1, H or 1, Sq, Sk], or none
/// (with causal, Sq = Sk, and window only with causal), and lse [B, H, Sq].
static LogicalResult verifyMaskAndLse(Operation *op, Value biasValue, Value positions, bool causal,
                                      std::optional<int64_t> window, std::optional<APFloat> softcap,
                                      Type elementType, RankedTensorType lse, int64_t b, int64_t h,
                                      int64_t sq, int64_t sk) {
  if (positions) {
    auto type = tensorOf(positions);
    if (!causal || biasValue)
      return op->emitOpError("positions (per-document attention) take a causal mask, no bias");
    if (type.getShape() != ArrayRef<int64_t>{b, sq})
      return op->emitOpError() << "positions " << shapeStr(type.getShape())
                               << " must be [B, S] = " << shapeStr({b, sq});
  }
  if (biasValue) {
    auto bias = tensorOf(biasValue);
    if (causal || window)
      return op->emitOpError("takes a bias or causal/window, not both");
    if (bias.getElementType() != elementType)
      return op->emitOpError("the bias must have the element type of q");
    if (bias.getRank() != 4 || (bias.getDimSize(0) != 1 && bias.getDimSize(0) != b) ||
        (bias.getDimSize(1) != 1 && bias.getDimSize(1) != h) || bias.getDimSize(2) != sq ||
        bias.getDimSize(3) != sk)
      return op->emitOpError() << "bias " << shapeStr(bias.getShape())
                               << " must be [B or 1, H or 1, " << sq << ", " << sk << "]";
  }
  if (causal && sq != sk)
    return op->emitOpError() << "causal needs as many queries as keys, not " << sq << " and " << sk;
  if (window && (!causal || *window < 1))
    return op->emitOpError("window must be at least 1, and only with causal");
  if (softcap && !(softcap->convertToDouble() > 0))
    return op->emitOpError("softcap must be positive");
  if (softcap && biasValue)
    return op->emitOpError("softcap takes a structural mask (causal, window or none), not a bias");
  if (lse.getShape() != ArrayRef<int64_t>{b, h, sq})
    return op->emitOpError() << "lse must be [B, H, Sq] = " << shapeStr({b, h, sq});
  return success();
}
LogicalResult AttentionOp::verify() {
  auto q = tensorOf(getQ()), k = tensorOf(getK()), v = tensorOf(getV()),
       out = tensorOf(getResult()), lse = tensorOf(getLse());
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return emitOpError("expects q, k, v of rank 4 ([B, S, H, D])");
  int64_t b = q.getDimSize(0), sq = q.getDimSize(1), h = q.getDimSize(2), d = q.getDimSize(3),
          sk = k.getDimSize(1), hk = k.getDimSize(2);
  if (k.getShape() != ArrayRef<int64_t>{b, sk, hk, d} || v.getShape() != k.getShape() || hk < 1 ||
      h % hk != 0)
    return emitOpError() << "k " << shapeStr(k.getShape()) << " and v " << shapeStr(v.getShape())
                         << " must be [B, Sk, Hk, D] with q's B and D, Hk dividing q's H "
                         << shapeStr(q.getShape());
  if (k.getElementType() != q.getElementType() || v.getElementType() != q.getElementType() ||
      out != q)
    return emitOpError("q, k, v and the result must have one element type, the result q's shape");
  return verifyMaskAndLse(*this, getBias(), getPositions(), getCausal(), getWindow(), getSoftcap(),
                          q.getElementType(), lse, b, h, sq, sk);
}
LogicalResult AttentionPackedOp::verify() {
  auto qkv = tensorOf(getQkv()), out = tensorOf(getResult()), lse = tensorOf(getLse());
  if (qkv.getRank() != 5 || qkv.getDimSize(2) != 3)
    return emitOpError("expects qkv [B, S, 3, H, D]");
  int64_t b = qkv.getDimSize(0), s = qkv.getDimSize(1), h = qkv.getDimSize(3),
          d = qkv.getDimSize(4);
  if (out.getShape() != ArrayRef<int64_t>{b, s, h, d} ||
      out.getElementType() != qkv.getElementType())
    return emitOpError("the result must be [B, S, H, D] of qkv's element type");
  return verifyMaskAndLse(*this, getBias(), getPositions(), getCausal(), getWindow(), getSoftcap(),
                          qkv.getElementType(), lse, b, h, s, s);
}
LogicalResult LogSoftmaxOp::verify() { return verifyAxis(*this, getAxis(), getType().getRank()); }

/// Checks that a normalization's |param| has the normalized trailing shape.
static LogicalResult verifyNormParam(Operation *op, StringRef name, Value param,
                                     RankedTensorType input, int64_t axis) {
  auto type = tensorOf(param);
  ArrayRef<int64_t> expected = input.getShape().drop_front(axis);
  if (type.getShape() != expected || type.getElementType() != input.getElementType())
    return op->emitOpError() << name << " has type " << type << ", expected shape "
                             << shapeStr(expected) << " of " << input.getElementType();
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto in = tensorOf(getInput());
  if (failed(verifyAxis(*this, getAxis(), in.getRank())))
    return failure();
  if (getType() != in)
    return emitOpError("result type must equal the input type");
  if (failed(verifyNormParam(*this, "scale", getScale(), in, getAxis())))
    return failure();
  if (getBias() && failed(verifyNormParam(*this, "bias", getBias(), in, getAxis())))
    return failure();
  if (getEpsilon().convertToDouble() < 0)
    return emitOpError("epsilon must be non-negative");
  return success();
}

LogicalResult RmsNormOp::verify() {
  auto in = tensorOf(getInput());
  if (failed(verifyAxis(*this, getAxis(), in.getRank())))
    return failure();
  if (getType() != in)
    return emitOpError("result type must equal the input type");
  if (getEpsilon().convertToDouble() < 0)
    return emitOpError("epsilon must be non-negative");
  return verifyNormParam(*this, "scale", getScale(), in, getAxis());
}

LogicalResult CrossEntropyOp::verify() {
  auto logits = tensorOf(getLogits()), labels = tensorOf(getLabels());
  if (logits.getRank() < 1 || labels.getShape() != logits.getShape().drop_back())
    return emitOpError("labels ") << shapeStr(labels.getShape())
                                  << " must have the shape of the logits "
                                  << shapeStr(logits.getShape()) << " without the class axis";
  if (getType().getRank() != 0)
    return emitOpError("result must be a scalar tensor");
  if (auto classes = getClasses(); classes && (*classes < 1 || *classes > logits.getShape().back()))
    return emitOpError("classes ") << *classes << " must be in [1, " << logits.getShape().back()
                                   << "], the logits' last dimension";
  return success();
}

LogicalResult AdamWOp::verify() {
  Type t = getParam().getType();
  if (getM().getType() != t || getV().getType() != t || getNewParam().getType() != t ||
      getNewM().getType() != t || getNewV().getType() != t)
    return emitOpError("parameter, moments and results must have one type");
  // The gradient may be narrower (a bf16 gradient bucket): the parameter's shape.
  if (cast<RankedTensorType>(getGrad().getType()).getShape() != getParam().getType().getShape())
    return emitOpError("the gradient must have the parameter's shape");
  if (getLr().getType().getRank() != 0 || getStep().getType().getRank() != 0)
    return emitOpError("lr and step must be scalars");
  if (getSkip() && getSkip().getType().getRank() != 0)
    return emitOpError("skip must be a scalar");
  if (Value copy = getNewParamCopy()) {
    auto ct = cast<RankedTensorType>(copy.getType());
    if (ct.getShape() != getParam().getType().getShape() || ct.getElementTypeBitWidth() != 16)
      return emitOpError("the parameter's copy must be 16-bit with the parameter's shape");
  }
  if (Value scale = getGradScale(); scale && cast<RankedTensorType>(scale.getType()).getRank() != 0)
    return emitOpError("the gradient's scale must be a scalar");
  if (Value sum = getGradSumSquares(); sum && cast<RankedTensorType>(sum.getType()).getRank() != 0)
    return emitOpError("the gradient's sum of squares must be a scalar");
  return success();
}

LogicalResult SgdOp::verify() {
  if (getSkip() && getSkip().getType().getRank() != 0)
    return emitOpError("skip must be a scalar");
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

static LogicalResult verifyWorld(Operation *op, int64_t world) {
  if (world < 1)
    return op->emitOpError("world_size must be >= 1, got ") << world;
  return success();
}

/// |big| is |small| times the world size, both 1-D of one element type.
static LogicalResult verifyChunks(Operation *op, Type bigType, Type smallType, int64_t world) {
  if (failed(verifyWorld(op, world)))
    return failure();
  auto big = cast<RankedTensorType>(bigType), small = cast<RankedTensorType>(smallType);
  if (big.getRank() != 1 || small.getRank() != 1 ||
      big.getElementType() != small.getElementType() ||
      big.getDimSize(0) != small.getDimSize(0) * world)
    return op->emitOpError("expects 1-D tensors of one element type, the full one world_size (")
           << world << ") times the chunk, got " << bigType << " and " << smallType;
  return success();
}

LogicalResult AllReduceOp::verify() { return verifyWorld(*this, getWorldSize()); }
LogicalResult ReduceScatterOp::verify() {
  return verifyChunks(*this, getInput().getType(), getResult().getType(), getWorldSize());
}
LogicalResult AllGatherOp::verify() {
  return verifyChunks(*this, getResult().getType(), getInput().getType(), getWorldSize());
}
/// |values| (1-D, N x bits / 8 bytes) and |scales| (1-D, N / block) of one
/// quantized tensor of N elements.
static LogicalResult verifyQuantized(Operation *op, RankedTensorType values,
                                     RankedTensorType scales, RankedTensorType floats,
                                     int64_t block, int64_t bits) {
  if (bits != 8 && bits != 4)
    return op->emitOpError("quantizes to 8 or 4 bits, got ") << bits;
  int64_t n = floats.getRank() == 1 ? floats.getDimSize(0) : -1;
  if (block < 1 || (bits == 4 && block % 2) || values.getRank() != 1 || scales.getRank() != 1 ||
      n < 0 || n % block || values.getDimSize(0) != n * bits / 8 ||
      scales.getDimSize(0) * block != n)
    return op->emitOpError("expects 1-D tensors of N elements, N x ")
           << bits << " / 8 bytes of values and N / block_size (" << block
           << ") scales, N a multiple of the block, got " << floats << ", " << values << " and "
           << scales;
  return success();
}
LogicalResult QuantizeOp::verify() {
  if (auto chunks = getChunks()) {
    int64_t n = getInput().getType().getNumElements();
    if (chunks->size() != 2 || (*chunks)[0] < 1 || (*chunks)[1] < 1 ||
        n % ((*chunks)[0] * (*chunks)[1]) || (n / ((*chunks)[0] * (*chunks)[1])) % getBlockSize())
      return emitOpError("chunks must be [A, G] splitting the input into A x G chunks of whole "
                         "blocks");
  }
  return verifyQuantized(*this, getValues().getType(), getScales().getType(), getInput().getType(),
                         getBlockSize(), getBits());
}
LogicalResult DequantizeOp::verify() {
  int64_t parts = getParts(), n = getScales().getType().getNumElements() * getBlockSize();
  RankedTensorType result = getResult().getType();
  if (parts < 1 || n % parts || result.getRank() != 1 || result.getDimSize(0) * parts != n ||
      (n / parts) % getBlockSize())
    return emitOpError("expects the result to be one of parts (")
           << parts << ") of the values, each a whole number of blocks, got "
           << getValues().getType() << " -> " << result;
  return verifyQuantized(*this, getValues().getType(), getScales().getType(), result.clone({n}),
                         getBlockSize(), getBits());
}
LogicalResult AllToAllOp::verify() {
  if (failed(verifyWorld(*this, getWorldSize())))
    return failure();
  auto type = getInput().getType();
  if (type.getRank() != 1 || type.getDimSize(0) % getWorldSize())
    return emitOpError("expects a 1-D tensor of world_size (")
           << getWorldSize() << ") equal chunks, got " << type;
  return success();
}
LogicalResult LocalShardOp::verify() {
  return verifyChunks(*this, getInput().getType(), getResult().getType(), getWorldSize());
}

LogicalResult WaitOp::verify() {
  Operation *start = getStarted().getDefiningOp();
  if (auto update = dyn_cast_or_null<AdamWOp>(start); update && update->hasAttr("async")) {
    if (getStarted() != update->getResults().back())
      return emitOpError("waits for an async adamw's last result");
    if (update.getGrad() != getInput())
      return emitOpError("input must be the started adamw's gradient");
    return success();
  }
  if (!start || !isa<AllReduceOp, ReduceScatterOp, AllGatherOp, AllToAllOp, TransferOp>(start) ||
      !start->hasAttr("async"))
    return emitOpError("waits for the result of an async all_reduce, reduce_scatter, "
                       "all_gather, all_to_all, transfer or adamw");
  if (start->getOperand(0) != getInput())
    return emitOpError("input must be the started collective's input");
  return success();
}

#define GET_OP_CLASSES
#include "zero/ZeroOps.cpp.inc"
