//===- ZeroOpsTraining.cpp - verifiers of the step's training ops ---------===//
//
// The zero ops the compiler's passes add or fuse beyond the model's own:
// softmax, the GEMM epilogues, generated elementwise kernels and grouped
// casts, attention, the norms, the loss, the optimizers, the collectives
// and quantization (ZeroOps.cpp holds the rest and the op classes).
//
//===----------------------------------------------------------------------===//
#include "ZeroOpsSupport.h"
#include "kernels/KernelId.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace zcc::zero;

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
