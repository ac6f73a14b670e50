//===- OnnxInputs.cpp - an ONNX graph's initializers and inputs -----------===//
//
// The importer's first half: initializers (inline or external data, checked
// against their files before a byte is read) become constants or zero.global
// parameters, graph inputs become the step function's arguments (with
// --micro-batch / --input-shape bound), and per-document positions are added
// for packed data (--per-document). OnnxImporter.cpp drives it.
//
//===----------------------------------------------------------------------===//
#include "zcc/Import/ExportRecord.h"
#include "zcc/Import/OnnxImporter.h"

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

bool OnnxImporter::readExternalData(const onnx::TensorProto &t, std::string &bytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset" || kv.key() == "length") {
      int64_t v;
      if (!llvm::to_integer(kv.value(), v, 10) || v < 0) {
        fileError() << "initializer '" << t.name() << "': external data " << kv.key() << " '"
                    << kv.value() << "' is not a non-negative integer";
        return false;
      }
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  auto refuse = [&](StringRef why) {
    fileError() << "initializer '" << t.name() << "': external data location '" << location << "' "
                << why
                << "; external data must be a relative path to a regular file inside the "
                   "model's folder";
    return false;
  };
  if (location.empty())
    return refuse("is empty");
  if (llvm::sys::path::is_absolute(location))
    return refuse("is absolute");
  for (auto it = llvm::sys::path::begin(location), e = llvm::sys::path::end(location); it != e;
       ++it)
    if (*it == "..")
      return refuse("leaves the model's folder ('..')");
  // Refuse links anywhere below the model's folder: they could point outside.
  SmallString<256> dir = llvm::sys::path::parent_path(path);
  if (dir.empty())
    dir = ".";
  SmallString<256> file = dir;
  for (auto it = llvm::sys::path::begin(location), e = llvm::sys::path::end(location); it != e;
       ++it) {
    if (*it == ".")
      continue;
    llvm::sys::path::append(file, *it);
    llvm::sys::fs::file_status st;
    if (llvm::sys::fs::status(file, st, /*follow=*/false))
      return refuse("does not exist");
    if (st.type() == llvm::sys::fs::file_type::symlink_file)
      return refuse("is or passes through a symbolic link");
  }
  if (!llvm::sys::fs::is_regular_file(file))
    return refuse("is not a regular file");
  auto buffer = llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    fileError() << "initializer '" << t.name() << "': cannot read external data file '" << file
                << "': " << buffer.getError().message();
    return false;
  }
  int64_t size = (*buffer)->getBufferSize();
  int64_t numel = checkedNumel(SmallVector<int64_t>(t.dims().begin(), t.dims().end()));
  if (numel < 0) {
    fileError() << "initializer '" << t.name() << "' has a negative or impossibly large dimension";
    return false;
  }
  int64_t need = numel * elementSize(t.data_type());
  if (length < 0)
    length = need;
  if (length != need || offset > size || length > size - offset) {
    fileError() << "initializer '" << t.name() << "': external data in '" << location
                << "' (offset " << offset << ", length " << length << ", file size " << size
                << ") does not hold the " << need << " bytes its shape and type need";
    return false;
  }
  bytes.assign((*buffer)->getBufferStart() + offset, length);
  return true;
}

bool OnnxImporter::isTrainableName(const std::string &name, llvm::Regex &trainable,
                                   llvm::Regex &frozen) const {
  bool listed = !options.trainableRegex.empty() ? trainable.match(name)
                : recordedParameters            ? recordedParameters->contains(name)
                                                : true;
  return listed && !(!options.frozenRegex.empty() && frozen.match(name));
}

LogicalResult OnnxImporter::importInitializers(const onnx::GraphProto &graph) {
  llvm::Regex trainable(options.trainableRegex.empty() ? ".*" : options.trainableRegex);
  llvm::Regex frozen(options.frozenRegex);
  std::string regexError;
  if (!trainable.isValid(regexError))
    return fileError() << "--trainable: invalid regular expression '" << options.trainableRegex
                       << "': " << regexError;
  if (!options.frozenRegex.empty() && !frozen.isValid(regexError))
    return fileError() << "--frozen: invalid regular expression '" << options.frozenRegex
                       << "': " << regexError;

  for (const onnx::TensorProto &t : graph.initializer()) {
    if (t.name().empty())
      return fileError() << "an initializer has no name";
    for (int64_t d : t.dims())
      if (d < 0)
        return fileError() << "initializer '" << t.name() << "' has a negative dimension " << d;
    if (checkedNumel(SmallVector<int64_t>(t.dims().begin(), t.dims().end())) < 0)
      return fileError() << "initializer '" << t.name() << "' is impossibly large";
    if (values.count(t.name()))
      return fileError() << "initializer '" << t.name() << "' is defined twice";
    Type et = elementType(t.data_type());
    if (!et)
      return fileError() << "initializer '" << t.name() << "' has unsupported element type "
                         << onnxTypeName(t.data_type());
    std::string bytes, error;
    SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
    // --weights external: the values of parameters are not read (zrun
    // loads them); a buffer that the export record says is no parameter (a
    // rotary inv_freq) is in no checkpoint, so the plan keeps its values.
    bool recordedBuffer = recordedParameters && !recordedParameters->contains(t.name());
    if (options.skipWeightData && isFloatType(t.data_type()) && !recordedBuffer) {
      bool isTrainable = isTrainableName(t.name(), trainable, frozen);
      (isTrainable ? numTrainable : numFrozen)++;
      auto type = RankedTensorType::get(shape, et);
      builder.setInsertionPointToEnd(module.getBody());
      auto global = zero::GlobalOp::create(
          builder, FileLineColLoc::get(ctx, path, 0, 0), t.name(),
          isTrainable ? zero::GlobalRole::param : zero::GlobalRole::buffer, isTrainable, type,
          cast<ElementsAttr>(DenseElementsAttr::get(type, builder.getFloatAttr(et, 0.0))));
      // The zeros stand in for values zrun loads: no pass may read them.
      zero::attrs(global).getValueNotReadAttrHelper().setAttr(global, builder.getUnitAttr());
      globals[t.name()] = global;
      globalOrder.push_back(t.name());
      values[t.name()] = Entry{nullptr, Value(), t.data_type()};
      continue;
    }
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      if (!readExternalData(t, bytes))
        return failure();
    } else if (!tensorBytes(t, bytes, error)) {
      return fileError() << error;
    }
    if (!isFloatType(t.data_type())) {
      // Integer initializers (shape constants, token-type ids) are constants.
      auto host = std::make_shared<HostTensor>();
      if (!decodeHostTensor(t.data_type(), shape, bytes, *host, error))
        return fileError() << "initializer '" << t.name() << "': " << error;
      values[t.name()] = Entry{host, Value(), t.data_type()};
      continue;
    }
    bool isTrainable = isTrainableName(t.name(), trainable, frozen);
    (isTrainable ? numTrainable : numFrozen)++;
    auto type = RankedTensorType::get(shape, et);
    auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        ArrayRef<char>(bytes.data(), bytes.size()), alignof(uint64_t));
    std::string key = t.name();
    for (char &c : key)
      if (!llvm::isAlnum(c) && c != '_' && c != '.')
        c = '_';
    auto init = DenseResourceElementsAttr::get(type, key, std::move(blob));
    builder.setInsertionPointToEnd(module.getBody());
    auto global =
        zero::GlobalOp::create(builder, FileLineColLoc::get(ctx, path, 0, 0), t.name(),
                               isTrainable ? zero::GlobalRole::param : zero::GlobalRole::buffer,
                               isTrainable, type, cast<ElementsAttr>(init));
    globals[t.name()] = global;
    globalOrder.push_back(t.name());
    values[t.name()] = Entry{nullptr, Value(), t.data_type()};
  }
  return success();
}

LogicalResult OnnxImporter::importInputs(const onnx::GraphProto &graph, func::FuncOp &func) {
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  for (const onnx::ValueInfoProto &in : graph.input()) {
    if (values.count(in.name()))
      continue; // an initializer listed as an input (IR version < 4)
    if (!in.type().has_tensor_type())
      return fileError() << "graph input '" << in.name() << "' is not a tensor";
    const auto &tt = in.type().tensor_type();
    Type et = elementType(tt.elem_type());
    if (!et)
      return fileError() << "graph input '" << in.name() << "' has unsupported element type "
                         << onnxTypeName(tt.elem_type());
    SmallVector<int64_t> shape;
    auto bound = options.inputShapes.find(in.name());
    if (bound != options.inputShapes.end()) {
      shape = bound->second;
      if (tt.has_shape() && tt.shape().dim_size() != (int)shape.size())
        return fileError() << "--input-shape " << in.name() << ": the input has rank "
                           << tt.shape().dim_size() << ", but " << shape.size()
                           << " dimensions were given";
      for (int d = 0; tt.has_shape() && d < tt.shape().dim_size(); ++d) {
        const auto &dim = tt.shape().dim(d);
        if (dim.has_dim_value() && dim.dim_value() > 0 && dim.dim_value() != shape[d])
          return fileError() << "--input-shape " << in.name() << ": dimension " << d
                             << " is fixed to " << dim.dim_value() << " in the model, not "
                             << shape[d];
      }
    } else {
      if (!tt.has_shape())
        return fileError() << "graph input '" << in.name()
                           << "' has no shape; give one with --input-shape " << in.name()
                           << "=AxBx...";
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        const auto &dim = tt.shape().dim(d);
        if (dim.has_dim_value() && dim.dim_value() > 0) {
          if (d == 0 && options.microBatch && *options.microBatch != dim.dim_value())
            return fileError() << "--micro-batch " << *options.microBatch << ": graph input '"
                               << in.name() << "' has a fixed leading dimension of "
                               << dim.dim_value();
          shape.push_back(dim.dim_value());
          continue;
        }
        if (d == 0 && options.microBatch) {
          shape.push_back(*options.microBatch);
          continue;
        }
        std::string sym = dim.has_dim_param() ? dim.dim_param() : "?";
        InFlightDiagnostic diag = fileError();
        diag << "graph input '" << in.name() << "' has a symbolic dimension " << d << " ('" << sym
             << "'); bind it with ";
        if (d == 0)
          diag << "--micro-batch N or ";
        diag << "--input-shape " << in.name() << "=";
        for (int k = 0; k < tt.shape().dim_size(); ++k) {
          const auto &dk = tt.shape().dim(k);
          diag << (k ? "x" : "")
               << (dk.has_dim_value() && dk.dim_value() > 0 ? std::to_string(dk.dim_value())
                                                            : std::string("N"));
        }
        return diag;
      }
    }
    for (int64_t d : shape)
      if (d <= 0)
        return fileError() << "graph input '" << in.name() << "': dimensions must be positive";
    if (checkedNumel(shape) < 0)
      return fileError() << "graph input '" << in.name() << "' is impossibly large";
    argTypes.push_back(RankedTensorType::get(shape, et));
    argNames.push_back(in.name());
  }
  for (auto &bound : options.inputShapes)
    if (llvm::find(argNames, bound.first()) == argNames.end()) {
      InFlightDiagnostic diag = fileError();
      diag << "--input-shape " << bound.first() << ": the model has no graph input of that name"
           << " (its inputs:";
      for (const std::string &name : argNames)
        diag << " " << name;
      return diag << ")";
    }

  SmallVector<Type> resultTypes; // patched once the outputs are known
  builder.setInsertionPointToEnd(module.getBody());
  func = func::FuncOp::create(builder, FileLineColLoc::get(ctx, path, 0, 0), "forward",
                              builder.getFunctionType(argTypes, resultTypes));
  body = func.addEntryBlock();
  forward = func;
  if (!argTypes.empty() && cast<RankedTensorType>(argTypes[0]).getRank() > 0)
    batchSamples = cast<RankedTensorType>(argTypes[0]).getDimSize(0);
  for (auto [k, name] : llvm::enumerate(argNames)) {
    func.setArgAttr(k, zero::ZeroDialect::InputAttrHelper::getNameStr(),
                    builder.getStringAttr(name));
    const auto *info = &graph.input(0);
    for (const auto &in : graph.input())
      if (in.name() == name)
        info = &in;
    values[name] = Entry{nullptr, body->getArgument(k), info->type().tensor_type().elem_type()};
  }
  return options.perDocument ? addDocumentPositions() : success();
}

LogicalResult OnnxImporter::addDocumentPositions() {
  // The token input: input_ids, else the first integer [batch, sequence] one.
  std::optional<unsigned> tokens;
  for (BlockArgument arg : forward.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    auto name = forward.getArgAttrOfType<StringAttr>(
        arg.getArgNumber(), zero::ZeroDialect::InputAttrHelper::getNameStr());
    if (name && name.getValue() == "position_ids") {
      if (type.getRank() != 2 || !type.getElementType().isInteger())
        return fileError() << "--per-document: the graph input 'position_ids' is " << type
                           << ", not integers [batch, sequence]";
      documentPositions = arg; // exported with position_ids: the graph reads it already
      return success();
    }
    if (type.getRank() == 2 && type.getElementType().isInteger() &&
        (!tokens || (name && name.getValue() == "input_ids")))
      tokens = arg.getArgNumber();
  }
  if (!tokens)
    return fileError() << "--per-document: the model has no token input of integers [batch, "
                          "sequence] (input_ids) whose documents the positions would follow";
  auto type = RankedTensorType::get(
      cast<RankedTensorType>(forward.getArgument(*tokens).getType()).getShape(),
      builder.getI64Type());
  unsigned k = forward.getNumArguments();
  Location loc = FileLineColLoc::get(ctx, path, 0, 0);
  if (failed(forward.insertArgument(k, type,
                                    builder.getDictionaryAttr(builder.getNamedAttr(
                                        zero::ZeroDialect::InputAttrHelper::getNameStr(),
                                        builder.getStringAttr("position_ids"))),
                                    loc)))
    return fileError() << "--per-document: cannot add the position_ids input";
  documentPositions = forward.getArgument(k);
  return success();
}

Value OnnxImporter::positionsFor(const HostTensor &t, Location loc) {
  auto positions = cast<RankedTensorType>(documentPositions.getType());
  int64_t b = positions.getDimSize(0), s = positions.getDimSize(1), rank = t.shape.size();
  if ((t.type != kInt64 && t.type != kInt32) || rank < 2 || t.shape.back() != s ||
      (t.shape[0] != 1 && t.shape[0] != b))
    return {};
  for (int64_t d = 1; d + 1 < rank; ++d)
    if (t.shape[d] != 1)
      return {};
  // The positions, or the positions plus a constant (OPT's learned
  // positions start at 2).
  int64_t offset = t.getI(0);
  for (int64_t e = 0; e < t.numel(); ++e)
    if (t.getI(e) != e % s + offset)
      return {};
  SmallVector<int64_t> shape(t.shape.begin(), t.shape.end());
  shape[0] = b;
  Value v = documentPositions;
  if (ArrayRef<int64_t>(shape) != positions.getShape())
    v = zero::ReshapeOp::create(builder, loc,
                                RankedTensorType::get(shape, positions.getElementType()), v);
  if (offset) {
    HostTensor c(kInt64, {});
    c.set(0, (double)offset);
    v = zero::AddOp::create(builder, loc, v, zero::ConstantOp::create(builder, loc, toAttr(c)));
  }
  Type et = elementType(t.type);
  if (et != positions.getElementType())
    v = zero::CastOp::create(builder, loc, RankedTensorType::get(shape, et), v);
  ++positionReaders;
  return v;
}
