//===- Data.h - feeding .npy sample arrays to a program ----------*- C++ -*-===//
//
// docs/training.md: each `--data NAME=FILE.npy` is an array whose first axis is
// samples; batch k consumes samples [k*B, (k+1)*B) modulo the sample count,
// B = the global batch (micro-batch x world size x accumulation steps).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAIN_DATA_H
#define ZRT_TRAIN_DATA_H

#include "exec/Executor.h"
#include "plan/PlanLoader.h"
#include "support/Files.h"
#include "train/Npy.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace zrt {

/// Where the tokens of a token file (the layout of DataFeeder::loadTokens)
/// are, and how many sequences of |seq| tokens (each with its next token)
/// they make.
struct TokenLayout {
  size_t start = 0; // bytes before the first token (llm.c's header)
  int width = 2;    // bytes per token
  int64_t seq = 0, sequences = 0;
  /// Document boundaries (--eos): a label whose input token is this id is
  /// -100, so that no document's first token is trained on as the
  /// continuation of another document (-1: none).
  int64_t eos = -1;
  /// Label masking (--prompt-mask): one byte per token of the stream; a
  /// label is -100 where its token's byte is nonzero (a prompt token, not
  /// trained on). Null: none.
  const uint8_t *prompt = nullptr;
};

/// The label of a position that does not count in the loss (PyTorch's
/// cross_entropy ignore_index, Hugging Face's masked labels).
constexpr int64_t kIgnoredLabel = -100;

/// A token file and how it is cut: zrun --tokens FILE --token-bytes 2|4
/// [--eos ID] [--prompt-mask FILE] (docs/finetune.md).
struct TokenSource {
  std::string path;
  int bytesPerToken = 2;
  int64_t eos = -1;       // -1: no document boundaries
  std::string promptMask; // empty: every label trains
  /// The flags' names in messages (--eval-data for the evaluation set).
  std::string flag = "--tokens", maskFlag = "--prompt-mask";
};

/// Validates a token file's |size| bytes at |bytes| for tokens of |width|
/// bytes cut into sequences of |seq|. |path| for messages.
Status parseTokenLayout(const char *bytes, size_t size, const std::string &path, int width,
                        int64_t seq, TokenLayout &layout, const std::string &flag = "--tokens");

/// Sequence |i| of a parsed token file: its tokens into |x| and the same
/// shifted by one (the next-token labels) into |y|, |layout.seq| each, with
/// the layout's masking (kIgnoredLabel) applied to |y|; and, if |positions|
/// is not null, each token's position in its document into it: 0 at the
/// sequence's first token and after each EOS, else one more than the
/// previous (Hugging Face's position_ids packing; zcc --per-document).
void readTokenSequence(const TokenLayout &layout, const char *bytes, int64_t i, int64_t *x,
                       int64_t *y, int64_t *positions = nullptr);

/// The name of the plan input that zcc --per-document adds.
constexpr const char *kPositionsInput = "position_ids";

/// Checks per-document positions fed with --data (|n| rows of |seq|): each
/// row starts at 0 or more and each next value is 0 (a document starts) or
/// one more; the kernels rely on it. The first offending element, named.
Status checkDocumentPositions(const int64_t *positions, int64_t n, int64_t seq);

/// The range a program input's integers must lie in: the rows of the table
/// it indexes (an embedding), for the data it is fed.
struct IndexBound {
  int64_t rows = 0;
  std::string table, location; // the table's buffer and the ONNX node
};

class DataFeeder {
public:
  /// Loads every file and checks it against |program|'s inputs: every input
  /// has data, no data is left over, dtypes match exactly, per-sample shapes
  /// match the plan, all arrays have the same number of samples. Trainer
  /// inputs (isTrainerInput) take no data.
  Status load(const std::vector<std::pair<std::string, std::string>> &files, const plan::Plan &plan,
              const plan::Program &program);

  /// Token files (the nanoGPT / llm.c layout): a flat array of uint16 or
  /// uint32 token ids, with llm.c's 1024-byte header (magic 20240520) or
  /// none. Sequence i is tokens [i*T, (i+1)*T) as `input_ids` and the same
  /// shifted by one as `labels`, T the plan's sequence length. The file is
  /// mapped, not read: each batch decodes its sequences when it is fed.
  /// With --eos and --prompt-mask, labels are masked as TokenLayout says
  /// (docs/finetune.md); the mask file has one byte per token.
  Status loadTokens(const TokenSource &source, const plan::Plan &plan,
                    const plan::Program &program);

  /// Visits the samples in a fixed pseudo-random order (a new permutation of
  /// all samples each epoch) instead of in file order.
  void shuffle(uint64_t seed) { shuffleSeed_ = seed, shuffled_ = true; }

  /// Copies global batch |k| into the program's input buffers. Fails, naming
  /// the sample and position, on an id outside the table it indexes (a
  /// negative id, or one past the vocabulary).
  Status feed(int64_t k, const ExecutorBase &executor, const plan::Program &program) const;

  int64_t samples() const { return samples_; }

  /// Global batches of |batch| samples that visit every sample once (at
  /// least 1): an evaluation set's size.
  int64_t batchesIn(int64_t batch) const { return std::max<int64_t>(1, samples_ / batch); }

  /// The samples (rows of the --data arrays) that global batch |k| of
  /// |batch| samples reads, for messages: "samples 8-11", or a list.
  std::string samplesOf(int64_t k, int64_t batch) const;

private:
  /// The sample that position |i| of the stream reads.
  int64_t sampleAt(int64_t i) const;

  /// The IndexBound of each input that indexes a table in |program|.
  void findIndexBounds(const plan::Plan &plan, const plan::Program &program);

  /// Whether the plan attends per document (zcc --per-document): an
  /// attention kernel reads the position_ids input.
  static bool perDocument(const plan::Program &program);

  std::map<std::string, NpyArray> arrays_;
  MappedFile tokenFile_, promptFile_;
  TokenLayout tokens_;
  std::map<std::string, IndexBound> bounds_;
  int64_t samples_ = 0;
  bool shuffled_ = false;
  uint64_t shuffleSeed_ = 0;
  mutable int64_t permutationEpoch_ = -1;
  mutable std::vector<int64_t> permutation_;
  mutable std::mutex permutationMutex_;
};

} // namespace zrt

#endif // ZRT_TRAIN_DATA_H
