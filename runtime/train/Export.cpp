//===- Export.cpp - trained weights out: safetensors, Hugging Face, ONNX ---===//
//
// What leaves zrun for other tools (docs/finetune.md): a safetensors file of
// named float32 (or bfloat16) tensors, a Hugging Face checkpoint directory
// (sharded safetensors, their index, config.json), and the trained weights
// written back into a copy of the ONNX model. The checkpoint format itself
// is Checkpoint.cpp.
//
//===----------------------------------------------------------------------===//
#include "train/Checkpoint.h"

#include "cpu/KernelSupport.h"
#include "support/Files.h"
#include "support/JsonDepth.h"

#include "onnx.pb.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace zrt {
namespace {

/// JSON text of |j| (nlohmann/json: escaping, and names that are not valid
/// UTF-8 replaced rather than written raw or thrown on).
std::string dumpJson(const nlohmann::ordered_json &j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

/// One tensor of a safetensors file: its name there, float32 values, and
/// whether it is stored as bfloat16 (rounded to nearest even, as PyTorch's
/// .to(torch.bfloat16)).
struct SafetensorsEntry {
  std::string name;
  const NamedTensor *tensor;
};

int64_t storedBytes(const NamedTensor &t, bool bf16) {
  return (int64_t)t.data.size() * (bf16 ? 2 : 4);
}

/// Writes |entries| as one safetensors file (atomically: PATH.tmp, renamed):
/// an 8-byte header length, the JSON header (dtype, shape, byte range of
/// each tensor; padded with spaces to a multiple of 8), the data.
Status writeSafetensorsFile(const std::string &path, const std::vector<SafetensorsEntry> &entries,
                            bool bf16, const nlohmann::ordered_json &metadata) {
  nlohmann::ordered_json header;
  header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const SafetensorsEntry &e : entries) {
    int64_t bytes = storedBytes(*e.tensor, bf16);
    header[e.name] = {{"dtype", bf16 ? "BF16" : "F32"},
                      {"shape", e.tensor->shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string h = dumpJson(header);
  while (h.size() % 8)
    h += ' ';
  std::string file(8, '\0');
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i)
    file[i] = (char)((n >> (8 * i)) & 0xff);
  file += h;
  file.reserve(file.size() + offset);
  for (const SafetensorsEntry &e : entries) {
    const std::vector<float> &v = e.tensor->data;
    if (!bf16) {
      file.append(reinterpret_cast<const char *>(v.data()), v.size() * 4);
      continue;
    }
    for (float f : v) {
      uint16_t bits = BF16(f).bits;
      file.append(reinterpret_cast<const char *>(&bits), 2);
    }
  }
  std::string tmp = path + ".tmp";
  ZRT_RETURN_IF_ERROR(writeFileAtomically(tmp, file.data(), file.size()));
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return errorf(path, ": cannot write (", ec.message(), ")");
  return Status::ok();
}

} // namespace

Status writeSafetensors(const std::string &path, const std::vector<NamedTensor> &tensors,
                        const plan::Checkpoint &m, bool bf16) {
  std::vector<SafetensorsEntry> entries;
  for (const NamedTensor &t : tensors)
    entries.push_back({t.name, &t});
  nlohmann::ordered_json metadata = {{"format", "pt"},
                                     {"producer", "zrun export"},
                                     {"source", m.plan_source()},
                                     {"steps", std::to_string(m.steps_done())}};
  return writeSafetensorsFile(path, entries, bf16, metadata);
}

Status writeHfCheckpoint(const std::string &dir, const std::vector<NamedTensor> &tensors,
                         const plan::Checkpoint &m, const HfExportOptions &options,
                         HfExportSummary &summary) {
  const plan::ExportRecord &record = m.record();
  if (record.names().empty())
    return errorf("--hf: the checkpoint's plan has no export record (the module's parameter "
                  "names): export the model with tools/zcc-export, compile it again and train "
                  "from this checkpoint's weights (zrun export --safetensors writes them under "
                  "the graph's names)");
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec))
      return errorf("--hf ", dir, ": not a directory");
    for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
      std::string name = e.path().filename().string();
      if (name == "config.json" || name == "model.safetensors.index.json" ||
          (name.size() > 12 && name.substr(name.size() - 12) == ".safetensors"))
        return errorf("--hf ", dir, ": the folder already holds a checkpoint (", name,
                      "); export into a new folder, or remove it first");
    }
  }
  fs::create_directories(dir, ec);
  if (ec)
    return errorf("--hf ", dir, ": cannot create (", ec.message(), ")");

  // The module's parameters under their own names (tied ones once, as the
  // record names them); buffers that are no parameter are not written.
  std::map<std::string, const NamedTensor *> byInitializer;
  for (const NamedTensor &t : tensors)
    byInitializer[t.name] = &t;
  std::vector<SafetensorsEntry> entries;
  std::vector<std::string> missing;
  for (const plan::ParameterName &n : record.names()) {
    auto it = byInitializer.find(n.initializer());
    if (it == byInitializer.end())
      missing.push_back(n.initializer());
    else
      entries.push_back({n.name(), it->second});
  }
  if (!missing.empty())
    return errorf("--hf: the checkpoint lacks ", missing.size(), " of the module's parameters (",
                  "e.g. '", missing[0],
                  "'): it was saved by another plan than the record "
                  "describes");
  std::sort(entries.begin(), entries.end(),
            [](const SafetensorsEntry &a, const SafetensorsEntry &b) { return a.name < b.name; });

  // Shards of at most maxShardBytes (a tensor larger than that alone), as
  // save_pretrained cuts them.
  std::vector<std::vector<SafetensorsEntry>> shards(1);
  int64_t shardBytes = 0, total = 0;
  for (const SafetensorsEntry &e : entries) {
    int64_t bytes = storedBytes(*e.tensor, options.bf16);
    if (!shards.back().empty() && shardBytes + bytes > options.maxShardBytes) {
      shards.emplace_back();
      shardBytes = 0;
    }
    shards.back().push_back(e);
    shardBytes += bytes;
    total += bytes;
  }
  nlohmann::ordered_json metadata = {{"format", "pt"}};
  nlohmann::ordered_json weightMap = nlohmann::ordered_json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    char name[64];
    if (shards.size() == 1)
      std::snprintf(name, sizeof name, "model.safetensors");
    else
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
    ZRT_RETURN_IF_ERROR(
        writeSafetensorsFile((fs::path(dir) / name).string(), shards[k], options.bf16, metadata));
    for (const SafetensorsEntry &e : shards[k])
      weightMap[e.name] = name;
  }
  if (shards.size() > 1) {
    nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}},
                                    {"weight_map", weightMap}};
    std::string text = dumpJson(index, 2) + "\n";
    ZRT_RETURN_IF_ERROR(writeFileAtomically(
        (fs::path(dir) / "model.safetensors.index.json").string(), text.data(), text.size()));
  }
  summary = HfExportSummary();
  summary.tensors = (int)entries.size();
  summary.shards = (int)shards.size();
  summary.bytes = total;
  // The source config, with the dtype the weights are stored in.
  if (!record.config().empty()) {
    if (std::string deep = jsonDepthError(record.config()); !deep.empty())
      return errorf("--hf: the export record's config: ", deep, "; not a Hugging Face config");
    nlohmann::ordered_json config = nlohmann::ordered_json::parse(record.config(), nullptr, false);
    if (config.is_discarded() || !config.is_object())
      return errorf("--hf: the export record's config is not a JSON object");
    const char *dtype = options.bf16 ? "bfloat16" : "float32";
    bool set = false;
    for (const char *key : {"dtype", "torch_dtype"})
      if (config.contains(key))
        config[key] = dtype, set = true;
    if (!set)
      config["torch_dtype"] = dtype;
    std::string text = dumpJson(config, 2) + "\n";
    ZRT_RETURN_IF_ERROR(
        writeFileAtomically((fs::path(dir) / "config.json").string(), text.data(), text.size()));
    summary.config = true;
  }
  return Status::ok();
}

Status writeTrainedOnnx(const std::string &onnxIn, const std::string &onnxOut,
                        const std::vector<NamedTensor> &tensors, int &replaced) {
  std::string bytes;
  ZRT_RETURN_IF_ERROR(readRegularFile(onnxIn, bytes));
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes) || !model.has_graph())
    return errorf("--onnx ", onnxIn, ": not an ONNX model");
  std::map<std::string, const NamedTensor *> byName;
  for (const NamedTensor &t : tensors)
    if (t.trainable)
      byName[t.name] = &t;
  replaced = 0;
  for (onnx::TensorProto &init : *model.mutable_graph()->mutable_initializer()) {
    auto it = byName.find(init.name());
    if (it == byName.end())
      continue;
    const NamedTensor &t = *it->second;
    std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
    if (dims != t.shape || init.data_type() != onnx::TensorProto::FLOAT)
      return errorf("--onnx ", onnxIn, ": initializer '", init.name(),
                    "' is not the float32 tensor of this shape that the checkpoint trained; "
                    "export into the model the plan was compiled from");
    init.clear_float_data();
    init.clear_external_data();
    init.clear_data_location();
    init.set_raw_data(
        std::string(reinterpret_cast<const char *>(t.data.data()), t.data.size() * 4));
    ++replaced;
  }
  if (replaced != (int)byName.size())
    return errorf("--onnx ", onnxIn, ": ", byName.size() - replaced,
                  " trained tensors are not initializers of this model; export into the model "
                  "the plan was compiled from");
  std::string out = model.SerializeAsString();
  std::string tmp = onnxOut + ".tmp";
  ZRT_RETURN_IF_ERROR(writeFileAtomically(tmp, out.data(), out.size()));
  std::error_code ec;
  fs::rename(tmp, onnxOut, ec);
  if (ec)
    return errorf(onnxOut, ": cannot write (", ec.message(), ")");
  return Status::ok();
}

} // namespace zrt
