//===- OnnxImporter.cpp - ONNX to zero dialect ----------------------------===//
//
// Translates an ONNX ModelProto into the zero dialect:
//  - float initializers become `zero.global`s (trainable or frozen by regex),
//    other initializers become import-time constants (OnnxInputs.cpp);
//  - graph inputs get static shapes (--micro-batch, --input-shape; the same);
//  - every node whose inputs are all known at import is evaluated on the host
//    (ConstantFolder.cpp), so shape computation disappears;
//  - the remaining nodes become zero ops located at their ONNX node.
//
//===----------------------------------------------------------------------===//
#include "zcc/Import/OnnxImporter.h"
#include "zcc/Import/ExportRecord.h"

#include "OnnxImporterImpl.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"

#include "onnx/defs/parser.h"
#include "support/JsonDepth.h"
#include <google/protobuf/io/coded_stream.h>

#include <memory>

using namespace mlir;
using namespace zcc;
using namespace zcc::onnx_import;
namespace zero = zcc::zero;

//===----------------------------------------------------------------------===//
// Supported ops
//===----------------------------------------------------------------------===//

namespace {
struct OpInfo {
  StringRef name;
  int minInputs, maxInputs;
};
} // namespace

// Input arity of every supported op (OnnxOps.def); checked before a node is
// folded or emitted so that a malformed node is an error, never an
// out-of-range read.
static const OpInfo kOps[] = {
#define ONNX_OP(NAME, MIN_INPUTS, MAX_INPUTS, EMIT) {#NAME, MIN_INPUTS, MAX_INPUTS},
#include "OnnxOps.def"
};

ArrayRef<StringRef> zcc::supportedOnnxOps() {
  static SmallVector<StringRef> names = [] {
    SmallVector<StringRef> n;
    for (const OpInfo &op : kOps)
      n.push_back(op.name);
    return n;
  }();
  return names;
}

static const OpInfo *findOp(StringRef name) {
  for (const OpInfo &op : kOps)
    if (op.name == name)
      return &op;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Types and constants
//===----------------------------------------------------------------------===//

Type OnnxImporter::elementType(int32_t t) {
  switch (t) {
  case kFloat:
    return builder.getF32Type();
  case kDouble:
    return builder.getF64Type();
  case kFloat16:
    return builder.getF16Type();
  case kBfloat16:
    return builder.getBF16Type();
  case kInt64:
  case kUint64:
    return builder.getI64Type();
  case kInt32:
  case kUint32:
    return builder.getI32Type();
  case kInt16:
  case kUint16:
    return builder.getI16Type();
  case kInt8:
  case kUint8:
    return builder.getI8Type();
  case kBool:
    return builder.getI1Type();
  default:
    return {};
  }
}

/// Bounds of the elements of an input: a constant's extremes, or what
/// rangeOf derived for a computed tensor.
static std::optional<std::pair<int64_t, int64_t>> boundsOf(const Entry *e) {
  if (!e)
    return std::nullopt;
  if (e->constant) {
    const HostTensor &t = *e->constant;
    if (t.isFloat() || t.numel() == 0)
      return std::nullopt;
    int64_t lo = (int64_t)t.getF(0), hi = lo;
    for (int64_t k = 1; k < t.numel(); ++k) {
      lo = std::min(lo, (int64_t)t.getF(k));
      hi = std::max(hi, (int64_t)t.getF(k));
    }
    return std::make_pair(lo, hi);
  }
  return e->range;
}

/// Bounds of the integer output of |node| from those of its inputs: the
/// positions TopK and ArgMax return are in [0, n), a comparison is 0 or 1,
/// and bounds pass through the ops of index arithmetic. A result whose bounds
/// meet (lo == hi) is a constant: torch.bincount's length max(max(x) + 1,
/// minlength) is minlength when x are a router's top-k positions below it,
/// which keeps a mixture of experts' load-balancing loss static.
static std::optional<std::pair<int64_t, int64_t>>
rangeOf(const onnx::NodeProto &node, ArrayRef<Entry *> inputs, unsigned output) {
  StringRef op = node.op_type();
  auto in = [&](size_t k) { return k < inputs.size() ? boundsOf(inputs[k]) : std::nullopt; };
  using R = std::optional<std::pair<int64_t, int64_t>>;
  if ((op == "TopK" && output == 1) || op == "ArgMax" || op == "ArgMin") {
    if (!inputs[0] || !inputs[0]->value)
      return std::nullopt;
    auto t = cast<RankedTensorType>(inputs[0]->value.getType());
    int64_t axis = attrInt(node, "axis", op == "TopK" ? -1 : 0);
    if (axis < 0)
      axis += t.getRank();
    if (axis < 0 || axis >= t.getRank() || t.isDynamicDim(axis))
      return std::nullopt;
    return std::make_pair<int64_t, int64_t>(0, t.getDimSize(axis) - 1);
  }
  if (op == "Equal" || op == "Greater" || op == "Less" || op == "GreaterOrEqual" ||
      op == "LessOrEqual" || op == "Not" || op == "And" || op == "Or" || op == "Xor" ||
      op == "IsNaN")
    return std::make_pair<int64_t, int64_t>(0, 1);
  if (op == "Cast" || op == "Identity" || op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" ||
      op == "Flatten" || op == "Expand" || op == "Transpose" || op == "Slice" ||
      op == "ReduceMax" || op == "ReduceMin" || op == "Tile")
    return in(0);
  if (op == "Gather" || op == "GatherElements" || op == "GatherND")
    return in(0);
  if (op == "Concat" || op == "Max" || op == "Min") {
    R acc;
    for (size_t k = 0; k < inputs.size(); ++k) {
      R r = in(k);
      if (!r)
        return std::nullopt;
      if (!acc)
        acc = r;
      else if (op == "Concat")
        acc = {std::min(acc->first, r->first), std::max(acc->second, r->second)};
      else if (op == "Max")
        acc = {std::max(acc->first, r->first), std::max(acc->second, r->second)};
      else
        acc = {std::min(acc->first, r->first), std::min(acc->second, r->second)};
    }
    return acc;
  }
  if (op == "Add" || op == "Sub" || op == "Mul") {
    R a = in(0), b = in(1);
    if (!a || !b)
      return std::nullopt;
    constexpr int64_t kLimit = int64_t(1) << 40; // far from overflow
    for (int64_t v : {a->first, a->second, b->first, b->second})
      if (v < -kLimit || v > kLimit)
        return std::nullopt;
    if (op == "Add")
      return std::make_pair(a->first + b->first, a->second + b->second);
    if (op == "Sub")
      return std::make_pair(a->first - b->second, a->second - b->first);
    int64_t p[] = {a->first * b->first, a->first * b->second, a->second * b->first,
                   a->second * b->second};
    return std::make_pair(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
  }
  return std::nullopt;
}

static int32_t onnxTypeOf(Type t) {
  if (t.isF32())
    return kFloat;
  if (t.isF64())
    return kDouble;
  if (t.isF16())
    return kFloat16;
  if (t.isBF16())
    return kBfloat16;
  if (t.isInteger(64))
    return kInt64;
  if (t.isInteger(32))
    return kInt32;
  if (t.isInteger(16))
    return kInt16;
  if (t.isInteger(8))
    return kInt8;
  if (t.isInteger(1))
    return kBool;
  return kUndefined;
}

DenseElementsAttr OnnxImporter::toAttr(const HostTensor &t) {
  auto type = RankedTensorType::get(t.shape, elementType(t.type));
  int64_t n = t.numel();
  bool splat = n > 0;
  for (int64_t k = 1; k < n && splat; ++k)
    splat = t.isFloat() ? t.f[k] == t.f[0] : t.i[k] == t.i[0];
  int64_t count = splat ? 1 : n;
  if (t.type == kBool) {
    SmallVector<bool> v;
    for (int64_t k = 0; k < count; ++k)
      v.push_back(t.i[k] != 0);
    return splat ? DenseElementsAttr::get(type, v[0]) : DenseElementsAttr::get(type, v);
  }
  if (t.isFloat() && type.getElementType().isF32()) {
    // (Large float32 constants, such as a traced [1, 1, T, T] mask: no
    // APFloat per element.)
    std::vector<float> v(t.f.begin(), t.f.begin() + count);
    return splat ? DenseElementsAttr::get(type, v[0]) : DenseElementsAttr::get(type, ArrayRef(v));
  }
  if (t.isFloat()) {
    auto ft = cast<FloatType>(type.getElementType());
    SmallVector<APFloat> v;
    for (int64_t k = 0; k < count; ++k) {
      APFloat x(t.f[k]);
      bool lost;
      x.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      v.push_back(x);
    }
    return splat ? DenseElementsAttr::get(type, v[0]) : DenseElementsAttr::get(type, v);
  }
  unsigned width = type.getElementType().getIntOrFloatBitWidth();
  if (width == 64 && !splat)
    return DenseElementsAttr::get(type, ArrayRef<int64_t>(t.i));
  SmallVector<APInt> v;
  for (int64_t k = 0; k < count; ++k)
    v.push_back(APInt(width, (uint64_t)t.i[k], /*isSigned=*/true, /*implicitTrunc=*/true));
  return splat ? DenseElementsAttr::get(type, v[0]) : DenseElementsAttr::get(type, v);
}

Value OnnxImporter::materialize(Entry &e, Location loc) {
  if (!e.value)
    e.value = zero::ConstantOp::create(builder, loc, toAttr(*e.constant));
  return e.value;
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

Value OnnxImporter::dropoutRng(Location loc) {
  if (!dropoutRngArg) {
    unsigned k = forward.getNumArguments();
    auto type = RankedTensorType::get({2}, builder.getI64Type());
    if (failed(forward.insertArgument(k, type,
                                      builder.getDictionaryAttr(builder.getNamedAttr(
                                          zero::ZeroDialect::InputAttrHelper::getNameStr(),
                                          builder.getStringAttr("dropout_rng"))),
                                      loc)))
      return {};
    dropoutRngArg = forward.getArgument(k);
  }
  return dropoutRngArg;
}

LogicalResult OnnxImporter::importNode(const onnx::NodeProto &node) {
  const std::string &op = node.op_type();
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return nodeError(node) << "unsupported op '" << op << "' of domain '" << node.domain()
                           << "' (opset " << opset
                           << " of the default domain); zcc imports only ops of the "
                              "default ONNX domain: re-export without custom ops";
  }
  const OpInfo *info = findOp(op);
  if (!info)
    return nodeError(node) << "unsupported op '" << op << "' (domain 'ai.onnx', opset " << opset
                           << "); supported ops: " << llvm::join(supportedOnnxOps(), ", ");
  if (node.input_size() < info->minInputs || node.input_size() > info->maxInputs)
    return nodeError(node) << "has " << node.input_size() << " inputs; " << op << " takes "
                           << info->minInputs
                           << (info->maxInputs == info->minInputs
                                   ? std::string()
                                   : " to " + std::to_string(std::min(info->maxInputs, 99)))
                           << (info->maxInputs > 99 ? " or more" : "");
  if (node.output_size() < 1)
    return nodeError(node) << "has no outputs";
  for (int k = 0; k < info->minInputs; ++k)
    if (node.input(k).empty())
      return nodeError(node) << "required input " << k << " is missing";

  // Sequence ops work on lists of entries.
  if (op == "SequenceAt") {
    auto seq = sequences.find(node.input(0));
    if (seq == sequences.end())
      return nodeError(node) << "input '" << node.input(0) << "' is not a known sequence";
    auto pos = values.find(node.input(1));
    if (pos == values.end() || !pos->second.constant || pos->second.constant->numel() != 1)
      return nodeError(node) << "the position must be a constant scalar";
    int64_t k = pos->second.constant->getI(0), n = seq->second.size();
    if (k < 0)
      k += n;
    if (k < 0 || k >= n)
      return nodeError(node) << "position " << pos->second.constant->getI(0)
                             << " is out of range for a sequence of " << n;
    values[node.output(0)] = seq->second[k];
    return success();
  }

  SmallVector<Entry *> inputs;
  bool allConstant = true;
  for (const std::string &name : node.input()) {
    if (name.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    auto it = values.find(name);
    if (it == values.end())
      return nodeError(node) << "input '" << name
                             << "' is not produced by any earlier node, initializer or "
                                "graph input (the graph must be topologically sorted)";
    inputs.push_back(&it->second);
    allConstant &= it->second.constant != nullptr;
  }

  // zcc --per-document: where the token positions 0..S-1 become a float
  // (RoPE's angles) or the rows of a gather (learned position embeddings),
  // the node reads each token's position in its document instead. Their
  // other readers (the exporter's causal mask: integer comparisons) keep the
  // constant; zero-fuse-attention keeps attention inside the documents.
  Entry documentEntry;
  if (documentPositions) {
    int k = -1;
    if (op == "Cast") {
      int64_t to = kUndefined;
      for (const auto &a : node.attribute())
        if (a.name() == "to")
          to = a.i();
      k = isFloatType((int32_t)to) ? 0 : -1;
    } else if (op == "Gather") {
      k = 1;
    }
    if (k >= 0 && inputs[k] && inputs[k]->constant)
      if (Value v = positionsFor(*inputs[k]->constant, nodeLoc(node))) {
        documentEntry = Entry{nullptr, v, inputs[k]->constant->type};
        inputs[k] = &documentEntry;
        allConstant = false;
      }
  }

  // Shape and Size need only the static type: fold them on a tensor that
  // has a shape but no elements (the evaluator reads nothing else).
  if ((op == "Shape" || op == "Size") && !inputs[0]->constant) {
    auto type = cast<RankedTensorType>(inputs[0]->value.getType());
    HostTensor typeOnly;
    typeOnly.type = onnxTypeOf(type.getElementType());
    typeOnly.shape.assign(type.getShape().begin(), type.getShape().end());
    const HostTensor *in[] = {&typeOnly};
    std::vector<HostTensor> out;
    std::string error;
    if (foldNode(node, opset, in, out, error) != FoldStatus::Folded)
      return nodeError(node) << error;
    values[node.output(0)] =
        Entry{std::make_shared<HostTensor>(std::move(out[0])), Value(), kInt64};
    return success();
  }

  if (op == "Constant") {
    auto host = std::make_shared<HostTensor>();
    std::string error;
    if (node.attribute_size() != 1)
      return nodeError(node) << "needs exactly one value attribute";
    const auto &a = node.attribute(0);
    if (a.name() == "value") {
      if (!toHostTensor(a.t(), *host, error))
        return nodeError(node) << error;
    } else if (a.name() == "value_float" || a.name() == "value_int") {
      *host = HostTensor(a.name() == "value_float" ? kFloat : kInt64, {});
      host->set(0, a.name() == "value_float" ? (double)a.f() : (double)a.i());
    } else if (a.name() == "value_floats") {
      *host = HostTensor(kFloat, {(int64_t)a.floats_size()});
      for (int k = 0; k < a.floats_size(); ++k)
        host->f[k] = a.floats(k);
    } else if (a.name() == "value_ints") {
      *host = HostTensor(kInt64, {(int64_t)a.ints_size()});
      for (int k = 0; k < a.ints_size(); ++k)
        host->i[k] = a.ints(k);
    } else {
      return nodeError(node) << "attribute '" << a.name() << "' is not supported";
    }
    values[node.output(0)] = Entry{host, Value(), host->type};
    return success();
  }

  // Broadcasts that grow a tensor past a small size stay ops, so that a
  // [batch, 1, T, T] mask is not spelled out in the IR. (Also elementwise
  // ops whose broadcasting grows the result: a float [batch, 1, T, T]
  // additive mask made by Where from a [1, 1, T, T] one would be 16 MB of
  // plan per copy at batch 4.)
  bool broadcasting = op == "Expand" || op == "Where" || op == "Add" || op == "Sub" ||
                      op == "Mul" || op == "Div" || op == "And" || op == "Or" || op == "Equal" ||
                      op == "Less" || op == "Greater" || op == "LessOrEqual" ||
                      op == "GreaterOrEqual";
  if (allConstant && broadcasting) {
    int64_t largestIn = 0;
    for (Entry *e : inputs)
      if (e && e->constant)
        largestIn = std::max(largestIn, e->constant->numel());
    // Such a result is not even computed when its broadcast shape says it
    // would stay an op (a [1, 1, T, 1] == [1, 1, 1, T] comparison at 32k
    // tokens would be 8 GB of int64 on the host).
    SmallVector<int64_t> shape;
    auto widen = [&](ArrayRef<int64_t> dims) {
      if (dims.size() > shape.size())
        shape.insert(shape.begin(), dims.size() - shape.size(), 1);
      for (size_t d = 0; d < dims.size(); ++d) {
        int64_t &to = shape[shape.size() - dims.size() + d];
        to = std::max(to, dims[d]);
      }
    };
    for (auto [k, e] : llvm::enumerate(inputs))
      if (e && e->constant)
        widen(op == "Expand" && k == 1 ? ArrayRef<int64_t>(e->constant->toInts())
                                       : ArrayRef<int64_t>(e->constant->shape));
    int64_t numel = 1;
    bool overflow = false;
    for (int64_t d : shape)
      overflow |= d < 0 || llvm::MulOverflow(numel, d, numel);
    if (overflow || (numel > (1 << 16) && numel > largestIn))
      allConstant = false;
  }
  if (allConstant) {
    SmallVector<const HostTensor *> in;
    for (Entry *e : inputs)
      in.push_back(e ? e->constant.get() : nullptr);
    int64_t largestIn = 0;
    for (const HostTensor *t : in)
      if (t)
        largestIn = std::max(largestIn, t->numel());
    std::vector<HostTensor> out;
    std::string error;
    FoldStatus status = foldNode(node, opset, in, out, error);
    if (status == FoldStatus::Error)
      return nodeError(node) << error;
    bool small = status == FoldStatus::Folded;
    for (const HostTensor &t : out)
      small &= t.numel() <= options.maxFoldElements &&
               !(broadcasting && t.numel() > (1 << 16) && t.numel() > largestIn);
    if (small) {
      if ((int)out.size() < node.output_size())
        return nodeError(node) << "produces " << out.size() << " outputs, the node names "
                               << node.output_size();
      for (int k = 0; k < node.output_size(); ++k)
        values[node.output(k)] =
            Entry{std::make_shared<HostTensor>(std::move(out[k])), Value(), out[k].type};
      return success();
    }
  }

  SmallVector<Value> results;
  if (failed(emitNode(node, inputs, results)))
    return failure();
  if (op == "SplitToSequence") {
    std::vector<Entry> seq;
    for (Value v : results)
      seq.push_back(
          Entry{nullptr, v, onnxTypeOf(cast<RankedTensorType>(v.getType()).getElementType())});
    sequences[node.output(0)] = std::move(seq);
    return success();
  }
  for (auto [k, v] : llvm::enumerate(results)) {
    if ((int)k >= node.output_size())
      break;
    if (node.output(k).empty())
      continue;
    auto type = cast<RankedTensorType>(v.getType());
    Entry e{nullptr, v, onnxTypeOf(type.getElementType())};
    if (type.getElementType().isInteger() && type.hasStaticShape())
      e.range = rangeOf(node, inputs, k);
    // Bounds that meet make a constant (a small one: shapes and lengths).
    if (e.range && e.range->first == e.range->second && type.getNumElements() <= 64 &&
        (e.onnxType == kInt64 || e.onnxType == kInt32)) {
      auto host = std::make_shared<HostTensor>(e.onnxType, type.getShape());
      for (int64_t j = 0; j < host->numel(); ++j)
        host->set(j, (double)e.range->first);
      e = Entry{host, Value(), e.onnxType};
    }
    values[node.output(k)] = std::move(e);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Model
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> OnnxImporter::run(const onnx::ModelProto &model) {
  ctx->loadDialect<zero::ZeroDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> owned = ModuleOp::create(FileLineColLoc::get(ctx, path, 0, 0));
  module = *owned;

  bool haveDefault = false;
  for (const auto &os : model.opset_import()) {
    if (os.domain().empty() || os.domain() == "ai.onnx") {
      opset = os.version();
      haveDefault = true;
    }
  }
  if (!model.has_graph() || !haveDefault) {
    fileError() << "not an ONNX model: "
                << (model.has_graph() ? "no opset of the default domain" : "it has no graph")
                << " (is this an ONNX file? export with torch.onnx.export)";
    return nullptr;
  }
  if (opset < 13 || opset > 21) {
    fileError() << "ONNX opset " << opset
                << " is not supported; zcc imports opsets 13 to 21 (re-export with "
                   "torch.onnx.export(..., opset_version=18))";
    return nullptr;
  }
  const onnx::GraphProto &graph = model.graph();
  // Names become strings of the plan (protobuf strings must be UTF-8: the
  // plan would be unreadable); say which one is not, before anything else.
  auto notUtf8 = [&](const std::string &what, const std::string &name) {
    std::string hex;
    for (size_t i = 0; i < name.size() && i < 32; ++i)
      hex += llvm::formatv("{0:x-2}", (unsigned)(unsigned char)name[i]).str();
    fileError() << what << " name is not valid UTF-8 (bytes " << hex
                << (name.size() > 32 ? "..." : "") << "); rename it in the exporter";
    return nullptr;
  };
  for (const onnx::TensorProto &t : graph.initializer())
    if (!llvm::json::isUTF8(t.name()))
      return notUtf8("an initializer's", t.name());
  for (const auto *list : {&graph.input(), &graph.output()})
    for (const onnx::ValueInfoProto &v : *list)
      if (!llvm::json::isUTF8(v.name()))
        return notUtf8("a graph input's or output's", v.name());
  for (const onnx::NodeProto &n : graph.node()) {
    if (!llvm::json::isUTF8(n.name()))
      return notUtf8("a node's", n.name());
    for (const std::string &v : n.output())
      if (!llvm::json::isUTF8(v))
        return notUtf8("a node output's", v);
  }
  // The export record (tools/zcc-export, docs/finetune.md): which float
  // initializers are the module's parameters, their names there, the tied
  // ones, the source config.
  llvm::StringSet<> floats;
  for (const onnx::TensorProto &t : graph.initializer())
    if (isFloatType(t.data_type()))
      floats.insert(t.name());
  for (auto &it : options.paddingIdx)
    paddingIdx[it.first()] = it.second;
  std::vector<std::pair<StringRef, StringRef>> metadata;
  for (const auto &kv : model.metadata_props())
    metadata.emplace_back(kv.key(), kv.value());
  llvm::Expected<ExportRecord> parsed = parseExportRecord(metadata, floats);
  if (!parsed) {
    fileError() << llvm::toString(parsed.takeError());
    return nullptr;
  }
  SmallVector<NamedAttribute> record;
  if (parsed->parameters) {
    recordedParameters.emplace();
    for (const std::string &name : *parsed->parameters)
      recordedParameters->insert(name);
  }
  if (parsed->names) {
    SmallVector<NamedAttribute> names;
    for (const auto &[initializer, original] : *parsed->names)
      names.push_back(builder.getNamedAttr(initializer, builder.getStringAttr(original)));
    record.push_back(builder.getNamedAttr("names", builder.getDictionaryAttr(names)));
  }
  if (parsed->tied) {
    SmallVector<Attribute> tied;
    for (const std::vector<std::string> &group : *parsed->tied)
      tied.push_back(builder.getStrArrayAttr(SmallVector<StringRef>(group.begin(), group.end())));
    record.push_back(builder.getNamedAttr("tied", builder.getArrayAttr(tied)));
  }
  // --padding-idx wins over the record.
  for (const auto &[table, row] : parsed->paddingIdx)
    if (paddingIdx.try_emplace(table, row).second)
      paddingFromRecord.insert(table);
  if (parsed->auxLoss) {
    // The default of zcc --aux-loss (zero-attach-loss reads zero.aux_loss).
    SmallVector<NamedAttribute> aux;
    for (const auto &[output, coef] : *parsed->auxLoss)
      aux.push_back(builder.getNamedAttr(output, builder.getF64FloatAttr(coef)));
    zero::attrs(module).getAuxLossAttrHelper().setAttr(module, builder.getDictionaryAttr(aux));
  }
  if (parsed->config)
    record.push_back(builder.getNamedAttr("config", builder.getStringAttr(*parsed->config)));
  if (!record.empty())
    zero::attrs(module).getExportRecordAttrHelper().setAttr(module,
                                                            builder.getDictionaryAttr(record));
  // No record and no flags: every float initializer trains. Say which of
  // them look like buffers (rotary frequencies, masks, exporter constants),
  // which PyTorch would not train.
  if (!recordedParameters && options.trainableRegex.empty() && options.frozenRegex.empty()) {
    llvm::Regex bufferLike(
        "inv_freq|embed_scale|lifted_tensor|running_(mean|var)|num_batches_tracked|"
        "position_ids|rotary|(^|[._])(causal_)?mask($|[._])");
    std::string names;
    int count = 0;
    for (const onnx::TensorProto &t : graph.initializer())
      if (isFloatType(t.data_type()) && bufferLike.match(t.name()) && count++ < 4)
        names += (names.empty() ? "'" : ", '") + t.name() + "'";
    if (count)
      emitWarning(FileLineColLoc::get(ctx, path, 0, 0))
          << "the model has no export record of its parameters (tools/zcc-export writes one), "
             "so every float initializer trains, including "
          << count << (count == 1 ? " that looks like a buffer: " : " that look like buffers: ")
          << names << (count > 4 ? ", ..." : "") << "; pass --frozen REGEX to keep them fixed";
  }
  zero::attrs(module).getSourceAttrHelper().setAttr(
      module, builder.getStringAttr(llvm::sys::path::filename(path)));
  zero::attrs(module).getOpsetAttrHelper().setAttr(module, builder.getI64IntegerAttr(opset));

  func::FuncOp func;
  if (failed(importInitializers(graph)) || failed(importInputs(graph, func)))
    return nullptr;
  zero::attrs(module).getTrainableCountAttrHelper().setAttr(
      module, builder.getI64IntegerAttr(numTrainable));
  if (!options.trainableRegex.empty() && numTrainable == 0) {
    fileError() << "--trainable '" << options.trainableRegex << "' matches none of the model's "
                << numFrozen << " float initializers: nothing would train (zcc estimate lists "
                << "the counts; --frozen '.*' freezes everything on purpose)";
    return nullptr;
  }
  auto paddingSource = [&](StringRef table) {
    return paddingFromRecord.contains(table) ? "the export record's zcc.padding_idx "
                                             : "--padding-idx ";
  };
  for (auto &it : paddingIdx) {
    if (!globals.count(it.first())) {
      fileError() << paddingSource(it.first()) << it.first()
                  << ": the model has no float initializer of that name";
      return nullptr;
    }
    auto table = globals[it.first()].getTensorType();
    if (table.getRank() != 2 || it.second < 0 || it.second >= table.getDimSize(0)) {
      fileError() << paddingSource(it.first()) << it.first() << "=" << it.second << ": "
                  << (table.getRank() != 2 ? std::string("not an embedding table (rank ") +
                                                 std::to_string(table.getRank()) + ")"
                                           : "not a row of the table (rows 0-" +
                                                 std::to_string(table.getDimSize(0) - 1) + ")");
      return nullptr;
    }
  }
  zero::attrs(module).getFrozenCountAttrHelper().setAttr(module,
                                                         builder.getI64IntegerAttr(numFrozen));

  // Loads of globals sit at the top of the function.
  builder.setInsertionPointToStart(body);
  for (const std::string &name : globalOrder) {
    zero::GlobalOp g = globals[name];
    values[name].value = zero::LoadOp::create(builder, g.getLoc(), g.getTensorType(),
                                              FlatSymbolRefAttr::get(g.getSymNameAttr()));
  }
  builder.setInsertionPointToEnd(body);

  for (const onnx::NodeProto &node : graph.node()) {
    if (failed(importNode(node)))
      return nullptr;
    ++nodeIndex;
  }
  if (documentPositions && !positionReaders && documentPositions.use_empty())
    emitWarning(FileLineColLoc::get(ctx, path, 0, 0))
        << "--per-document: no node reads the token positions as a float (RoPE) or as the rows "
           "of a gather (learned position embeddings), so positions do not restart at each "
           "document; attention still stays inside them";
  for (auto &it : paddingIdx)
    if (!paddingUsed.contains(it.first())) {
      fileError() << paddingSource(it.first()) << it.first()
                  << ": no Gather (embedding lookup) reads this initializer; name the embedding "
                  << "table";
      return nullptr;
    }

  SmallVector<Value> outputs;
  SmallVector<Type> outputTypes;
  for (const onnx::ValueInfoProto &out : graph.output()) {
    auto it = values.find(out.name());
    if (it == values.end()) {
      fileError() << "graph output '" << out.name() << "' is not produced by any node";
      return nullptr;
    }
    outputs.push_back(materialize(it->second, FileLineColLoc::get(ctx, path, 0, 0)));
    outputTypes.push_back(outputs.back().getType());
  }
  func::ReturnOp::create(builder, FileLineColLoc::get(ctx, path, 0, 0), outputs);
  func.setFunctionType(builder.getFunctionType(func.getArgumentTypes(), outputTypes));
  for (auto [k, out] : llvm::enumerate(graph.output()))
    func.setResultAttr(k, zero::ZeroDialect::OutputAttrHelper::getNameStr(),
                       builder.getStringAttr(out.name()));

  if (failed(verify(*owned)))
    return nullptr;
  return owned;
}

OwningOpRef<ModuleOp> zcc::importOnnxFile(StringRef path, const OnnxImportOptions &options,
                                          MLIRContext *ctx) {
  Location fileLoc = FileLineColLoc::get(ctx, path, 0, 0);
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/true);
  if (!buffer) {
    emitError(fileLoc) << "cannot read the model: " << buffer.getError().message();
    return nullptr;
  }
  StringRef data = (*buffer)->getBuffer();
  if (data.empty()) {
    emitError(fileLoc) << "the model file is empty";
    return nullptr;
  }
  onnx::ModelProto model;
  StringRef ext = llvm::sys::path::extension(path);
  if (ext == ".onnxtxt" || ext == ".onnxtext" || ext == ".txt") {
    auto status = onnx::OnnxParser::Parse(model, data.data());
    if (!status.IsOK()) {
      emitError(fileLoc) << "cannot parse the ONNX text format: " << status.ErrorMessage();
      return nullptr;
    }
  } else {
    google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t *>(data.data()),
                                                  (int)std::min<size_t>(data.size(), INT32_MAX));
    stream.SetTotalBytesLimit(INT32_MAX);
    if (data.size() > (size_t)INT32_MAX || !model.ParseFromCodedStream(&stream) ||
        !stream.ConsumedEntireMessage()) {
      emitError(fileLoc) << "not a valid ONNX protobuf (truncated or corrupt file?); "
                            "ONNX text files need the extension .onnxtxt";
      return nullptr;
    }
  }
  OnnxImporter importer(ctx, path, options);
  return importer.run(model);
}
