//===- Checkpoint.cpp - sharded checkpoints and resume ----------------------===//
#include "train/Checkpoint.h"

#include "plan/PlanLoader.h"
#include "support/Files.h"
#include "support/JsonDepth.h" // clipForMessage

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#define XXH_INLINE_ALL
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

namespace fs = std::filesystem;

namespace zrt {
namespace {

// 2: checksums (rank_checksums, manifest_checksum). Version 1 checkpoints
// are still read, unverified.
constexpr int kCheckpointVersion = 3;

uint64_t xxh3(const void *data, size_t bytes) { return XXH3_64bits(data, bytes); }

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

/// The manifest's checksum: XXH3 of its serialization with the field 0.
uint64_t manifestChecksum(plan::Checkpoint m) {
  m.set_manifest_checksum(0);
  std::string bytes = m.SerializeAsString();
  return xxh3(bytes.data(), bytes.size());
}

/// a * b, or false when it overflows int64.
bool mulChecked(int64_t a, int64_t b, int64_t &out) { return !__builtin_mul_overflow(a, b, &out); }

std::string stepName(int64_t step) { return "step-" + std::to_string(step); }

/// Writes |bytes| to |path| (atomically, flushed to the disk).
Status writeDurably(const std::string &path, const char *data, size_t bytes) {
  return writeFileAtomically(path, data, bytes);
}

Status readFile(const std::string &path, std::string &out) { return readRegularFile(path, out); }

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
  if (m.state_shards() > 0)
    j["state_shards"] = m.state_shards();
  j["zero_stage"] = m.zero_stage();
  j["steps_done"] = m.steps_done();
  j["steps_applied"] = m.steps_applied();
  j["loss_scale"] = m.loss_scale();
  j["shuffle_seed"] = m.shuffle_seed();
  if (m.has_dropout_seed())
    j["dropout_seed"] = m.dropout_seed();
  j["global_batch"] = m.global_batch();
  j["files"] = nlohmann::ordered_json::array();
  for (int r = 0; r < m.world_size(); ++r)
    j["files"].push_back("rank-" + std::to_string(r) + ".bin");
  j["xxh3"] = nlohmann::ordered_json::array(); // of each file
  for (uint64_t c : m.rank_checksums())
    j["xxh3"].push_back(hex64(c));
  j["tensors"] = nlohmann::ordered_json::array();
  for (const plan::CheckpointTensor &t : m.tensors())
    j["tensors"].push_back({{"name", t.name()},
                            {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())},
                            {"state_offset", t.state_offset()},
                            {"offset", t.offset()},
                            {"bucket_size", t.bucket_size()},
                            {"sharded", t.sharded()},
                            {"trainable", t.trainable()},
                            {"role", t.role().empty() ? "value" : t.role()}});
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
  m.set_state_shards(plan.state_shards());
  m.set_zero_stage(plan.zero_stage());
  m.set_state_arena_bytes(checkpointStateBytes(plan));
  m.set_shuffle_seed(-1);
  *m.mutable_record() = plan.record();
  for (const plan::ParamLayout &l : plan.params()) {
    plan::CheckpointTensor *t = m.add_tensors();
    t->set_name(l.name());
    *t->mutable_shape() = l.shape();
    // Offloaded shards (host or NVMe arena) follow the state arena in a
    // rank's bytes.
    t->set_state_offset(stateImageOffset(plan, plan.buffers(l.bucket())));
    t->set_offset(l.offset());
    t->set_bucket_size(l.bucket_size());
    t->set_sharded(l.sharded());
    t->set_trainable(true);
  }
  // The optimizer's state of each parameter, by role: the state buffers
  // beside its bucket (zero-partition names them BUCKET.adam_m, ...), whole
  // or this rank's shard (stages 1-3 partition them); and the step count.
  // A rank's bytes: the state arena, the host arena's state, the NVMe arena.
  for (const plan::ParamLayout &l : plan.params()) {
    const std::string prefix = plan.buffers(l.bucket()).name() + ".";
    for (const plan::Buffer &b : plan.buffers()) {
      // (param_copy: the 16-bit copies, recomputed from the parameters.)
      if (b.view() || b.role().empty() || b.role() == "param" || b.role() == "grad" ||
          b.role() == "buffer" || b.role() == "step" || b.role() == "param_copy" ||
          b.name().compare(0, prefix.size(), prefix))
        continue;
      // NVMe offload's chunked moments (BUCKET.adam_m.chunk0, .chunk1, ...)
      // lie end to end: the first stands for the moment, of all their
      // elements.
      int64_t n = numel(b.shape());
      size_t chunk = b.name().rfind(".chunk");
      if (chunk != std::string::npos && b.arena() == plan::NVME) {
        std::string base = b.name().substr(0, chunk);
        if (b.name() != base + ".chunk0")
          continue;
        n = 0;
        for (const plan::Buffer &c : plan.buffers())
          if (!c.view() && c.name().compare(0, base.size() + 6, base + ".chunk") == 0)
            n += numel(c.shape());
      }
      plan::CheckpointTensor *t = m.add_tensors();
      t->set_name(l.name());
      t->set_role(b.role());
      *t->mutable_shape() = l.shape();
      t->set_state_offset(stateImageOffset(plan, b));
      t->set_offset(l.offset());
      t->set_bucket_size(l.bucket_size());
      t->set_sharded(n < l.bucket_size());
    }
  }
  for (const plan::Buffer &b : plan.buffers())
    if (!b.view() && b.role() == "step" && (b.arena() == plan::STATE || b.arena() == plan::HOST)) {
      plan::CheckpointTensor *t = m.add_tensors();
      t->set_name(b.name());
      t->set_role("step");
      t->set_state_offset(stateImageOffset(plan, b));
    }
  // Samples per step: the micro-batch x accumulation steps x world size.
  if (plan.has_training())
    m.set_global_batch(planMicroBatch(plan) * plan.world_size() *
                       std::max<int64_t>(1, (int64_t)plan.training().grad_accum_steps()));
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

std::string checkpointTmpDir(const std::string &root, int64_t step) {
  return (fs::path(root) / (stepName(step) + ".tmp")).string();
}

Status beginCheckpoint(const std::string &root, int64_t step, std::string &tmpDir) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec)
    return errorf("--checkpoint-dir ", root, ": cannot create (", ec.message(), ")");
  tmpDir = checkpointTmpDir(root, step);
  // Saves that a killed run left half done (the directory is locked: no
  // other run is writing one).
  for (const fs::directory_entry &e : fs::directory_iterator(root, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0 && name.size() > 4 && name.substr(name.size() - 4) == ".tmp")
      fs::remove_all(e.path(), ec);
  }
  if (!fs::create_directory(tmpDir, ec) || ec)
    return errorf(tmpDir, ": cannot create (", ec.message(), ")");
  return Status::ok();
}

namespace {
/// The NVMe arena moves through a buffer of this size, 4 KiB-aligned (the
/// swap file's O_DIRECT copies go straight into it).
constexpr int64_t kNvmePiece = 64 << 20;

using Piece = std::unique_ptr<char, void (*)(void *)>;
Piece allocPiece(int64_t bytes) {
  int64_t n = std::max<int64_t>(4096, std::min(bytes, kNvmePiece) + 4095) / 4096 * 4096;
  return Piece(static_cast<char *>(std::aligned_alloc(4096, n)), std::free);
}

Status ioError(const std::string &path, const char *what) {
  return errorf(path, ": cannot ", what, " (", std::strerror(errno), ")");
}

/// pwrite/pread all of |n| bytes at |off|.
Status fullIo(int fd, bool write, char *p, int64_t n, int64_t off, const std::string &path) {
  while (n > 0) {
    ssize_t r = write ? ::pwrite(fd, p, n, off) : ::pread(fd, p, n, off);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      if (r == 0)
        errno = EIO;
      return ioError(path, write ? "write" : "read");
    }
    p += r, n -= r, off += r;
  }
  return Status::ok();
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};
} // namespace

Status writeRankTail(const std::string &tmpDir, int rank, int64_t headBytes, int64_t tailBytes,
                     const NvmeIo &read) {
  std::string path = (fs::path(tmpDir) / ("rank-" + std::to_string(rank) + ".bin")).string();
  Fd f;
  if ((f.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
    return ioError(path, "create");
  Piece piece = allocPiece(tailBytes);
  if (!piece)
    return errorf("out of memory for a checkpoint's ", kNvmePiece, "-byte NVMe buffer");
  for (int64_t at = 0; at < tailBytes; at += kNvmePiece) {
    int64_t n = std::min(kNvmePiece, tailBytes - at);
    ZRT_RETURN_IF_ERROR(read(at, piece.get(), n));
    ZRT_RETURN_IF_ERROR(fullIo(f.fd, true, piece.get(), n, headBytes + at, path));
  }
  return Status::ok();
}

Status writeRankState(const std::string &tmpDir, int rank, const std::vector<char> &state,
                      int64_t tailBytes) {
  std::string base = (fs::path(tmpDir) / ("rank-" + std::to_string(rank))).string();
  uint64_t hash = 0;
  if (tailBytes == 0) {
    ZRT_RETURN_IF_ERROR(writeDurably(base + ".bin", state.data(), state.size()));
    hash = xxh3(state.data(), state.size());
  } else {
    // writeRankTail wrote the NVMe arena after the head: the head goes in
    // front, and the checksum reads the tail back a piece at a time (from
    // the page cache, mostly). The step directory is still a temporary one,
    // renamed when every rank is done: no rename per file is needed.
    std::string path = base + ".bin";
    Fd f;
    if ((f.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC)) < 0)
      return ioError(path, "open");
    ZRT_RETURN_IF_ERROR(
        fullIo(f.fd, true, const_cast<char *>(state.data()), state.size(), 0, path));
    std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t *)> h(XXH3_createState(),
                                                                       XXH3_freeState);
    Piece piece = allocPiece(tailBytes);
    if (!h || !piece)
      return errorf("out of memory for a checkpoint's checksum");
    XXH3_64bits_reset(h.get());
    XXH3_64bits_update(h.get(), state.data(), state.size());
    for (int64_t at = 0; at < tailBytes; at += kNvmePiece) {
      int64_t n = std::min(kNvmePiece, tailBytes - at);
      ZRT_RETURN_IF_ERROR(fullIo(f.fd, false, piece.get(), n, (int64_t)state.size() + at, path));
      XXH3_64bits_update(h.get(), piece.get(), n);
    }
    hash = XXH3_64bits_digest(h.get());
    if (::fsync(f.fd) != 0)
      return ioError(path, "flush");
  }
  // The shard's checksum, which rank 0 puts into the manifest.
  std::string sum = hex64(hash) + "\n";
  return writeDurably(base + ".xxh3", sum.data(), sum.size());
}

Status finishCheckpoint(const std::string &root, const std::string &tmpDir, int64_t step,
                        const plan::Checkpoint &manifest,
                        const std::function<void()> &beforeRename) {
  plan::Checkpoint m = manifest;
  m.set_version(kCheckpointVersion);
  m.clear_rank_checksums();
  for (int r = 0; r < m.world_size(); ++r) {
    std::string path = (fs::path(tmpDir) / ("rank-" + std::to_string(r) + ".xxh3")).string();
    std::string text;
    ZRT_RETURN_IF_ERROR(readFile(path, text));
    char *end = nullptr;
    uint64_t sum = std::strtoull(text.c_str(), &end, 16);
    if (text.size() < 16 || end != text.c_str() + 16)
      return errorf(path, ": not a checksum");
    m.add_rank_checksums(sum);
    fs::remove(path);
  }
  m.set_manifest_checksum(manifestChecksum(m));
  std::string pb = m.SerializeAsString(), json = manifestJson(m);
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
  // 'latest' replaced atomically (through a new temporary beside it).
  std::string latest = stepName(step) + "\n";
  return writeDurably((fs::path(root) / "latest").string(), latest.data(), latest.size());
}

namespace {

/// The limits a manifest's fields must keep (see validateManifest).
constexpr int64_t kMaxSteps = int64_t(1) << 40;
constexpr int64_t kMaxStateBytes = int64_t(1) << 50; // 1 PiB per rank
constexpr int kMaxRank = 8;

/// Every field of |m| in range, every tensor within the state arena, with
/// overflow-checked sizes: what the plan validator does for plans, so that
/// no later use of the manifest can read out of bounds or loop for ever.
/// The ranks a checkpoint's sharded state is split over (the first this many
/// rank files hold one whole copy).
int64_t manifestShards(const plan::Checkpoint &m) {
  return m.state_shards() > 0 ? m.state_shards() : m.world_size();
}

/// Where element |e| of tensor |t| lies in a checkpoint whose state is
/// split over |world| ranks: the rank whose file holds it, the element's index past
/// t.state_offset() there, and how many elements from it on lie in the same rank (the rest of that
/// rank's shard, or all of the tensor's).
struct ElementPlace {
  int rank;
  int64_t pos, run;
};
ElementPlace placeOf(const plan::CheckpointTensor &t, int64_t world, int64_t e, int64_t count) {
  int64_t element = t.offset() + e;
  if (!t.sharded())
    return {0, element, count - e};
  int64_t shard = t.bucket_size() / world;
  return {(int)(element / shard), element % shard, std::min(count - e, shard - element % shard)};
}

Status validateManifest(const plan::Checkpoint &m, const std::string &path) {
  auto bad = [&](const auto &...what) {
    return errorf(path, ": ", what..., " (a damaged or hand-edited manifest)");
  };
  if (m.world_size() < 1 || m.world_size() > 4096)
    return bad("world size ", m.world_size(), " is not in [1, 4096]");
  if (m.steps_done() < 0 || m.steps_done() > kMaxSteps)
    return bad("steps_done ", m.steps_done(), " is not in [0, 2^40]");
  if (m.steps_applied() < 0 || m.steps_applied() > m.steps_done())
    return bad("steps_applied ", m.steps_applied(), " is not in [0, steps_done]");
  if (m.state_arena_bytes() < 0 || m.state_arena_bytes() > kMaxStateBytes ||
      m.state_arena_bytes() % 4)
    return bad("state_arena_bytes ", m.state_arena_bytes(), " is not a size");
  if (!std::isfinite(m.loss_scale()) || m.loss_scale() < 0 || m.scaler_hysteresis() < 0 ||
      m.scaler_iteration() < 0 || m.scaler_iteration() > kMaxSteps ||
      m.scaler_last_overflow() < -1 || m.scaler_last_overflow() > kMaxSteps)
    return bad("the loss scaler's state is out of range");
  if (m.shuffle_seed() < -1)
    return bad("shuffle_seed ", m.shuffle_seed(), " is negative");
  if (m.state_shards() < 0 || m.state_shards() > m.world_size() ||
      (m.state_shards() > 0 && m.world_size() % m.state_shards()))
    return bad("state_shards ", m.state_shards(), " does not divide world size ", m.world_size());
  if (m.version() >= 2 && m.rank_checksums_size() != m.world_size())
    return bad(m.rank_checksums_size(), " shard checksums for world size ", m.world_size());
  const int64_t arena = m.state_arena_bytes();
  int64_t total = 0; // tensors do not overlap: all of them fit the shards
  for (const plan::CheckpointTensor &t : m.tensors()) {
    if (t.name().empty() || t.shape_size() > kMaxRank)
      return bad("a tensor without a name, or of rank above ", kMaxRank);
    int64_t n = 1;
    for (int64_t d : t.shape())
      if (d < 0 || !mulChecked(n, d, n))
        return bad("tensor '", t.name(), "' has an invalid shape");
    int64_t bucket = t.bucket_size(), world = manifestShards(m);
    if (t.offset() < 0 || bucket < 0 || t.state_offset() < 0 || t.state_offset() > arena ||
        (bucket == 0 && (t.offset() != 0 || t.sharded())) ||
        (bucket > 0 && (t.offset() > bucket || n > bucket - t.offset())) ||
        (t.sharded() && bucket % world))
      return bad("tensor '", t.name(), "' has an invalid layout");
    // The bytes of a rank's state arena the tensor reads: its bucket's
    // shard, or its own elements.
    int64_t elements = t.sharded() ? bucket / world : t.offset() + n;
    if (elements > (arena - t.state_offset()) / 4)
      return bad("tensor '", t.name(), "' lies outside the state arena");
    if ((total += n) > manifestShards(m) * (arena / 4))
      return bad("the tensors hold more elements than the shards");
  }
  return Status::ok();
}

/// The checkpoint in |dir|, all of it checked: its manifest (fields and
/// checksum) and every shard (size and checksum).
Status openStep(const std::string &dir, plan::Checkpoint &manifest) {
  ZRT_RETURN_IF_ERROR(readManifest(dir, manifest));
  for (int r = 0; r < manifest.world_size(); ++r) {
    // A piece at a time: a rank's state with its NVMe arena may not fit in
    // memory.
    std::string path = (fs::path(dir) / ("rank-" + std::to_string(r) + ".bin")).string();
    Fd f;
    int64_t fileBytes = 0;
    ZRT_RETURN_IF_ERROR(openRegularFile(path, f.fd, fileBytes));
    if (fileBytes != manifest.state_arena_bytes())
      return errorf(path, ": ", fileBytes, " bytes, the manifest says ",
                    manifest.state_arena_bytes(), " (truncated?)");
    if (manifest.version() < 2)
      continue;
    std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t *)> h(XXH3_createState(),
                                                                       XXH3_freeState);
    Piece piece = allocPiece(fileBytes);
    if (!h || !piece)
      return errorf("out of memory for a checkpoint's checksum");
    XXH3_64bits_reset(h.get());
    for (int64_t at = 0; at < fileBytes; at += kNvmePiece) {
      int64_t n = std::min<int64_t>(kNvmePiece, fileBytes - at);
      ZRT_RETURN_IF_ERROR(fullIo(f.fd, false, piece.get(), n, at, path));
      XXH3_64bits_update(h.get(), piece.get(), n);
    }
    if (XXH3_64bits_digest(h.get()) != manifest.rank_checksums(r))
      return errorf(path, ": checksum mismatch (the file was damaged after it was saved)");
  }
  return Status::ok();
}

/// K of a step directory's name "step-K" (digits only), or -1.
int64_t parseStepName(const std::string &name) {
  if (name.rfind("step-", 0) != 0 || name.size() == 5 || name.size() > 5 + 18)
    return -1;
  for (size_t i = 5; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9')
      return -1;
  return std::strtoll(name.c_str() + 5, nullptr, 10);
}

/// The step directories of a checkpoint root, newest first.
std::vector<std::pair<int64_t, std::string>> stepDirectories(const std::string &root) {
  std::vector<std::pair<int64_t, std::string>> steps;
  std::error_code ec;
  for (const fs::directory_entry &e : fs::directory_iterator(root, ec)) {
    std::string name = e.path().filename().string();
    if (int64_t k = parseStepName(name); k >= 0 && e.is_directory(ec))
      steps.emplace_back(k, e.path().string());
  }
  std::sort(steps.begin(), steps.end(), std::greater<>());
  return steps;
}

} // namespace

void pruneCheckpoints(const std::string &root, int64_t keep) {
  std::string latest;
  if (readFile((fs::path(root) / "latest").string(), latest)) {
    while (!latest.empty() && (latest.back() == '\n' || latest.back() == '\r'))
      latest.pop_back();
  }
  int64_t kept = 0;
  std::error_code ec;
  for (const auto &[step, dir] : stepDirectories(root)) {
    if (fs::path(dir).filename() == latest || kept < keep) {
      ++kept;
      continue;
    }
    fs::remove_all(dir, ec);
  }
}

Status openCheckpoint(const std::string &flag, const std::string &path, std::string &dir,
                      plan::Checkpoint &manifest, std::string &note) {
  note.clear();
  std::error_code ec;
  if (fs::exists(fs::path(path) / "manifest.pb", ec)) {
    // One step directory: it, or an error.
    dir = path;
    if (Status s = openStep(dir, manifest); !s)
      return errorf(flag, " ", s.message());
    return Status::ok();
  }
  std::string latest, latestDir, why;
  int64_t latestStep = -1; // what 'latest' names, when it names a step
  if (Status s = readRegularFile((fs::path(path) / "latest").string(), latest, 64); s) {
    while (!latest.empty() && (latest.back() == '\n' || latest.back() == '\r'))
      latest.pop_back();
    // Exactly "step-K" (what saving writes); anything else names nothing,
    // and every complete step is a candidate below.
    if ((latestStep = parseStepName(latest)) < 0)
      why = path + "/latest does not name a checkpoint (it holds '" + clipForMessage(latest, 40) +
            "', not step-N)";
    else if (Status s = openStep(latestDir = (fs::path(path) / latest).string(), manifest); s)
      return dir = latestDir, Status::ok();
    else
      why = s.message();
  } else if (fs::exists(fs::path(path) / "latest", ec)) {
    why = s.message();
  }
  // 'latest' is missing or damaged: the newest complete step before it.
  for (const auto &[step, candidate] : stepDirectories(path)) {
    if (candidate == latestDir)
      continue;
    if (latestStep >= 0 && step > latestStep)
      continue; // newer than 'latest': never completed
    if (!openStep(candidate, manifest))
      continue;
    dir = candidate;
    note = why.empty()
               ? path + " has no 'latest'; using " + candidate + ", the newest complete checkpoint"
               : why + "; using " + candidate + ", the newest complete checkpoint before it";
    return Status::ok();
  }
  if (!why.empty())
    return errorf(flag, " ", why, "; no earlier complete checkpoint in ", path);
  return errorf(flag, " ", path,
                ": neither a checkpoint (no manifest.pb) nor a checkpoint directory (no "
                "'latest'); pass the --checkpoint-dir of a run that saved");
}

Status readManifest(const std::string &dir, plan::Checkpoint &manifest) {
  std::string bytes;
  std::string path = (fs::path(dir) / "manifest.pb").string();
  ZRT_RETURN_IF_ERROR(readFile(path, bytes));
  return parseManifest(bytes, path, manifest);
}

Status parseManifest(const std::string &bytes, const std::string &path,
                     plan::Checkpoint &manifest) {
  if (!manifest.ParseFromString(bytes))
    return errorf(path, ": not a checkpoint manifest (corrupt?)");
  if (manifest.version() < 1 || manifest.version() > kCheckpointVersion)
    return errorf(path, ": checkpoint format version ", manifest.version(),
                  " is not supported (this zrun reads 1 to ", kCheckpointVersion, ")");
  // Version 2 on seals the manifest and the shards with checksums. Whether
  // to check them is decided by the checksums' presence, not by the version
  // field alone: a version byte damaged from 3 to 1 must not turn the check
  // off (the version is under the checksum, so the check then fails).
  bool sealed = manifest.manifest_checksum() != 0 || manifest.rank_checksums_size() > 0;
  if ((manifest.version() >= 2 || sealed) &&
      manifestChecksum(manifest) != manifest.manifest_checksum())
    return errorf(path, ": checksum mismatch (the manifest was damaged after it was saved)");
  return validateManifest(manifest, path);
}

Status readRankState(const std::string &dir, int rank, int64_t bytes, std::vector<char> &state,
                     int64_t tailBytes, const NvmeIo &write) {
  std::string path = (fs::path(dir) / ("rank-" + std::to_string(rank) + ".bin")).string();
  if (tailBytes == 0) {
    std::string content;
    ZRT_RETURN_IF_ERROR(readFile(path, content));
    if ((int64_t)content.size() != bytes)
      return errorf(path, ": ", content.size(), " bytes, the plan's state arena has ", bytes,
                    " (a checkpoint of another plan?)");
    state.assign(content.begin(), content.end());
    return Status::ok();
  }
  // The head into |state|, the NVMe arena from the file to |write| (the
  // swap file) a piece at a time.
  Fd f;
  int64_t fileBytes = 0;
  ZRT_RETURN_IF_ERROR(openRegularFile(path, f.fd, fileBytes));
  if (fileBytes != bytes + tailBytes)
    return errorf(path, ": ", fileBytes, " bytes, the plan's state has ", bytes + tailBytes,
                  " (a checkpoint of another plan?)");
  state.resize(bytes);
  ZRT_RETURN_IF_ERROR(fullIo(f.fd, false, state.data(), bytes, 0, path));
  Piece piece = allocPiece(tailBytes);
  if (!piece)
    return errorf("out of memory for a checkpoint's ", kNvmePiece, "-byte NVMe buffer");
  for (int64_t at = 0; at < tailBytes; at += kNvmePiece) {
    int64_t n = std::min(kNvmePiece, tailBytes - at);
    ZRT_RETURN_IF_ERROR(fullIo(f.fd, false, piece.get(), n, bytes + at, path));
    ZRT_RETURN_IF_ERROR(write(at, piece.get(), n));
  }
  return Status::ok();
}

Status consolidate(const std::string &dir, const plan::Checkpoint &m,
                   std::vector<NamedTensor> &out) {
  // Validated again: the reads below rely on it.
  ZRT_RETURN_IF_ERROR(validateManifest(m, (fs::path(dir) / "manifest.pb").string()));
  std::vector<std::string> ranks(m.world_size());
  for (int r = 0; r < m.world_size(); ++r)
    ZRT_RETURN_IF_ERROR(
        readFile((fs::path(dir) / ("rank-" + std::to_string(r) + ".bin")).string(), ranks[r]));
  return consolidateShards(dir, m, ranks, out);
}

Status consolidateShards(const std::string &dir, const plan::Checkpoint &m,
                         const std::vector<std::string> &ranks, std::vector<NamedTensor> &out) {
  ZRT_RETURN_IF_ERROR(validateManifest(m, (fs::path(dir) / "manifest.pb").string()));
  if ((int64_t)ranks.size() != m.world_size())
    return errorf(dir, ": ", ranks.size(), " shards for world size ", m.world_size());
  for (int r = 0; r < m.world_size(); ++r)
    if ((int64_t)ranks[r].size() != m.state_arena_bytes())
      return errorf(dir, "/rank-", r, ".bin: ", ranks[r].size(), " bytes, the manifest says ",
                    m.state_arena_bytes(), " (truncated?)");
  // The manifest is validated: the reads below stay in bounds.
  for (const plan::CheckpointTensor &t : m.tensors()) {
    if (!t.role().empty())
      continue; // optimizer state: not a weight
    NamedTensor nt;
    nt.name = t.name();
    nt.shape.assign(t.shape().begin(), t.shape().end());
    nt.trainable = t.trainable();
    int64_t n = numel(t.shape());
    nt.data.resize(n);
    for (int64_t e = 0; e < n;) {
      ElementPlace at = placeOf(t, manifestShards(m), e, n);
      std::memcpy(&nt.data[e], ranks[at.rank].data() + t.state_offset() + at.pos * 4, at.run * 4);
      e += at.run;
    }
    out.push_back(std::move(nt));
  }
  return Status::ok();
}

namespace {

/// Where a plan keeps element [first, first + count) of (parameter, role)
/// on one rank: its state bytes from |stateOffset|, elements [flatBegin,
/// flatEnd) of the flat bucket (its shard, or all of it).
struct OwnedRange {
  std::string name, role;
  int64_t stateOffset = 0, flatBegin = 0, flatEnd = 0, offset = 0, count = 0;
};

/// What rank |rank| of |plan| holds of each parameter's value and optimizer
/// state (the same entries describeCheckpoint records, placed for that rank).
std::vector<OwnedRange> ownedRanges(const plan::Plan &plan, int rank) {
  plan::Checkpoint layout = describeCheckpoint(plan, 0);
  std::vector<OwnedRange> out;
  const int64_t shards = stateShards(plan), index = stateShardOf(plan, rank);
  for (const plan::CheckpointTensor &t : layout.tensors()) {
    OwnedRange r{t.name(), t.role(), t.state_offset(), 0, 0, t.offset(), numel(t.shape())};
    if (t.sharded()) {
      int64_t shard = t.bucket_size() / shards;
      r.flatBegin = index * shard, r.flatEnd = r.flatBegin + shard;
    } else {
      r.flatBegin = 0, r.flatEnd = t.bucket_size() ? t.bucket_size() : r.count;
    }
    out.push_back(r);
  }
  return out;
}

std::string roleText(const std::string &role) { return role.empty() ? "value" : role; }

} // namespace

Status checkReshard(const plan::Plan &plan, const plan::Checkpoint &old, const std::string &dir) {
  if (old.version() < 3)
    return errorf("--resume ", dir, ": the checkpoint (format version ", old.version(),
                  ") does not record the optimizer state by parameter, so only the plan that "
                  "saved it can resume it (",
                  old.plan_source(), ", world size ", old.world_size(), ")");
  plan::Checkpoint now = describeCheckpoint(plan, 0);
  if (old.global_batch() != now.global_batch())
    return errorf("--resume ", dir, ": the checkpoint trained ", old.global_batch(),
                  " samples per step, this plan takes ", now.global_batch(),
                  " (micro-batch x accumulation steps x world size): step K would read other "
                  "samples than the run it continues; compile with --micro-batch and "
                  "--grad-accum whose product with --world-size is ",
                  old.global_batch());
  std::map<std::pair<std::string, std::string>, const plan::CheckpointTensor *> saved;
  for (const plan::CheckpointTensor &t : old.tensors())
    saved[{t.name(), t.role()}] = &t;
  std::vector<std::string> problems;
  std::set<std::pair<std::string, std::string>> wanted;
  for (const plan::CheckpointTensor &t : now.tensors()) {
    wanted.insert({t.name(), t.role()});
    auto it = saved.find({t.name(), t.role()});
    if (it == saved.end())
      problems.push_back("'" + t.name() + "' (" + roleText(t.role()) +
                         ") is not in the checkpoint");
    else if (!std::equal(t.shape().begin(), t.shape().end(), it->second->shape().begin(),
                         it->second->shape().end()))
      problems.push_back("'" + t.name() + "' has another shape in the checkpoint");
  }
  for (const auto &[key, t] : saved)
    if (!wanted.count(key) && (key.second.empty() ? t->trainable() : true))
      problems.push_back("the checkpoint's '" + key.first + "' (" + roleText(key.second) +
                         ") is not in this plan");
  if (problems.empty())
    return Status::ok();
  std::string all;
  for (size_t i = 0; i < problems.size() && i < 8; ++i)
    all += "\n  " + problems[i];
  if (problems.size() > 8)
    all += "\n  ... and " + std::to_string(problems.size() - 8) + " more";
  return errorf("--resume ", dir,
                ": the checkpoint does not fit this plan (another model, or "
                "another optimizer):",
                all);
}

Status readReshardedState(const plan::Plan &plan, const plan::Checkpoint &old,
                          const std::string &dir, int rank, std::vector<char> &state) {
  std::map<std::pair<std::string, std::string>, const plan::CheckpointTensor *> saved;
  for (const plan::CheckpointTensor &t : old.tensors())
    saved[{t.name(), t.role()}] = &t;
  const int64_t oldShards = manifestShards(old);
  std::vector<std::ifstream> files(oldShards);
  for (const OwnedRange &r : ownedRanges(plan, rank)) {
    auto it = saved.find({r.name, r.role});
    if (it == saved.end())
      return errorf("--resume ", dir, ": '", r.name, "' (", roleText(r.role),
                    ") is not in the checkpoint");
    const plan::CheckpointTensor &t = *it->second;
    // The elements of the tensor this rank holds, in runs that stay within
    // one of the old ranks' shards.
    int64_t lo = std::max(r.flatBegin, r.offset), hi = std::min(r.flatEnd, r.offset + r.count);
    for (int64_t e = lo - r.offset; e < hi - r.offset;) {
      ElementPlace at = placeOf(t, oldShards, e, hi - r.offset);
      std::ifstream &f = files[at.rank];
      if (!f.is_open())
        f.open((fs::path(dir) / ("rank-" + std::to_string(at.rank) + ".bin")).string(),
               std::ios::binary);
      char *dst = state.data() + r.stateOffset + (r.offset + e - r.flatBegin) * 4;
      if (!f.seekg(t.state_offset() + at.pos * 4) || !f.read(dst, at.run * 4))
        return errorf("--resume ", dir, ": cannot read '", r.name, "' from rank-", at.rank, ".bin");
      e += at.run;
    }
  }
  return Status::ok();
}

} // namespace zrt
