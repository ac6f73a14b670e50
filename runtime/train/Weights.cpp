//===- Weights.cpp - parameter values from a model at start ---------------===//
#include "train/Weights.h"

#include "cpu/KernelSupport.h"
#include "plan/PlanLoader.h"
#include "support/Files.h"
#include "support/JsonDepth.h"

#include "onnx.pb.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace zrt {
namespace {

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Bytes an element of safetensors dtype |name| takes; 0 for a name the
/// format does not have (its Rust crate's Dtype list).
int safetensorsDtypeBytes(const std::string &name) {
  static const std::pair<const char *, int> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  for (const auto &[n, bytes] : kSizes)
    if (name == n)
      return bytes;
  return 0;
}

/// Elements of |shape|; -1 past 2^40 (no tensor zrun loads is that large).
int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > (int64_t(1) << 40))
      return -1;
  return n;
}

/// A state buffer whose contents are a weight: loaded by its own name.
bool isNamedWeight(const plan::Buffer &b) {
  return b.arena() == plan::STATE && !b.view() && b.dtype() == plan::F32 && b.shard_of() == 0 &&
         (b.external() || b.trainable() || b.role() == "buffer");
}

/// A stage-3 parameter shard (in the state arena, or offloaded to the host
/// arena or the NVMe arena): loaded through the ParamLayouts naming it.
bool isShardedBucket(const plan::Buffer &b) {
  return (b.arena() == plan::STATE || b.arena() == plan::HOST || b.arena() == plan::NVME) &&
         !b.view() && b.dtype() == plan::F32 && b.shard_of() != 0 &&
         (b.external() || b.role() == "param");
}

template <typename Fn> void forEachNamedWeight(const plan::Plan &plan, Fn fn) {
  for (int i = 0; i < plan.buffers_size(); ++i)
    if (isNamedWeight(plan.buffers(i)))
      fn(i, plan.buffers(i));
}

std::vector<int64_t> shapeOf(const google::protobuf::RepeatedField<int64_t> &s) {
  return std::vector<int64_t>(s.begin(), s.end());
}

/// The name under which |weights| holds the plan's weight |initializer|
/// (|b|: its buffer, null for a stage-3 parameter): its own name, or in a
/// checkpoint the module's parameter name the export record gives
/// (docs/finetune.md), or another name tied to that one. Empty: a buffer that
/// is no parameter of the module (the record does not name it) and that the
/// checkpoint lacks; the plan keeps the values it carries.
std::string nameInFile(const plan::Plan &plan, const WeightFile &weights,
                       const std::string &initializer, const plan::Buffer *b) {
  if (weights.has(initializer) || !weights.safetensors())
    return initializer;
  const plan::ExportRecord &record = plan.record();
  auto it =
      std::find_if(record.names().begin(), record.names().end(),
                   [&](const plan::ParameterName &n) { return n.initializer() == initializer; });
  if (it == record.names().end())
    return record.names_size() && b && !b->external() ? "" : initializer;
  const std::string &original = it->name();
  if (weights.has(original))
    return original;
  for (const plan::TiedNames &group : record.tied())
    if (std::find(group.names().begin(), group.names().end(), original) != group.names().end())
      for (const std::string &name : group.names())
        if (weights.has(name))
          return name;
  return original;
}

} // namespace

bool WeightFile::has(const std::string &name) const { return tensors_.count(name) != 0; }

std::vector<int64_t> WeightFile::shape(const std::string &name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? std::vector<int64_t>() : it->second.shape;
}

bool WeightFile::isSafetensors(const std::string &path) {
  std::error_code ec;
  const std::string ext = ".safetensors";
  return fs::is_directory(path, ec) ||
         (path.size() >= ext.size() &&
          path.compare(path.size() - ext.size(), ext.size(), ext) == 0);
}

std::vector<std::string> WeightFile::names() const {
  std::vector<std::string> out;
  for (const auto &[name, e] : tensors_)
    out.push_back(name);
  return out;
}

/// A Hugging Face checkpoint folder: the shards its index lists, or its one
/// model.safetensors; or one .safetensors file.
Status WeightFile::openSafetensors(const std::string &path, WeightFile &out) {
  out.path_ = path;
  out.safetensors_ = true;
  out.tensors_.clear();
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    return readSafetensorsHeader(path, out, nullptr);
  fs::path dir(path), index = dir / "model.safetensors.index.json";
  if (fs::exists(index, ec)) {
    std::string text;
    if (Status s = readRegularFile(index.string(), text, int64_t(256) << 20); !s)
      return errorf("--weights ", s.message());
    if (std::string deep = jsonDepthError(text); !deep.empty())
      return errorf("--weights ", index.string(), ": ", deep,
                    "; not a safetensors index (save_pretrained writes {\"weight_map\": "
                    "{tensor: file}})");
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") ||
        !j["weight_map"].is_object())
      return errorf("--weights ", index.string(),
                    ": not a safetensors index (expected {\"weight_map\": {tensor: file}}, as "
                    "save_pretrained writes)");
    std::map<std::string, std::map<std::string, std::string>> byFile;
    for (const auto &[name, file] : j["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().empty() ||
          file.get<std::string>().find('/') != std::string::npos || file.get<std::string>() == "..")
        return errorf("--weights ", index.string(), ": tensor '", clipForMessage(name),
                      "' maps to ", clipForMessage(file.dump()),
                      ", not the name of a file in the folder");
      byFile[file.get<std::string>()][name] = file.get<std::string>();
    }
    for (const auto &[file, names] : byFile) {
      ZRT_RETURN_IF_ERROR(readSafetensorsHeader((dir / file).string(), out, &names));
      for (const auto &[name, unused] : names)
        if (!out.tensors_.count(name))
          return errorf("--weights ", index.string(), ": tensor '", name, "' is listed in ", file,
                        ", which does not hold it");
    }
    return Status::ok();
  }
  fs::path single = dir / "model.safetensors";
  if (fs::exists(single, ec))
    return readSafetensorsHeader(single.string(), out, nullptr);
  return errorf("--weights ", path,
                ": a folder without model.safetensors or model.safetensors.index.json (pass a "
                "Hugging Face checkpoint folder as save_pretrained writes it, a .safetensors "
                "file, or an ONNX model)");
}

/// The tensors of safetensors file |file| (all, or those of |only|): an
/// 8-byte little-endian header length, a JSON header {name: {dtype, shape,
/// data_offsets}}, then the data. Checks the header against the file's size.
Status WeightFile::readSafetensorsHeader(const std::string &file, WeightFile &out,
                                         const std::map<std::string, std::string> *only) {
  int64_t size = 0;
  if (Status s = checkRegularFile(file, size); !s)
    return errorf("--weights ", s.message());
  std::ifstream in(file, std::ios::binary);
  unsigned char lengthBytes[8];
  if (size < 8 || !in.read(reinterpret_cast<char *>(lengthBytes), 8))
    return errorf("--weights ", file, ": ", size,
                  " bytes, too short for a safetensors header (truncated?)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= (uint64_t)lengthBytes[i] << (8 * i);
  constexpr uint64_t kMaxHeader = uint64_t(100) << 20; // the format's own limit
  if (n > kMaxHeader || n > (uint64_t)(size - 8))
    return errorf("--weights ", file, ": its header length says ", n, " bytes, but ",
                  n > kMaxHeader ? "safetensors headers are at most 100 MB"
                                 : "the file has " + std::to_string(size - 8) +
                                       " after it (truncated, or not safetensors)");
  std::string header(n, '\0');
  if (!in.read(header.data(), (std::streamsize)n))
    return errorf("--weights ", file, ": cannot read its header");
  if (std::string deep = jsonDepthError(header); !deep.empty())
    return errorf("--weights ", file, ": the header's ", deep,
                  "; a safetensors header is {name: {dtype, shape, data_offsets}}");
  // Keys given twice in one object: nlohmann keeps the last silently; the
  // reference loader (safetensors' Rust crate) refuses the header.
  std::vector<std::set<std::string>> keys;
  std::string twice;
  nlohmann::json::parser_callback_t noteKeys = [&](int, nlohmann::json::parse_event_t event,
                                                   nlohmann::json &parsed) {
    if (event == nlohmann::json::parse_event_t::object_start)
      keys.emplace_back();
    else if (event == nlohmann::json::parse_event_t::object_end && !keys.empty())
      keys.pop_back();
    else if (event == nlohmann::json::parse_event_t::key && !keys.empty() &&
             !keys.back().insert(parsed.get<std::string>()).second && twice.empty())
      twice = parsed.get<std::string>();
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(header, noteKeys, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return errorf("--weights ", file, ": the header is not a JSON object (not safetensors?)");
  if (!twice.empty())
    return errorf("--weights ", file, ": the header names '", clipForMessage(twice),
                  "' twice in one object (a damaged or hand-edited file)");
  int64_t dataStart = 8 + (int64_t)n, dataBytes = size - dataStart;
  // As the reference loader validates: each tensor's bytes are its dtype's
  // size times its shape's product, and the tensors, in offset order, tile
  // the data section from its first byte to the file's end (no gap, no
  // overlap), so a shifted offset or a truncated file never loads.
  struct Range {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Range> ranges;
  for (const auto &item : j.items()) {
    // Not a structured binding: lambdas may not capture those before C++20.
    const std::string &name = item.key();
    const nlohmann::json &v = item.value();
    if (name == "__metadata__")
      continue;
    auto bad = [&](const std::string &what) {
      return errorf("--weights ", file, ": tensor '", clipForMessage(name), "' ", what);
    };
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") ||
        !v["shape"].is_array() || !v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2 || !v["data_offsets"][0].is_number_unsigned() ||
        !v["data_offsets"][1].is_number_unsigned())
      return bad("is not {\"dtype\", \"shape\", \"data_offsets\": [begin, end]} in the header");
    Entry e;
    e.typeName = v["dtype"].get<std::string>();
    e.dataType = e.typeName == "F32"    ? onnx::TensorProto::FLOAT
                 : e.typeName == "BF16" ? onnx::TensorProto::BFLOAT16
                 : e.typeName == "F16"  ? onnx::TensorProto::FLOAT16
                                        : 0;
    uint64_t elements = 1;
    for (const nlohmann::json &d : v["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 40))
        return bad("has a shape entry " + clipForMessage(d.dump()) + " that is not a size");
      e.shape.push_back(d.get<int64_t>());
      elements = elements > (uint64_t(1) << 62) / std::max<uint64_t>(1, d.get<uint64_t>())
                     ? uint64_t(1) << 62
                     : elements * d.get<uint64_t>();
    }
    uint64_t begin = v["data_offsets"][0].get<uint64_t>(),
             end = v["data_offsets"][1].get<uint64_t>();
    if (begin > end || end > (uint64_t)dataBytes)
      return bad("has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                 "] outside the file's " + std::to_string(dataBytes) + " data bytes (truncated?)");
    if (int width = safetensorsDtypeBytes(e.typeName); width == 0)
      return bad("has dtype " + clipForMessage(e.typeName) +
                 ", which is not a safetensors dtype (F64, F32, BF16, F16, I64, ..., BOOL)");
    else if (elements * (uint64_t)width != end - begin)
      return bad("has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                 "]: " + std::to_string(end - begin) + " bytes, but a " + e.typeName + " " +
                 shapeText(e.shape) + " tensor takes " + std::to_string(elements * width));
    ranges.push_back({begin, end, name});
    if (only && !only->count(name))
      continue;
    e.file = file;
    e.offset = dataStart + (int64_t)begin;
    e.length = (int64_t)(end - begin);
    if (out.tensors_.count(name))
      return bad("appears twice in the checkpoint");
    out.tensors_[name] = std::move(e);
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range &a, const Range &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const Range &r : ranges) {
    if (r.begin != at)
      return errorf("--weights ", file, ": tensor '", clipForMessage(r.name), "' starts at byte ",
                    r.begin, " of the data, where ",
                    r.begin < at ? "the tensor before it has not ended (they overlap)"
                                 : "bytes " + std::to_string(at) + " to " +
                                       std::to_string(r.begin) + " belong to no tensor",
                    "; safetensors files tile their data (a damaged or hand-edited header)");
    at = r.end;
  }
  if (at != (uint64_t)dataBytes)
    return errorf("--weights ", file, ": the tensors end at byte ", at,
                  " of the data, but the file ", "has ", dataBytes,
                  " data bytes (trailing bytes, or a damaged header)");
  return Status::ok();
}

Status WeightFile::open(const std::string &path, WeightFile &out) {
  if (isSafetensors(path))
    return openSafetensors(path, out);
  std::string bytes;
  if (Status s = readRegularFile(path, bytes, int64_t(2) << 30); !s)
    return errorf("--weights ", s.message());
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes) || !model.has_graph())
    return errorf("--weights ", path,
                  ": not an ONNX model (zrun reads the initializers of the model the plan was "
                  "compiled from, or of one `zrun export --onnx` wrote)");
  out.path_ = path;
  out.tensors_.clear();
  fs::path dir = fs::path(path).parent_path();
  for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer()) {
    Entry e;
    e.shape.assign(t.dims().begin(), t.dims().end());
    e.dataType = t.data_type();
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      std::string location; // as the model writes it, relative to its folder
      for (const onnx::StringStringEntryProto &kv : t.external_data()) {
        char *end = nullptr;
        if (kv.key() == "location")
          location = kv.value(), e.file = (dir / kv.value()).string();
        else if (kv.key() == "offset" || kv.key() == "length") {
          int64_t v = std::strtoll(kv.value().c_str(), &end, 10);
          if (kv.value().empty() || *end || v < 0)
            return errorf("--weights ", path, ": initializer '", t.name(), "' has an invalid ",
                          kv.key(), " '", kv.value(), "' in its external_data");
          (kv.key() == "offset" ? e.offset : e.length) = v;
        }
      }
      if (e.file.empty())
        return errorf("--weights ", path, ": initializer '", t.name(),
                      "' is external but names no location");
      // As zcc's importer: the data lies inside the model's folder (a
      // relative path without '..', not through a link that leaves it), so
      // a model cannot make zrun read other files as weights.
      fs::path rel(location);
      bool escapes = rel.empty() || rel.is_absolute();
      for (const fs::path &part : rel)
        escapes |= part == "..";
      std::error_code ec;
      fs::path real = fs::weakly_canonical(e.file, ec),
               home = fs::weakly_canonical(dir.empty() ? "." : dir, ec);
      auto [h, r] = std::mismatch(home.begin(), home.end(), real.begin(), real.end());
      if (escapes || ec || h != home.end())
        return errorf("--weights ", path, ": initializer '", clipForMessage(t.name()),
                      "': external data location '", clipForMessage(location),
                      "' leaves the model's folder; external data must be a relative path to a "
                      "regular file inside it (as zcc requires)");
    } else if (t.has_raw_data()) {
      e.inline_ = std::move(*t.mutable_raw_data());
    } else if (t.float_data_size() > 0) {
      e.inline_.assign(reinterpret_cast<const char *>(t.float_data().data()),
                       t.float_data_size() * sizeof(float));
    }
    out.tensors_[t.name()] = std::move(e);
  }
  return Status::ok();
}

Status WeightFile::check(const std::string &name, const std::vector<int64_t> &shape) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return safetensors_
               ? errorf("--weights ", path_, ": the checkpoint has no tensor '", name,
                        "', which the plan loads; pass the checkpoint of the model the plan was "
                        "compiled from")
               : errorf("--weights ", path_, ": the model has no initializer '", name,
                        "', which the plan loads; pass the model the plan was compiled from");
  const Entry &e = it->second;
  if (safetensors_) {
    if (!e.dataType)
      return errorf("--weights ", e.file, ": tensor '", name, "' is ", e.typeName,
                    "; zrun reads F32, BF16 and F16 weights");
    if (e.shape != shape)
      return errorf("--weights ", e.file, ": tensor '", name, "' is ", shapeText(e.shape),
                    ", the plan's parameter is ", shapeText(shape),
                    "; pass the checkpoint of the model the plan was compiled from");
  } else if (e.dataType != onnx::TensorProto::FLOAT || e.shape != shape) {
    return errorf("--weights ", path_, ": initializer '", name, "' is ",
                  e.dataType == onnx::TensorProto::FLOAT ? "float32 " : "not float32 ",
                  shapeText(e.shape), ", the plan's parameter is float32 ", shapeText(shape),
                  "; pass the model the plan was compiled from");
  }
  if (numel(shape) < 0)
    return errorf("--weights ", path_, ": tensor '", name, "' ", shapeText(shape),
                  " is impossibly large");
  int64_t bytes = numel(shape) * (e.dataType == onnx::TensorProto::FLOAT ? 4 : 2);
  if (e.file.empty() && (int64_t)e.inline_.size() != bytes)
    return errorf("--weights ", path_, ": initializer '", name, "' has ", e.inline_.size(),
                  " bytes of data, its shape needs ", bytes);
  if (!e.file.empty()) {
    int64_t size = 0;
    if (Status s = checkRegularFile(e.file, size); !s)
      return errorf("--weights ", path_, ": the external data of initializer '", name,
                    "': ", s.message(), " (keep it beside the model)");
    if (e.length >= 0 && e.length != bytes)
      return errorf("--weights ", path_, ": initializer '", name, "' has external length ",
                    e.length, ", its shape needs ", bytes);
    if (bytes > size || e.offset > size - bytes) // not e.offset + bytes: it may overflow
      return errorf("--weights ", path_, ": initializer '", name, "' needs ", bytes,
                    " bytes from offset ", e.offset, " of ", e.file, ", which has ", size,
                    " (truncated?)");
  }
  return Status::ok();
}

Status WeightFile::read(const std::string &name, const std::vector<int64_t> &shape,
                        std::vector<float> &out, int64_t first, int64_t count) const {
  ZRT_RETURN_IF_ERROR(check(name, shape));
  const Entry &e = tensors_.find(name)->second;
  int64_t n = numel(shape);
  if (count < 0)
    count = n - first;
  if (first < 0 || first + count > n)
    return errorf("--weights ", path_, ": elements [", first, ", ", first + count, ") of tensor '",
                  name, "' asked for; it has ", n);
  out.resize(count);
  const int width = e.dataType == onnx::TensorProto::FLOAT ? 4 : 2;
  if (e.file.empty()) {
    std::memcpy(out.data(), e.inline_.data() + first * sizeof(float), count * sizeof(float));
    return Status::ok();
  }
  // Only the elements asked for (a stage-3 rank its slice) are read.
  std::ifstream in(e.file, std::ios::binary);
  if (!in.seekg(e.offset + first * width))
    return errorf("--weights ", e.file, ": cannot read tensor '", name, "'");
  if (width == 4) {
    if (!in.read(reinterpret_cast<char *>(out.data()), count * 4))
      return errorf("--weights ", e.file, ": cannot read tensor '", name, "'");
    return Status::ok();
  }
  // bfloat16 / float16 (safetensors): widened exactly to float32.
  std::vector<uint16_t> bits(count);
  if (!in.read(reinterpret_cast<char *>(bits.data()), count * 2))
    return errorf("--weights ", e.file, ": cannot read tensor '", name, "'");
  bool bf16 = e.dataType == onnx::TensorProto::BFLOAT16;
  for (int64_t k = 0; k < count; ++k) {
    BF16 b;
    F16 h;
    b.bits = h.bits = bits[k];
    out[k] = bf16 ? float(b) : float(h);
  }
  return Status::ok();
}

bool planNeedsWeights(const plan::Plan &plan) {
  for (const plan::Buffer &b : plan.buffers())
    if (b.external())
      return true;
  return false;
}

Status checkWeights(const plan::Plan &plan, const WeightFile &weights) {
  // Names, types and shapes only; the data is read per rank. Every problem
  // is named, not only the first.
  std::vector<std::string> problems;
  std::set<std::string> loads;
  auto check = [&](const std::string &initializer, const plan::Buffer *b,
                   const std::vector<int64_t> &shape) {
    std::string name = nameInFile(plan, weights, initializer, b);
    if (name.empty())
      return;
    loads.insert(name);
    if (Status s = weights.check(name, shape); !s)
      problems.push_back(s.message());
  };
  forEachNamedWeight(plan,
                     [&](int, const plan::Buffer &b) { check(b.name(), &b, shapeOf(b.shape())); });
  for (const plan::ParamLayout &l : plan.params())
    if (isShardedBucket(plan.buffers(l.bucket())))
      check(l.name(), nullptr, shapeOf(l.shape()));
  // A checkpoint's tensors the plan does not load: another model's (the
  // tied copy of one it loads, as some checkpoints keep, is not).
  for (const plan::TiedNames &group : plan.record().tied())
    for (const std::string &name : group.names())
      if (loads.count(name))
        loads.insert(group.names().begin(), group.names().end());
  std::vector<std::string> extra;
  if (weights.safetensors())
    for (const std::string &name : weights.names())
      if (!loads.count(name))
        extra.push_back(name);
  if (!extra.empty()) {
    std::string list;
    for (size_t i = 0; i < extra.size() && i < 8; ++i)
      list += (i ? ", '" : "'") + extra[i] + "'";
    if (extra.size() > 8)
      list += " and " + std::to_string(extra.size() - 8) + " more";
    problems.push_back("--weights " + weights.path() + ": " + std::to_string(extra.size()) +
                       " tensor" + (extra.size() == 1 ? "" : "s") +
                       " that the plan does not load (" + list +
                       "); pass the checkpoint of the model the plan was compiled from");
  }
  if (problems.empty())
    return Status::ok();
  if (problems.size() == 1)
    return errorf(problems[0]);
  std::string all = std::to_string(problems.size()) + " problems with the weights:";
  for (size_t i = 0; i < problems.size() && i < 20; ++i)
    all += "\n  " + problems[i];
  if (problems.size() > 20)
    all += "\n  ... and " + std::to_string(problems.size() - 20) + " more";
  return errorf(all);
}

Status loadWeights(const plan::Plan &plan, const WeightFile &weights, int rank,
                   ExecutorBase &executor, int &loaded) {
  // A tensor at a time into the state, host or NVMe arena: no copy of the
  // whole state in memory (a 1.5B model's stage-1 state is 9 GB), and the
  // swap file is never read.
  loaded = 0;
  std::vector<float> values;
  Status status;
  forEachNamedWeight(plan, [&](int, const plan::Buffer &b) {
    std::string name = nameInFile(plan, weights, b.name(), &b);
    if (!status || name.empty())
      return;
    status = weights.read(name, shapeOf(b.shape()), values);
    if (status)
      status = executor.writeState(b.offset(), reinterpret_cast<const char *>(values.data()),
                                   (int64_t)(values.size() * sizeof(float)));
    if (status)
      ++loaded;
  });
  ZRT_RETURN_IF_ERROR(status);
  const int64_t shards = stateShards(plan), shardIndex = stateShardOf(plan, rank);
  for (const plan::ParamLayout &l : plan.params()) {
    const plan::Buffer &bucket = plan.buffers(l.bucket());
    if (!isShardedBucket(bucket))
      continue;
    // This rank holds elements [lo, hi) of the whole flat bucket: it reads
    // only the part of the tensor that falls there.
    std::vector<int64_t> shape = shapeOf(l.shape());
    int64_t shard = bucket.shard_of() / shards, lo = shardIndex * shard, hi = lo + shard;
    int64_t begin = std::max(lo, l.offset()), end = std::min(hi, l.offset() + numel(shape));
    if (begin < end) {
      ZRT_RETURN_IF_ERROR(weights.read(nameInFile(plan, weights, l.name(), nullptr), shape, values,
                                       begin - l.offset(), end - begin));
      ZRT_RETURN_IF_ERROR(executor.writeState(
          stateImageOffset(plan, bucket) + (begin - lo) * (int64_t)sizeof(float),
          reinterpret_cast<const char *>(values.data()), (int64_t)(values.size() * sizeof(float))));
    }
    ++loaded;
  }
  return Status::ok();
}

} // namespace zrt
