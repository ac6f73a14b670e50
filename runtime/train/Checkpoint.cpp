//===- Checkpoint.cpp - sharded checkpoints, resume and export ------------===//
#include "train/Checkpoint.h"

#include "plan/PlanLoader.h"

#include "onnx.pb.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>
#include <unistd.h>

namespace fs = std::filesystem;

namespace zrt {
namespace {

constexpr int kCheckpointVersion = 1;

std::string stepName(int64_t step) { return "step-" + std::to_string(step); }

/// Writes |bytes| to |path| and flushes them to the disk.
Status writeDurably(const std::string &path, const char *data, size_t bytes) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return errorf(path, ": cannot create (", std::strerror(errno), ")");
  bool ok = std::fwrite(data, 1, bytes, f) == bytes && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  int saved = errno;
  ok = std::fclose(f) == 0 && ok;
  if (!ok)
    return errorf(path, ": cannot write (", std::strerror(saved), ")");
  return Status::ok();
}

Status readFile(const std::string &path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return errorf(path, ": cannot open (", std::strerror(errno), ")");
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return Status::ok();
}

/// JSON text of |j| (nlohmann/json: escaping, and names that are not valid
/// UTF-8 replaced rather than written raw or thrown on).
std::string dumpJson(const nlohmann::ordered_json &j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

/// manifest.json: the manifest for people (zrun reads manifest.pb).
std::string manifestJson(const plan::Checkpoint &m) {
  std::ostringstream hash;
  hash << std::hex << m.plan_hash();
  nlohmann::ordered_json j;
  j["version"] = m.version();
  j["plan_hash"] = hash.str();
  j["plan_source"] = m.plan_source();
  j["world_size"] = m.world_size();
  j["zero_stage"] = m.zero_stage();
  j["steps_done"] = m.steps_done();
  j["steps_applied"] = m.steps_applied();
  j["loss_scale"] = m.loss_scale();
  j["shuffle_seed"] = m.shuffle_seed();
  j["files"] = nlohmann::ordered_json::array();
  for (int r = 0; r < m.world_size(); ++r)
    j["files"].push_back("rank-" + std::to_string(r) + ".bin");
  j["tensors"] = nlohmann::ordered_json::array();
  for (const plan::CheckpointTensor &t : m.tensors())
    j["tensors"].push_back({{"name", t.name()},
                            {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())},
                            {"state_offset", t.state_offset()},
                            {"offset", t.offset()},
                            {"bucket_size", t.bucket_size()},
                            {"sharded", t.sharded()},
                            {"trainable", t.trainable()}});
  return dumpJson(j, 2) + "\n";
}

int64_t numel(const google::protobuf::RepeatedField<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

} // namespace

Status hashFile(const std::string &path, uint64_t &hash) {
  std::string bytes;
  ZRT_RETURN_IF_ERROR(readFile(path, bytes));
  hash = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return Status::ok();
}

plan::Checkpoint describeCheckpoint(const plan::Plan &plan, uint64_t planHash) {
  plan::Checkpoint m;
  m.set_version(kCheckpointVersion);
  m.set_plan_hash(planHash);
  m.set_plan_source(plan.source());
  m.set_world_size(plan.world_size());
  m.set_zero_stage(plan.zero_stage());
  m.set_state_arena_bytes(checkpointStateBytes(plan));
  m.set_shuffle_seed(-1);
  for (const plan::ParamLayout &l : plan.params()) {
    plan::CheckpointTensor *t = m.add_tensors();
    t->set_name(l.name());
    *t->mutable_shape() = l.shape();
    // Offloaded shards (host arena) follow the state arena in a rank's bytes.
    const plan::Buffer &bucket = plan.buffers(l.bucket());
    t->set_state_offset(bucket.offset() +
                        (bucket.arena() == plan::HOST ? plan.state_arena_bytes() : 0));
    t->set_offset(l.offset());
    t->set_bucket_size(l.bucket_size());
    t->set_sharded(l.sharded());
    t->set_trainable(true);
  }
  // Frozen float buffers (initializers that do not train) complete the state.
  for (const plan::Buffer &b : plan.buffers())
    if (b.arena() == plan::STATE && !b.view() && b.role() == "buffer" && b.dtype() == plan::F32 &&
        b.shard_of() == 0) {
      plan::CheckpointTensor *t = m.add_tensors();
      t->set_name(b.name());
      *t->mutable_shape() = b.shape();
      t->set_state_offset(b.offset());
    }
  return m;
}

Status beginCheckpoint(const std::string &root, int64_t step, std::string &tmpDir) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec)
    return errorf("--checkpoint-dir ", root, ": cannot create (", ec.message(), ")");
  tmpDir = (fs::path(root) / (stepName(step) + ".tmp")).string();
  fs::remove_all(tmpDir, ec); // a save that crashed earlier
  if (!fs::create_directory(tmpDir, ec) || ec)
    return errorf(tmpDir, ": cannot create (", ec.message(), ")");
  return Status::ok();
}

Status writeRankState(const std::string &tmpDir, int rank, const std::vector<char> &state) {
  return writeDurably((fs::path(tmpDir) / ("rank-" + std::to_string(rank) + ".bin")).string(),
                      state.data(), state.size());
}

Status finishCheckpoint(const std::string &root, const std::string &tmpDir, int64_t step,
                        const plan::Checkpoint &manifest,
                        const std::function<void()> &beforeRename) {
  std::string pb = manifest.SerializeAsString(), json = manifestJson(manifest);
  ZRT_RETURN_IF_ERROR(
      writeDurably((fs::path(tmpDir) / "manifest.pb").string(), pb.data(), pb.size()));
  ZRT_RETURN_IF_ERROR(
      writeDurably((fs::path(tmpDir) / "manifest.json").string(), json.data(), json.size()));
  if (beforeRename)
    beforeRename();
  std::error_code ec;
  fs::path final = fs::path(root) / stepName(step);
  fs::remove_all(final, ec);
  fs::rename(tmpDir, final, ec);
  if (ec)
    return errorf(final.string(), ": cannot rename the new checkpoint into place (", ec.message(),
                  ")");
  std::string latest = stepName(step) + "\n";
  std::string latestTmp = (fs::path(root) / "latest.tmp").string();
  ZRT_RETURN_IF_ERROR(writeDurably(latestTmp, latest.data(), latest.size()));
  fs::rename(latestTmp, fs::path(root) / "latest", ec);
  if (ec)
    return errorf(root, "/latest: cannot update (", ec.message(), ")");
  return Status::ok();
}

Status findCheckpoint(const std::string &path, std::string &dir) {
  std::error_code ec;
  if (fs::exists(fs::path(path) / "manifest.pb", ec)) {
    dir = path;
    return Status::ok();
  }
  std::string latest;
  if (!readFile((fs::path(path) / "latest").string(), latest))
    return errorf("--resume ", path,
                  ": neither a checkpoint (no manifest.pb) nor a "
                  "checkpoint directory (no 'latest'); pass the "
                  "--checkpoint-dir of a run that saved");
  while (!latest.empty() && (latest.back() == '\n' || latest.back() == '\r'))
    latest.pop_back();
  if (latest.empty() || latest.find('/') != std::string::npos || latest == "..")
    return errorf(path, "/latest: does not name a checkpoint");
  dir = (fs::path(path) / latest).string();
  if (!fs::exists(fs::path(dir) / "manifest.pb", ec))
    return errorf(path, "/latest names ", latest, ", which has no manifest.pb");
  return Status::ok();
}

Status readManifest(const std::string &dir, plan::Checkpoint &manifest) {
  std::string bytes;
  std::string path = (fs::path(dir) / "manifest.pb").string();
  ZRT_RETURN_IF_ERROR(readFile(path, bytes));
  if (!manifest.ParseFromString(bytes))
    return errorf(path, ": not a checkpoint manifest (corrupt?)");
  if (manifest.version() != kCheckpointVersion)
    return errorf(path, ": checkpoint format version ", manifest.version(),
                  " is not supported (this zrun reads ", kCheckpointVersion, ")");
  if (manifest.world_size() < 1 || manifest.world_size() > 4096)
    return errorf(path, ": invalid world size ", manifest.world_size());
  return Status::ok();
}

Status readRankState(const std::string &dir, int rank, int64_t bytes, std::vector<char> &state) {
  std::string path = (fs::path(dir) / ("rank-" + std::to_string(rank) + ".bin")).string();
  std::string content;
  ZRT_RETURN_IF_ERROR(readFile(path, content));
  if ((int64_t)content.size() != bytes)
    return errorf(path, ": ", content.size(), " bytes, the plan's state arena has ", bytes,
                  " (a checkpoint of another plan?)");
  state.assign(content.begin(), content.end());
  return Status::ok();
}

Status consolidate(const std::string &dir, const plan::Checkpoint &m,
                   std::vector<NamedTensor> &out) {
  std::vector<std::string> ranks(m.world_size());
  for (int r = 0; r < m.world_size(); ++r) {
    ZRT_RETURN_IF_ERROR(
        readFile((fs::path(dir) / ("rank-" + std::to_string(r) + ".bin")).string(), ranks[r]));
    if ((int64_t)ranks[r].size() != m.state_arena_bytes())
      return errorf(dir, "/rank-", r, ".bin: ", ranks[r].size(), " bytes, the manifest says ",
                    m.state_arena_bytes(), " (truncated?)");
  }
  int64_t arena = m.state_arena_bytes();
  for (const plan::CheckpointTensor &t : m.tensors()) {
    NamedTensor nt;
    nt.name = t.name();
    nt.shape.assign(t.shape().begin(), t.shape().end());
    nt.trainable = t.trainable();
    int64_t n = numel(t.shape());
    if (n < 0 || t.offset() < 0 || t.state_offset() < 0 ||
        (t.bucket_size() > 0 &&
         (t.offset() + n > t.bucket_size() || t.bucket_size() % m.world_size())))
      return errorf(dir, ": tensor '", t.name(), "' has an invalid layout in the manifest");
    nt.data.resize(n);
    int64_t shard = t.sharded() ? t.bucket_size() / m.world_size() : 0;
    for (int64_t e = 0; e < n; ++e) {
      int64_t element = t.offset() + e;
      int rank = t.sharded() ? (int)(element / shard) : 0;
      int64_t pos = t.sharded() ? element % shard : element;
      int64_t byte = t.state_offset() + pos * 4;
      if (byte < 0 || byte + 4 > arena)
        return errorf(dir, ": tensor '", t.name(), "' lies outside the state arena");
      std::memcpy(&nt.data[e], ranks[rank].data() + byte, 4);
    }
    out.push_back(std::move(nt));
  }
  return Status::ok();
}

Status writeSafetensors(const std::string &path, const std::vector<NamedTensor> &tensors,
                        const plan::Checkpoint &m) {
  // Header: JSON with dtype, shape and byte range of each tensor, padded with
  // spaces to a multiple of 8; then the little-endian data.
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"},
                            {"producer", "zrun export"},
                            {"source", m.plan_source()},
                            {"steps", std::to_string(m.steps_done())}};
  int64_t offset = 0;
  for (const NamedTensor &t : tensors) {
    int64_t bytes = (int64_t)t.data.size() * 4;
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
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
  for (const NamedTensor &t : tensors)
    file.append(reinterpret_cast<const char *>(t.data.data()), t.data.size() * 4);
  std::string tmp = path + ".tmp";
  ZRT_RETURN_IF_ERROR(writeDurably(tmp, file.data(), file.size()));
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return errorf(path, ": cannot write (", ec.message(), ")");
  return Status::ok();
}

Status writeTrainedOnnx(const std::string &onnxIn, const std::string &onnxOut,
                        const std::vector<NamedTensor> &tensors, int &replaced) {
  std::string bytes;
  ZRT_RETURN_IF_ERROR(readFile(onnxIn, bytes));
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
  ZRT_RETURN_IF_ERROR(writeDurably(tmp, out.data(), out.size()));
  std::error_code ec;
  fs::rename(tmp, onnxOut, ec);
  if (ec)
    return errorf(onnxOut, ": cannot write (", ec.message(), ")");
  return Status::ok();
}

} // namespace zrt
