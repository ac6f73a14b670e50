//===- Checkpoint.h - sharded checkpoints, resume and export -----*- C++ -*-===//
//
// Layout of a checkpoint directory DIR:
//   DIR/step-K/rank-R.bin      rank R's whole state arena after K steps
//                              (its parameter, gradient and optimizer shards)
//   DIR/step-K/manifest.pb     plan::Checkpoint: plan hash, trainer state,
//                              where every tensor is (for export)
//   DIR/step-K/manifest.json   the same, for people
//   DIR/latest                 "step-K": the newest complete checkpoint
// A save writes DIR/step-K.tmp/ and renames it, then replaces `latest`
// through a rename: a crash at any point leaves the previous checkpoint and
// `latest` intact. The same plan resumes from the ranks' bytes as saved;
// another plan of the same model resumes through the manifest's logical
// layout (checkReshard, readReshardedState).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAIN_CHECKPOINT_H
#define ZRT_TRAIN_CHECKPOINT_H

#include "plan/plan.pb.h"
#include "support/Status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace zrt {

/// FNV-1a 64 of a file's bytes.
Status hashFile(const std::string &path, uint64_t &hash);

/// The manifest of |plan|'s checkpoints without the trainer state: where each
/// trainable tensor (and frozen float buffer) lives in a rank's state arena.
plan::Checkpoint describeCheckpoint(const plan::Plan &plan, uint64_t planHash);

/// The logical checkpoint (version 3): the manifest records, by parameter
/// name, where each parameter's value and each of its optimizer states
/// (role adam_m, adam_v) lie in the ranks' files, whole or sharded, and the
/// step count; so another plan of the same model (another world size,
/// stage, offload or recompute choice) can resume it. checkReshard says
/// whether |plan| can (every value and state present with its shape, none
/// left over, the same samples per step); readReshardedState fills rank
/// |rank|'s |state| (ExecutorBase::saveState's layout, holding the plan's
/// initial state) with the elements it owns, reading only those.
Status checkReshard(const plan::Plan &plan, const plan::Checkpoint &manifest,
                    const std::string &dir);
Status readReshardedState(const plan::Plan &plan, const plan::Checkpoint &manifest,
                          const std::string &dir, int rank, std::vector<char> &state);

/// DIR/step-K.tmp, where every rank writes its part of step K's checkpoint.
std::string checkpointTmpDir(const std::string &root, int64_t step);
/// Rank 0: creates DIR/step-K.tmp (replacing a stale one) and returns it.
Status beginCheckpoint(const std::string &root, int64_t step, std::string &tmpDir);
/// Reads or writes |bytes| at byte |offset| of a rank's NVMe arena (its
/// swap file): how checkpoints move it without holding it in memory.
using NvmeIo = std::function<Status(int64_t offset, char *data, int64_t bytes)>;
/// Every rank, before the next step: writes its NVMe arena (|tailBytes|,
/// read through |read| a piece at a time) into |tmpDir|/rank-R.bin after
/// |headBytes| bytes left for writeRankState.
Status writeRankTail(const std::string &tmpDir, int rank, int64_t headBytes, int64_t tailBytes,
                     const NvmeIo &read);
/// Every rank: writes its state (the state arena and the host arena's state;
/// with |tailBytes| > 0 the file's head, writeRankTail having written the
/// rest) into |tmpDir|/rank-R.bin (flushed to disk), and its checksum.
Status writeRankState(const std::string &tmpDir, int rank, const std::vector<char> &state,
                      int64_t tailBytes = 0);
/// Rank 0, after every rank wrote: the manifest, then the renames.
/// |beforeRename| (tests: zrun's hidden --test-crash-in-save) runs between
/// the two, when the new checkpoint is complete but not yet in place.
Status finishCheckpoint(const std::string &root, const std::string &tmpDir, int64_t step,
                        const plan::Checkpoint &manifest,
                        const std::function<void()> &beforeRename = {});

/// Keeps the newest |keep| step directories of |root| and removes the older
/// ones, never the one `latest` names.
void pruneCheckpoints(const std::string &root, int64_t keep);

/// |path| is a step directory (it, checked) or a checkpoint root: the step
/// `latest` names, checked; when that one is damaged or missing, the newest
/// complete one before it, and |note| says so. "Checked": the manifest's
/// fields and checksum, and every shard's size and checksum. |flag| names
/// the option in messages.
Status openCheckpoint(const std::string &flag, const std::string &path, std::string &dir,
                      plan::Checkpoint &manifest, std::string &note);
/// The manifest of step directory |dir|: parsed, its checksum verified, and
/// every field validated (ranges, overflow-checked sizes, every tensor
/// within the state arena).
Status readManifest(const std::string &dir, plan::Checkpoint &manifest);
/// The same for a manifest's bytes (|path| for messages).
Status parseManifest(const std::string &bytes, const std::string &path, plan::Checkpoint &manifest);
/// Reads rank R's state arena (exactly |bytes|); with |tailBytes| > 0 the
/// file holds that many more, the NVMe arena, handed to |write| a piece at
/// a time instead of read into |state|.
Status readRankState(const std::string &dir, int rank, int64_t bytes, std::vector<char> &state,
                     int64_t tailBytes = 0, const NvmeIo &write = nullptr);

/// Every tensor of the checkpoint, consolidated from the ranks' shards, as
/// float32 in the manifest's order (trainable ones only if |trainableOnly|).
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
  bool trainable = false;
};
Status consolidate(const std::string &dir, const plan::Checkpoint &manifest,
                   std::vector<NamedTensor> &out);
/// The same from the ranks' shards in memory (|dir| for messages).
Status consolidateShards(const std::string &dir, const plan::Checkpoint &manifest,
                         const std::vector<std::string> &ranks, std::vector<NamedTensor> &out);

/// zrun export: a .safetensors file of the consolidated tensors (float32,
/// or with |bf16| the float32 ones rounded to bfloat16).
Status writeSafetensors(const std::string &path, const std::vector<NamedTensor> &tensors,
                        const plan::Checkpoint &manifest, bool bf16 = false);
/// zrun export --hf: a Hugging Face checkpoint folder (docs/finetune.md).
struct HfExportOptions {
  bool bf16 = false;                    // --dtype bf16 (default float32)
  int64_t maxShardBytes = 5000000000LL; // --max-shard-size (save_pretrained's 5GB)
};
struct HfExportSummary {
  int tensors = 0, shards = 0;
  int64_t bytes = 0;
  bool config = false; // config.json written (the record had one)
};
/// Writes |dir| (created; refused if it already holds a checkpoint):
/// model.safetensors, or shards model-0000K-of-0000N.safetensors with
/// model.safetensors.index.json past maxShardBytes, holding the module's
/// parameters under the names the manifest's export record gives (tied
/// ones once; buffers that are no parameter left out), and the record's
/// config.json with the stored dtype.
Status writeHfCheckpoint(const std::string &dir, const std::vector<NamedTensor> &tensors,
                         const plan::Checkpoint &manifest, const HfExportOptions &options,
                         HfExportSummary &summary);
/// zrun export: |onnxIn| with every trained initializer replaced.
Status writeTrainedOnnx(const std::string &onnxIn, const std::string &onnxOut,
                        const std::vector<NamedTensor> &tensors, int &replaced);

} // namespace zrt

#endif // ZRT_TRAIN_CHECKPOINT_H
