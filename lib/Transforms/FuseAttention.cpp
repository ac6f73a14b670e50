//===- FuseAttention.cpp - scaled dot-product attention as one op ---------===//
//
// PyTorch's exported scaled_dot_product_attention is, per layer: the three
// projections reshaped to [B, S, H, D] and transposed to [B, H, S, D]; q and
// k^T each scaled by sqrt(1/sqrt(D)); their product; the mask added, the
// softmax and its NaN guard (zero.bias_softmax); the product with v; and the
// transpose back. zero.attention computes the same from the untransposed
// projections without storing the [B, H, S, S] scores. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "zcc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

namespace zcc {
#define GEN_PASS_DEF_ZEROFUSEATTENTION
#include "zcc/Transforms/Passes.h.inc"
} // namespace zcc

using namespace mlir;
using namespace zcc::zero;

namespace {

/// |x| rounded to the float type of |v|'s elements.
double roundTo(double x, Value v) {
  auto type = cast<FloatType>(cast<RankedTensorType>(v.getType()).getElementType());
  APFloat f(x);
  bool lost;
  f.convert(type.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
  return f.convertToDouble();
}

/// The value of a scalar constant: a splat, or the sqrt or float cast of one
/// (mixed precision casts the exporter's float32 scale), rounded as computed.
std::optional<double> scalarConstant(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || type.getNumElements() != 1 || !isa<FloatType>(type.getElementType()))
    return std::nullopt;
  if (auto sqrt = v.getDefiningOp<SqrtOp>()) {
    auto inner = scalarConstant(sqrt.getOperand());
    if (!inner || *inner < 0)
      return std::nullopt;
    return roundTo(std::sqrt(*inner), v);
  }
  if (auto cast = v.getDefiningOp<CastOp>()) {
    auto inner = scalarConstant(cast.getOperand());
    return inner ? std::optional<double>(roundTo(*inner, v)) : std::nullopt;
  }
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  return (*attr.getValues<APFloat>().begin()).convertToDouble();
}

/// Strips multiplications by scalar constants off |v|, multiplying |scale|.
Value peelScale(Value v, double &scale) {
  while (auto mul = v.getDefiningOp<MulOp>()) {
    if (auto c = scalarConstant(mul.getRhs())) {
      scale *= *c;
      v = mul.getLhs();
    } else if (auto c = scalarConstant(mul.getLhs())) {
      scale *= *c;
      v = mul.getRhs();
    } else {
      break;
    }
  }
  return v;
}

/// Logit soft-capping around the scores, c tanh(x / c) (Gemma 2's
/// attn_logit_softcapping; the division may be a multiplication by 1 / c):
/// returns x and sets |cap|, or |v| itself. The two constants must agree to
/// the precision of the scores' type.
Value peelSoftcap(Value v, std::optional<double> &cap) {
  auto outer = v.getDefiningOp<MulOp>();
  if (!outer)
    return v;
  auto c = scalarConstant(outer.getRhs());
  Value tanhOut = outer.getLhs();
  if (!c) {
    c = scalarConstant(outer.getLhs());
    tanhOut = outer.getRhs();
  }
  auto tanh = tanhOut.getDefiningOp<TanhOp>();
  if (!c || !tanh || !(*c > 0))
    return v;
  auto type = cast<FloatType>(cast<RankedTensorType>(v.getType()).getElementType());
  double tolerance = type.isF32() || type.isF64() ? 1e-6 : 1e-2;
  Value inner = tanh.getOperand();
  double inverse = 0;
  if (auto div = inner.getDefiningOp<DivOp>()) {
    auto d = scalarConstant(div.getRhs());
    if (!d || !(*d > 0))
      return v;
    inverse = 1 / *d;
    inner = div.getLhs();
  } else if (auto mul = inner.getDefiningOp<MulOp>()) {
    auto r = scalarConstant(mul.getRhs());
    inner = mul.getLhs();
    if (!r) {
      r = scalarConstant(mul.getLhs());
      inner = mul.getRhs();
    }
    if (!r)
      return v;
    inverse = *r;
  } else {
    return v;
  }
  if (std::abs(inverse * *c - 1) > tolerance)
    return v;
  cap = *c;
  return inner;
}

bool isTranspose(Value v, ArrayRef<int64_t> perm) {
  auto t = v.getDefiningOp<TransposeOp>();
  return t && t.getPermutation() == perm;
}

/// x [B, S, H, D] when |v| is x transposed to [B, H, S, D].
Value headsOut(Value v) {
  return isTranspose(v, {0, 2, 1, 3}) ? v.getDefiningOp<TransposeOp>().getInput() : Value();
}

/// A [B, S, H, D] operand of the fused op: |value| itself, or |value|
/// transposed by |perm| (inserted only once the whole pattern matched).
struct Layout {
  Value value;
  SmallVector<int64_t, 4> perm;
  RankedTensorType type() const {
    auto t = cast<RankedTensorType>(value.getType());
    if (perm.empty())
      return t;
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(t.getDimSize(p));
    return RankedTensorType::get(shape, t.getElementType());
  }
  Value materialize(OpBuilder &b, Location loc) const {
    return perm.empty()
               ? value
               : TransposeOp::create(b, loc, value, b.getDenseI64ArrayAttr(perm)).getResult();
  }
};

/// y [B, Hk, S, D] when |x| [B, H, S, D] is y with each head repeated H / Hk
/// times (transformers' repeat_kv for grouped-query attention: reshape to
/// [B, Hk, 1, S, D], expand to [B, Hk, H / Hk, S, D], reshape to
/// [B, H, S, D]); else |x|. zero.attention reads the shared heads directly.
Value unrepeated(Value x) {
  auto outer = x.getDefiningOp<ReshapeOp>();
  auto expand = outer ? outer.getInput().getDefiningOp<ExpandOp>() : ExpandOp();
  auto inner = expand ? expand.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!inner)
    return x;
  auto y = cast<RankedTensorType>(inner.getInput().getType());
  auto xt = cast<RankedTensorType>(x.getType());
  auto e = cast<RankedTensorType>(expand.getType());
  if (y.getRank() != 4 || xt.getRank() != 4 || !y.hasStaticShape())
    return x;
  int64_t b = y.getDimSize(0), hk = y.getDimSize(1), s = y.getDimSize(2), d = y.getDimSize(3);
  if (hk < 1 || xt.getDimSize(1) % hk != 0)
    return x;
  int64_t g = xt.getDimSize(1) / hk;
  if (cast<RankedTensorType>(inner.getType()).getShape() != ArrayRef<int64_t>{b, hk, 1, s, d} ||
      e.getShape() != ArrayRef<int64_t>{b, hk, g, s, d} ||
      xt.getShape() != ArrayRef<int64_t>{b, hk * g, s, d})
    return x;
  return inner.getInput();
}

/// The [B, S, H, D] form of |x| [B, H, S, D]: the projection it was
/// transposed from (GPT-2, BERT), or a transpose of it (Llama applies RoPE
/// and repeats grouped k/v heads after transposing: those values exist only
/// in [B, H, S, D]).
std::optional<Layout> asHeadsLast(Value x) {
  x = unrepeated(x);
  if (Value y = headsOut(x))
    return Layout{y, {}};
  auto t = dyn_cast<RankedTensorType>(x.getType());
  if (!t || t.getRank() != 4)
    return std::nullopt;
  return Layout{x, {0, 2, 1, 3}};
}

/// t when |kt| [B, H, D, S] is the exporter's reshape(transpose(reshape(t,
/// [B H, S, D]), [0, 2, 1])): t [B, H, S, D], or t [B, Hk, H / Hk, S, D] the
/// grouped heads repeated (then y [B, Hk, S, D] of t = expand(reshape(y))).
Value flatTransposeSource(Value kt) {
  auto outer = kt.getDefiningOp<ReshapeOp>();
  if (!outer || !isTranspose(outer.getInput(), {0, 2, 1}))
    return Value();
  auto inner = outer.getInput().getDefiningOp<TransposeOp>().getInput().getDefiningOp<ReshapeOp>();
  if (!inner)
    return Value();
  auto k = cast<RankedTensorType>(kt.getType());
  auto flat = cast<RankedTensorType>(inner.getType());
  auto t = cast<RankedTensorType>(inner.getInput().getType());
  if (k.getRank() != 4 || flat.getRank() != 3 || !k.hasStaticShape() ||
      flat.getShape() !=
          ArrayRef<int64_t>{k.getDimSize(0) * k.getDimSize(1), k.getDimSize(3), k.getDimSize(2)})
    return Value();
  if (t.getRank() == 4 && t.getShape() == ArrayRef<int64_t>{k.getDimSize(0), k.getDimSize(1),
                                                            k.getDimSize(3), k.getDimSize(2)})
    return inner.getInput();
  // The repeat: [B, Hk, g, S, D] = expand(reshape(y [B, Hk, S, D])).
  auto expand = inner.getInput().getDefiningOp<ExpandOp>();
  auto unit = expand ? expand.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!unit || t.getRank() != 5 || t.getDimSize(0) != k.getDimSize(0) ||
      t.getDimSize(1) * t.getDimSize(2) != k.getDimSize(1) || t.getDimSize(3) != k.getDimSize(3) ||
      t.getDimSize(4) != k.getDimSize(2))
    return Value();
  auto y = cast<RankedTensorType>(unit.getInput().getType());
  if (y.getShape() !=
          ArrayRef<int64_t>{t.getDimSize(0), t.getDimSize(1), t.getDimSize(3), t.getDimSize(4)} ||
      cast<RankedTensorType>(unit.getType()).getShape() !=
          ArrayRef<int64_t>{t.getDimSize(0), t.getDimSize(1), 1, t.getDimSize(3), t.getDimSize(4)})
    return Value();
  return unit.getInput();
}

/// The same for k given as k^T [B, H, D, Sk].
std::optional<Layout> asHeadsLastKt(Value kt) {
  if (isTranspose(kt, {0, 2, 3, 1}))
    return Layout{kt.getDefiningOp<TransposeOp>().getInput(), {}};
  if (Value t = flatTransposeSource(kt))
    return asHeadsLast(t);
  if (isTranspose(kt, {0, 1, 3, 2}))
    return asHeadsLast(kt.getDefiningOp<TransposeOp>().getInput());
  auto t = dyn_cast<RankedTensorType>(kt.getType());
  if (!t || t.getRank() != 4)
    return std::nullopt;
  return Layout{kt, {0, 3, 1, 2}};
}

/// True if |v| is computed from a trainable global (a mask that learns).
bool dependsOnTrainable(Value v, ModuleOp module) {
  SmallVector<Value> stack{v};
  DenseSet<Value> seen;
  while (!stack.empty()) {
    Value x = stack.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    Operation *def = x.getDefiningOp();
    if (!def)
      continue;
    if (auto load = dyn_cast<LoadOp>(def)) {
      auto global = module.lookupSymbol<GlobalOp>(load.getGlobalAttr());
      if (global && global.getTrainable())
        return true;
      continue;
    }
    llvm::append_range(stack, def->getOperands());
  }
  return false;
}

/// qkv [B, S, 3, H, D] (a view of the projection) when q, k and v [B, S, H, D]
/// are its three equal parts along the last axis, in that order: the
/// reshaped results of one split of a [B, S, 3 H D] tensor.
Value packedProjection(Value q, Value k, Value v, OpBuilder &builder, Location loc) {
  auto part = [](Value x, unsigned index) -> SplitOp {
    auto reshape = x.getDefiningOp<ReshapeOp>();
    if (!reshape)
      return nullptr;
    auto split = reshape.getInput().getDefiningOp<SplitOp>();
    auto result = dyn_cast<OpResult>(reshape.getInput());
    return split && result.getResultNumber() == index ? split : nullptr;
  };
  SplitOp split = part(q, 0);
  if (!split || part(k, 1) != split || part(v, 2) != split || split.getNumResults() != 3)
    return Value();
  auto whole = cast<RankedTensorType>(split.getInput().getType());
  auto qt = cast<RankedTensorType>(q.getType());
  int64_t e = qt.getDimSize(2) * qt.getDimSize(3), axis = split.getAxis();
  if (whole.getRank() != 3 || (axis != 2 && axis != -1) ||
      whole.getShape() != ArrayRef<int64_t>{qt.getDimSize(0), qt.getDimSize(1), 3 * e})
    return Value();
  auto packed = RankedTensorType::get(
      {qt.getDimSize(0), qt.getDimSize(1), 3, qt.getDimSize(2), qt.getDimSize(3)},
      qt.getElementType());
  return ReshapeOp::create(builder, loc, packed, split.getInput());
}

/// Element k of a constant (dense, or the importer's resource blob) as a
/// double: floats of 16 and 32 bits and booleans.
std::optional<std::function<double(int64_t)>> elementValues(ElementsAttr attr) {
  Type et = attr.getElementType();
  if (auto dense = dyn_cast<DenseElementsAttr>(attr)) {
    if (dense.isSplat()) {
      double x = et.isInteger(1)        ? (double)dense.getSplatValue<bool>()
                 : isa<FloatType>(et)   ? dense.getSplatValue<APFloat>().convertToDouble()
                 : isa<IntegerType>(et) ? (double)dense.getSplatValue<APInt>().getSExtValue()
                                        : std::nan("");
      return [x](int64_t) { return x; };
    }
    if (et.isInteger(1)) {
      auto values = dense.getValues<bool>();
      return [values](int64_t k) { return values[k] ? 1.0 : 0.0; };
    }
    if (et.isF32()) {
      auto values = dense.getValues<float>();
      return [values](int64_t k) { return (double)values[k]; };
    }
    if (et.isInteger(64) || et.isInteger(32)) {
      auto values = dense.getValues<APInt>();
      return [values](int64_t k) { return (double)values[k].getSExtValue(); };
    }
    if (isa<FloatType>(et)) {
      auto values = dense.getValues<APFloat>();
      return [values](int64_t k) { return values[k].convertToDouble(); };
    }
    return std::nullopt;
  }
  auto resource = dyn_cast<DenseResourceElementsAttr>(attr);
  AsmResourceBlob *blob = resource ? resource.getRawHandle().getBlob() : nullptr;
  if (!blob)
    return std::nullopt;
  ArrayRef<char> data = blob->getData();
  int64_t n = attr.getNumElements();
  auto fits = [&](int64_t bytes) { return (int64_t)data.size() == n * bytes; };
  if (et.isF32() && fits(4))
    return [data](int64_t k) {
      float x;
      std::memcpy(&x, data.data() + 4 * k, 4);
      return (double)x;
    };
  if ((et.isBF16() || et.isF16()) && fits(2)) {
    const llvm::fltSemantics &sem = cast<FloatType>(et).getFloatSemantics();
    return [data, &sem](int64_t k) {
      uint16_t bits;
      std::memcpy(&bits, data.data() + 2 * k, 2);
      return APFloat(sem, APInt(16, bits)).convertToDouble();
    };
  }
  if (et.isInteger(1) && fits(1))
    return [data](int64_t k) { return data[k] != 0 ? 1.0 : 0.0; };
  return std::nullopt;
}

/// The value of the frozen scalar global |load| reads (exporters lift the
/// mask's 0 into one), if nothing stores to it.
std::optional<double> frozenScalar(LoadOp load, ModuleOp module) {
  auto global = module.lookupSymbol<GlobalOp>(load.getGlobalAttr());
  // (zcc --weights external leaves parameters' and buffers' values unread.)
  if (!global || global.getTrainable() || !global.getInitialValue() ||
      zcc::zero::attrs(global).getValueNotReadAttrHelper().isAttrPresent(global))
    return std::nullopt;
  ElementsAttr init = *global.getInitialValue();
  std::optional<std::function<double(int64_t)>> value = elementValues(init);
  if (init.getNumElements() != 1 || !value)
    return std::nullopt;
  bool stored = false;
  module.walk([&](StoreOp store) { stored |= store.getGlobal() == global.getSymName(); });
  if (stored)
    return std::nullopt;
  return (*value)(0);
}

/// Row (b, h, i) of a mask [B|1, H|1, Sq, Sk] computed from constants
/// alone: fills row[0, Sk).
using MaskRow = std::function<void(int64_t b, int64_t h, int64_t i, double *row)>;

/// |v| row by row (its shape broadcast to the mask's from the right, the
/// mask's rows |sk| long), when it is a constant, a frozen scalar, a cast of
/// one (casts keep 0 and the large negatives the classification looks for),
/// comparisons and logic of such (transformers' mask functions, traced with
/// constant positions and document ids), or where(such, such, such).
std::optional<MaskRow> constantMask(Value v, int64_t sk, ModuleOp module) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || type.getRank() > 4 || !type.hasStaticShape() ||
      (type.getRank() > 0 && type.getShape().back() != 1 && type.getShape().back() != sk))
    return std::nullopt;
  // Strides of the broadcast view: 0 along the dims of size 1.
  std::array<int64_t, 4> stride{0, 0, 0, 0};
  for (int64_t d = type.getRank() - 1, step = 1; d >= 0; --d) {
    int64_t axis = 4 - type.getRank() + d;
    stride[axis] = type.getDimSize(d) == 1 ? 0 : step;
    step *= type.getDimSize(d);
  }
  // An elementwise combination of operand rows (scratch rows per call).
  auto combine = [&](ValueRange operands, auto op) -> std::optional<MaskRow> {
    SmallVector<MaskRow> rows;
    for (Value x : operands) {
      std::optional<MaskRow> r = constantMask(x, sk, module);
      if (!r)
        return std::nullopt;
      rows.push_back(*r);
    }
    auto scratch = std::make_shared<std::vector<double>>(rows.size() * sk);
    return MaskRow([rows, scratch, sk, op](int64_t b, int64_t h, int64_t i, double *row) {
      for (size_t k = 0; k < rows.size(); ++k)
        rows[k](b, h, i, scratch->data() + k * sk);
      const double *x = scratch->data();
      for (int64_t j = 0; j < sk; ++j)
        row[j] = op(x, j, sk);
    });
  };
  if (auto cast = v.getDefiningOp<CastOp>())
    return isa<FloatType>(type.getElementType()) ? constantMask(cast.getOperand(), sk, module)
                                                 : std::nullopt;
  if (auto load = v.getDefiningOp<LoadOp>()) {
    std::optional<double> x = frozenScalar(load, module);
    if (!x)
      return std::nullopt;
    double value = *x;
    return MaskRow(
        [value, sk](int64_t, int64_t, int64_t, double *row) { std::fill(row, row + sk, value); });
  }
  if (auto cmp = v.getDefiningOp<CmpOp>()) {
    CmpPredicate pred = cmp.getPredicate();
    return combine(cmp->getOperands(), [pred](const double *x, int64_t j, int64_t n) {
      double a = x[j], b = x[n + j];
      switch (pred) {
      case CmpPredicate::eq:
        return (double)(a == b);
      case CmpPredicate::ne:
        return (double)(a != b);
      case CmpPredicate::lt:
        return (double)(a < b);
      case CmpPredicate::le:
        return (double)(a <= b);
      case CmpPredicate::gt:
        return (double)(a > b);
      case CmpPredicate::ge:
        return (double)(a >= b);
      }
      return std::nan("");
    });
  }
  if (isa_and_nonnull<AndOp>(v.getDefiningOp()))
    return combine(v.getDefiningOp()->getOperands(), [](const double *x, int64_t j, int64_t n) {
      return (double)(x[j] != 0 && x[n + j] != 0);
    });
  if (isa_and_nonnull<OrOp>(v.getDefiningOp()))
    return combine(v.getDefiningOp()->getOperands(), [](const double *x, int64_t j, int64_t n) {
      return (double)(x[j] != 0 || x[n + j] != 0);
    });
  if (auto no = v.getDefiningOp<NotOp>())
    return combine(no->getOperands(),
                   [](const double *x, int64_t j, int64_t) { return (double)(x[j] == 0); });
  if (auto where = v.getDefiningOp<WhereOp>())
    return combine(where->getOperands(), [](const double *x, int64_t j, int64_t n) {
      return x[j] != 0 ? x[n + j] : x[2 * n + j];
    });
  ElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  std::optional<std::function<double(int64_t)>> values = elementValues(attr);
  if (!values)
    return std::nullopt;
  return MaskRow([values = *values, stride, sk](int64_t b, int64_t h, int64_t i, double *row) {
    int64_t base = b * stride[0] + h * stride[1] + i * stride[2];
    if (stride[3] == 0)
      std::fill(row, row + sk, values(base));
    else
      for (int64_t j = 0; j < sk; ++j)
        row[j] = values(base + j);
  });
}

/// What a constant mask [B|1, H|1, S, S] is, when it is structural: key j
/// kept for query i where j <= i (causal) and, with a window w, j > i - w,
/// or every key kept (no mask). A kept element is 0; a dropped one -inf or
/// at most float16's lowest (-65504: what exporters write as the type's
/// minimum, saturated by mixed precision), whose exp underflows to 0 next
/// to any kept score, so the probabilities are those of -inf (every row
/// keeps its diagonal). Every element is read: anything else, and the bias
/// stays a tensor.
struct StructuredMask {
  bool causal = false;
  std::optional<int64_t> window;
};
std::optional<StructuredMask> structuredMask(Value bias, ModuleOp module) {
  auto type = cast<RankedTensorType>(bias.getType());
  int64_t bb = type.getDimSize(0), hb = type.getDimSize(1), sq = type.getDimSize(2),
          sk = type.getDimSize(3);
  std::optional<MaskRow> rowOf = constantMask(bias, sk, module);
  if (!rowOf || sq < 1)
    return std::nullopt;
  auto kept = [](double x) { return x == 0; };
  auto dropped = [](double x) { return x <= -65504.0; };
  std::vector<double> row(sk);
  // The first row's last key says whether it is causal, the last row's run
  // of kept keys the window; then every element must agree.
  StructuredMask mask;
  (*rowOf)(0, 0, 0, row.data());
  mask.causal = sk > 1 && dropped(row[sk - 1]);
  if (mask.causal) {
    if (sq != sk)
      return std::nullopt;
    (*rowOf)(0, 0, sq - 1, row.data());
    int64_t run = llvm::count_if(row, kept);
    if (run < sk)
      mask.window = run;
  }
  int64_t w = mask.window.value_or(sk + 1);
  for (int64_t b = 0; b < bb; ++b)
    for (int64_t h = 0; h < hb; ++h)
      for (int64_t i = 0; i < sq; ++i) {
        (*rowOf)(b, h, i, row.data());
        for (int64_t j = 0; j < sk; ++j) {
          bool keep = !mask.causal || (j <= i && j > i - w);
          if (keep ? !kept(row[j]) : !dropped(row[j]))
            return std::nullopt;
        }
      }
  return mask;
}

struct ZeroFuseAttention : zcc::impl::ZeroFuseAttentionBase<ZeroFuseAttention> {
  using ZeroFuseAttentionBase::ZeroFuseAttentionBase;

  /// Each mask classified once (every layer adds the same one).
  llvm::DenseMap<Value, std::optional<StructuredMask>> structuredMasks;

  /// The per-document positions [B, S] (option `documents`), if any.
  Value positions;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward)
      return;
    if (!documents.empty()) {
      for (BlockArgument arg : forward.getArguments())
        if (auto name = forward.getArgAttrOfType<StringAttr>(
                arg.getArgNumber(), zcc::zero::ZeroDialect::InputAttrHelper::getNameStr());
            name && name.getValue() == documents)
          positions = arg;
      auto type = positions ? dyn_cast<RankedTensorType>(positions.getType()) : nullptr;
      if (!type || type.getRank() != 2 || !type.getElementType().isInteger()) {
        module.emitError() << "per-document attention: @forward has no integer [batch, sequence] "
                              "input '"
                           << documents << "'";
        return signalPassFailure();
      }
    }
    SmallVector<BiasSoftmaxOp> candidates;
    forward.walk([&](BiasSoftmaxOp op) { candidates.push_back(op); });
    int64_t fused = 0;
    for (BiasSoftmaxOp softmax : candidates)
      fused += succeeded(fuse(softmax, module));
    if (fused) {
      // The transposes and scalings the fused ops no longer read.
      Block &block = forward.getBody().front();
      for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
        if (op.use_empty() && !isa<func::ReturnOp>(op) && isMemoryEffectFree(&op))
          op.erase();
      zcc::zero::attrs(module).getFusedAttentionAttrHelper().setAttr(
          module, Builder(module.getContext()).getI64IntegerAttr(fused));
    }
    if (positions && failed(checkDocuments(forward, fused)))
      return signalPassFailure();
  }

  /// Per-document attention: every attention fused, each with the positions.
  LogicalResult checkDocuments(func::FuncOp forward, int64_t fused) {
    const char *why = "; per-document attention (zcc --per-document) needs every attention fused "
                      "with a causal mask over the whole sequence, or its documents would see "
                      "each other";
    LogicalResult result = success();
    forward.walk([&](Operation *op) {
      if (isa<BiasSoftmaxOp>(op)) {
        op->emitError() << "this attention's softmax did not fuse into zero.attention (not "
                           "the product-softmax-product form zero-fuse-attention knows, a head "
                           "wider than "
                        << (int64_t)maxHeadDim
                        << ", probabilities read elsewhere, or a mask that depends on a parameter)"
                        << why;
        result = failure();
      } else if ((isa<AttentionOp>(op) && !cast<AttentionOp>(op).getPositions()) ||
                 (isa<AttentionPackedOp>(op) && !cast<AttentionPackedOp>(op).getPositions())) {
        op->emitError() << "this attention's mask is not causal over the sequence (a mask tensor, "
                           "cross-attention, or none)"
                        << why;
        result = failure();
      }
    });
    if (succeeded(result) && !fused)
      return forward.emitError() << "found no attention to fuse" << why;
    return result;
  }

  LogicalResult fuse(BiasSoftmaxOp softmax, ModuleOp module) {
    // The scale is on q and k (torch.onnx's SDPA) or on the scores.
    // Soft-capping (if any) wraps the scaled scores: c tanh(scale s / c).
    double scale = 1;
    std::optional<double> softcap;
    Value capped = peelSoftcap(softmax.getInput(), softcap);
    if (softcap && (!capped.hasOneUse() || !softmax.getInput().hasOneUse()))
      return failure();
    auto scores = peelScale(capped, scale).getDefiningOp<MatmulOp>();
    if (!scores || scores.getTransposeLhs() || !softmax->hasOneUse() || !scores->hasOneUse())
      return failure();
    auto pv = dyn_cast<MatmulOp>(*softmax->getUsers().begin());
    if (!pv || pv.getLhs() != softmax.getResult() || pv.getTransposeLhs() || pv.getTransposeRhs())
      return failure();
    std::optional<Layout> qIn = asHeadsLast(peelScale(scores.getLhs(), scale));
    Value kt = peelScale(scores.getRhs(), scale);
    std::optional<Layout> kIn = scores.getTransposeRhs() ? asHeadsLast(kt) : asHeadsLastKt(kt);
    std::optional<Layout> vIn = asHeadsLast(pv.getRhs());
    if (!qIn || !kIn || !vIn)
      return failure();
    auto qt = qIn->type(), kType = kIn->type();
    auto bias = cast<RankedTensorType>(softmax.getBias().getType());
    int64_t b = qt.getDimSize(0), sq = qt.getDimSize(1), h = qt.getDimSize(2), d = qt.getDimSize(3);
    int64_t hk = kType.getDimSize(2);
    if (!qt.hasStaticShape() || d > maxHeadDim || kType != vIn->type() || hk < 1 || h % hk ||
        kType.getShape() != ArrayRef<int64_t>{b, kType.getDimSize(1), hk, d} ||
        bias.getRank() != 4 || dependsOnTrainable(softmax.getBias(), module))
      return failure();
    int64_t sk = kType.getDimSize(1);
    if ((bias.getDimSize(0) != 1 && bias.getDimSize(0) != b) ||
        (bias.getDimSize(1) != 1 && bias.getDimSize(1) != h) || bias.getDimSize(2) != sq ||
        bias.getDimSize(3) != sk)
      return failure();

    OpBuilder builder(pv);
    // A constant causal (or sliding-window, or empty) mask becomes the op's
    // attributes: the kernels form it from the indices, and nothing of size
    // Sq x Sk is left in the step.
    Value mask = softmax.getBias();
    UnitAttr causal;
    IntegerAttr window;
    auto known = structuredMasks.find(mask);
    if (known == structuredMasks.end())
      known = structuredMasks.try_emplace(mask, structuredMask(mask, module)).first;
    if (std::optional<StructuredMask> structured = known->second) {
      mask = Value();
      causal = structured->causal ? builder.getUnitAttr() : nullptr;
      window = structured->window ? builder.getI64IntegerAttr(*structured->window) : nullptr;
    } else if (softcap) {
      return failure(); // the kernels take soft-capping with a structural mask only
    }
    // Packed documents: a causal self-attention over the positions' tokens
    // keeps each query in its document (checkDocuments names the others).
    Value positions;
    if (this->positions && causal && !mask &&
        cast<RankedTensorType>(this->positions.getType()).getShape() == ArrayRef<int64_t>{b, sq} &&
        sk == sq)
      positions = this->positions;
    FloatAttr softcapAttr = softcap ? builder.getF64FloatAttr(*softcap) : nullptr;
    Value q = qIn->materialize(builder, pv.getLoc()), k = kIn->materialize(builder, pv.getLoc()),
          v = vIn->materialize(builder, pv.getLoc());
    auto lseType = RankedTensorType::get({b, h, sq}, builder.getF32Type());
    auto attention = AttentionOp::create(builder, pv.getLoc(), TypeRange{qt, lseType}, q, k, v,
                                         mask, positions, builder.getF64FloatAttr(scale),
                                         softmax.getNanToZeroAttr(), causal, window, softcapAttr);
    Value result = attention.getResult();
    if (Value qkv = packedProjection(q, k, v, builder, pv.getLoc())) {
      auto packed = AttentionPackedOp::create(
          builder, pv.getLoc(), TypeRange{qt, lseType}, qkv, mask, positions,
          builder.getF64FloatAttr(scale), softmax.getNanToZeroAttr(), causal, window, softcapAttr);
      attention.erase();
      result = packed.getResult();
    }
    // The [B, H, Sq, D] product: its transpose back to [B, Sq, H, D] is the
    // fused result; any other reader gets the result with its heads out.
    Value headsOutResult;
    for (OpOperand &use : llvm::make_early_inc_range(pv->getUses())) {
      auto back = dyn_cast<TransposeOp>(use.getOwner());
      if (back && back.getPermutation() == ArrayRef<int64_t>{0, 2, 1, 3}) {
        back.getResult().replaceAllUsesWith(result);
        continue;
      }
      if (!headsOutResult)
        headsOutResult = TransposeOp::create(builder, pv.getLoc(), result,
                                             builder.getDenseI64ArrayAttr({0, 2, 1, 3}));
      use.set(headsOutResult);
    }
    return success();
  }
};

} // namespace
