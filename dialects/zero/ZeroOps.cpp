//===- ZeroOps.cpp - zero dialect operations ------------------------------===//
//
// Verifiers, result-type inference and folders. Shape rules follow NumPy and
// ONNX, so that a verified module means the same thing the ONNX graph meant.
//
//===----------------------------------------------------------------------===//
#include "zero/ZeroOps.h"
#include "ZeroOpsSupport.h"
#include "kernels/KernelId.h"
#include "support/Shape.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
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
  auto training = zcc::zero::attrs(module).getTrainingAttrHelper().getAttr(module);
  return training ? training.getGradAccumSteps() : 0;
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
    if (auto name = func.getArgAttrOfType<StringAttr>(
            k, zcc::zero::ZeroDialect::InputAttrHelper::getNameStr());
        name && name.getValue() == "dropout_rng" && func.getArgument(k).use_empty()) {
      (void)func.eraseArgument(k);
      return;
    }
}

void zcc::zero::selectMode(Operation *op, bool training) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func || func.isExternal())
    return;
  if (!training)
    eraseDropout(op);
  bool changed = false;
  SmallVector<Operation *> resolved;
  func.walk([&](Operation *o) {
    if (isa<TrainOrEvalOp>(o))
      resolved.push_back(o);
    else if (auto store = dyn_cast<StoreOp>(o); store && !training) {
      auto global = SymbolTable::lookupNearestSymbolFrom<GlobalOp>(o, store.getGlobalAttr());
      if (global && global.getRole() == GlobalRole::buffer)
        resolved.push_back(o);
    }
  });
  for (Operation *o : resolved) {
    if (auto mode = dyn_cast<TrainOrEvalOp>(o))
      mode.getResult().replaceAllUsesWith(training ? mode.getTraining() : mode.getEvaluation());
    o->erase();
    changed = true;
  }
  if (!changed)
    return;
  // What only the other mode read computes nothing now.
  for (Block &block : func.getFunctionBody())
    for (Operation &o : llvm::make_early_inc_range(llvm::reverse(block)))
      if (isOpTriviallyDead(&o))
        o.erase();
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

#define GET_OP_CLASSES
#include "zero/ZeroOps.cpp.inc"
