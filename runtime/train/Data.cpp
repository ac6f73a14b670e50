//===- Data.cpp - feeding .npy sample arrays to a program -----------------===//
#include "train/Data.h"

#include "support/Files.h"

#include "plan/PlanLoader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

using namespace zrt;

static std::string shapeStr(const std::vector<int64_t> &s, size_t from = 0) {
  std::string out = "[";
  for (size_t k = from; k < s.size(); ++k)
    out += (k > from ? "x" : "") + std::to_string(s[k]);
  return out + "]";
}

Status DataFeeder::load(const std::vector<std::pair<std::string, std::string>> &files,
                        const plan::Plan &plan, const plan::Program &program) {
  std::set<std::string> wanted;
  for (const plan::NamedBuffer &in : program.inputs())
    if (!isTrainerInput(in.name()))
      wanted.insert(in.name());
  for (const auto &[name, path] : files) {
    if (!wanted.count(name)) {
      std::string names;
      for (const std::string &w : wanted)
        names += (names.empty() ? "" : ", ") + w;
      return errorf("--data ", name, "=", path, ": the plan has no input named '", name,
                    "' (its inputs: ", names, ")");
    }
    if (arrays_.count(name))
      return errorf("--data ", name, " is given twice");
    std::string error;
    if (!readNpy(path, arrays_[name], error))
      return errorf("--data ", name, ": ", error);
  }
  for (const plan::NamedBuffer &in : program.inputs()) {
    if (isTrainerInput(in.name()))
      continue;
    auto it = arrays_.find(in.name());
    if (it == arrays_.end())
      return errorf("the plan needs input '", in.name(), "': pass --data ", in.name(), "=FILE.npy");
    const NpyArray &a = it->second;
    const plan::Buffer &b = plan.buffers(in.buffer());
    DType want;
    toDType(b.dtype(), want);
    std::vector<int64_t> shape(b.shape().begin(), b.shape().end());
    if (a.dtype != want)
      return errorf("--data ", in.name(), ": the array is ", dtypeName(a.dtype),
                    ", the plan's input is ", dtypeName(want), " (convert with arr.astype(np.",
                    dtypeName(want), "))");
    if (shape.empty() || a.shape.size() != shape.size() ||
        !std::equal(shape.begin() + 1, shape.end(), a.shape.begin() + 1))
      return errorf("--data ", in.name(), ": samples of shape ", shapeStr(a.shape, 1),
                    " (the array is ", shapeStr(a.shape), ") do not match the plan's samples ",
                    shapeStr(shape, 1), " (its input ", shapeStr(shape), " is micro-batch ",
                    shape.empty() ? 0 : shape[0],
                    " of them); was the plan compiled for another model or --input-shape?");
    if (a.shape[0] < 1)
      return errorf("--data ", in.name(), ": the array has no samples");
    if (samples_ && a.shape[0] != samples_)
      return errorf("--data ", in.name(), ": ", a.shape[0], " samples, but other inputs have ",
                    samples_);
    samples_ = a.shape[0];
    if (in.name() == kPositionsInput && a.dtype == DType::I64 && perDocument(program))
      if (Status st = checkDocumentPositions(reinterpret_cast<const int64_t *>(a.data.data()),
                                             a.shape[0], a.shape.back());
          !st)
        return errorf("--data ", in.name(), ": ", st.message());
  }
  findIndexBounds(plan, program);
  return Status::ok();
}

bool DataFeeder::perDocument(const plan::Program &program) {
  // attention: ints [nan_to_zero, packed, mask, window, documents];
  // attention_grad: [packed, mask, window, documents].
  for (const plan::Instruction &inst : program.instructions()) {
    if (!inst.has_kernel())
      continue;
    const plan::Kernel &k = inst.kernel();
    int at = k.name() == "attention" ? 4 : k.name() == "attention_grad" ? 3 : -1;
    if (at >= 0 && k.ints_size() > at && k.ints(at) != 0)
      return true;
  }
  return false;
}

Status zrt::checkDocumentPositions(const int64_t *positions, int64_t n, int64_t seq) {
  for (int64_t r = 0; r < n; ++r) {
    const int64_t *p = positions + r * seq;
    for (int64_t t = 0; t < seq; ++t) {
      bool ok = t == 0 ? p[0] >= 0 : p[t] == 0 || p[t] == p[t - 1] + 1;
      if (!ok)
        return errorf("sample ", r, ", position ", t, ": ", p[t],
                      t == 0 ? "" : " after " + std::to_string(p[t - 1]),
                      "; each token's position in its document counts up by one and is 0 where a "
                      "document starts (Hugging Face's DataCollatorWithFlattening position_ids)");
    }
  }
  return Status::ok();
}

Status zrt::parseTokenLayout(const char *bytes, size_t size, const std::string &path, int width,
                             int64_t seq, TokenLayout &layout, const std::string &flag) {
  if (width != 2 && width != 4)
    return errorf(flag, " ", path, ": tokens are 2 or 4 bytes, not ", width);
  if (seq < 1)
    return errorf(flag, " ", path, ": the plan's sequence length is ", seq);
  size_t start = 0;
  if (size >= 1024) {
    int32_t header[3];
    std::memcpy(header, bytes, sizeof header);
    if (header[0] == 20240520) { // llm.c: magic, version, token count
      if (header[1] != 1 && header[1] != 2)
        return errorf(flag, " ", path, ": unknown llm.c token file version ", header[1]);
      start = 1024;
      if ((int64_t)(size - start) != (int64_t)header[2] * width)
        return errorf(flag, " ", path, ": the header announces ", header[2],
                      " tokens, the file holds ", (size - start) / width);
    }
  }
  if ((size - start) % width)
    return errorf(flag, " ", path, ": the size is not a multiple of ", width,
                  " bytes (wrong --token-bytes, or a truncated file?)");
  int64_t n = (size - start) / width;
  int64_t sequences = (n - 1) / seq;
  if (sequences < 1)
    return errorf(flag, " ", path, ": ", n, " tokens are fewer than one sequence of ", seq,
                  " plus its next token");
  layout = {start, width, seq, sequences};
  return Status::ok();
}

void zrt::readTokenSequence(const TokenLayout &layout, const char *bytes, int64_t i, int64_t *x,
                            int64_t *y, int64_t *positions) {
  const char *p = bytes + layout.start + (size_t)(i * layout.seq) * layout.width;
  auto token = [&](int64_t t) -> int64_t {
    if (layout.width == 2) {
      uint16_t v;
      std::memcpy(&v, p + t * 2, 2);
      return v;
    }
    uint32_t v;
    std::memcpy(&v, p + t * 4, 4);
    return v;
  };
  const uint8_t *prompt = layout.prompt ? layout.prompt + i * layout.seq : nullptr;
  for (int64_t t = 0; t < layout.seq; ++t) {
    x[t] = token(t);
    y[t] = token(t + 1);
    if ((layout.eos >= 0 && x[t] == layout.eos) || (prompt && prompt[t + 1]))
      y[t] = kIgnoredLabel;
    if (positions)
      positions[t] =
          t == 0 || (layout.eos >= 0 && x[t - 1] == layout.eos) ? 0 : positions[t - 1] + 1;
  }
}

Status DataFeeder::loadTokens(const TokenSource &source, const plan::Plan &plan,
                              const plan::Program &program) {
  const std::string &flag = source.flag;
  const plan::Buffer *ids = nullptr, *labels = nullptr, *positions = nullptr;
  for (const plan::NamedBuffer &in : program.inputs()) {
    if (isTrainerInput(in.name()))
      continue;
    if (in.name() == "input_ids")
      ids = &plan.buffers(in.buffer());
    else if (in.name() == "labels")
      labels = &plan.buffers(in.buffer());
    else if (in.name() == kPositionsInput && perDocument(program))
      positions = &plan.buffers(in.buffer());
    else
      return errorf(flag, ": the plan has an input '", in.name(),
                    "' besides input_ids and labels; pass it with --data");
  }
  if (!ids || !labels)
    return errorf(flag, " feeds a plan with inputs 'input_ids' and 'labels' (compile with "
                        "--loss cross-entropy)");
  // Both are filled a sequence per row: the same int64 [batch, sequence].
  if (ids->shape_size() != 2 || ids->dtype() != plan::I64 || labels->dtype() != plan::I64 ||
      !std::equal(ids->shape().begin(), ids->shape().end(), labels->shape().begin(),
                  labels->shape().end()))
    return errorf(flag, ": the plan's input_ids and labels must both be int64 [batch, "
                        "sequence]");
  if (positions && (positions->dtype() != plan::I64 ||
                    !std::equal(ids->shape().begin(), ids->shape().end(),
                                positions->shape().begin(), positions->shape().end())))
    return errorf(flag, ": the plan's position_ids must be int64 [batch, sequence] as input_ids");
  tokens_.seq = ids->shape(1);
  if (Status s = tokenFile_.open(source.path); !s)
    return errorf(flag, " ", s.message());
  ZRT_RETURN_IF_ERROR(parseTokenLayout(tokenFile_.data(), tokenFile_.size(), source.path,
                                       source.bytesPerToken, tokens_.seq, tokens_, flag));
  tokens_.eos = source.eos;
  if (positions && source.eos < 0)
    std::fprintf(stderr,
                 "zrun: %s: the plan attends per document (zcc --per-document) but --eos "
                 "is not given: each sequence is one document\n",
                 flag.c_str());
  if (!source.promptMask.empty()) {
    if (Status s = promptFile_.open(source.promptMask); !s)
      return errorf(source.maskFlag, " ", s.message());
    int64_t tokens = (int64_t)(tokenFile_.size() - tokens_.start) / tokens_.width;
    if ((int64_t)promptFile_.size() != tokens)
      return errorf(source.maskFlag, " ", source.promptMask, ": ", promptFile_.size(),
                    " bytes, but ", source.path, " holds ", tokens,
                    " tokens; the mask has one byte per token (nonzero: a prompt token, not "
                    "trained on)");
    tokens_.prompt = reinterpret_cast<const uint8_t *>(promptFile_.data());
  }
  samples_ = tokens_.sequences;
  findIndexBounds(plan, program);
  return Status::ok();
}

void DataFeeder::findIndexBounds(const plan::Plan &plan, const plan::Program &program) {
  // An input reaches a gather as itself or as a view of its bytes (a
  // reshape): the same arena and offset.
  auto sameBytes = [&](int a, int b) {
    const plan::Buffer &x = plan.buffers(a), &y = plan.buffers(b);
    return a == b || (x.arena() == y.arena() && x.offset() == y.offset() && (x.view() || y.view()));
  };
  for (const plan::NamedBuffer &in : program.inputs())
    for (const plan::Instruction &inst : program.instructions()) {
      if (!inst.has_kernel() || inst.kernel().name() != "gather")
        continue;
      const plan::Kernel &k = inst.kernel();
      if (k.inputs_size() != 2 || k.ints_size() != 1 || !sameBytes(k.inputs(1), in.buffer()))
        continue;
      const plan::Buffer &table = plan.buffers(k.inputs(0));
      if (k.ints(0) < 0 || k.ints(0) >= table.shape_size())
        continue;
      int64_t rows = table.shape(k.ints(0));
      auto [it, fresh] =
          bounds_.try_emplace(in.name(), IndexBound{rows, table.name(), k.location()});
      if (!fresh && rows < it->second.rows)
        it->second = {rows, table.name(), k.location()};
    }
}

int64_t DataFeeder::sampleAt(int64_t i) const {
  if (!shuffled_)
    return i % samples_;
  int64_t epoch = i / samples_;
  std::lock_guard<std::mutex> lock(permutationMutex_); // ranks feed from threads
  if (epoch != permutationEpoch_) {
    permutation_.resize(samples_);
    std::iota(permutation_.begin(), permutation_.end(), 0);
    // Fisher-Yates with a generator seeded per epoch: reproducible across runs
    // and platforms (std::shuffle's algorithm is implementation-defined).
    std::mt19937_64 rng(shuffleSeed_ * 1000003 + (uint64_t)epoch);
    for (int64_t j = samples_ - 1; j > 0; --j)
      std::swap(permutation_[j], permutation_[rng() % (uint64_t)(j + 1)]);
    permutationEpoch_ = epoch;
  }
  return permutation_[i % samples_];
}

std::string DataFeeder::samplesOf(int64_t k, int64_t batch) const {
  if (samples_ < 1 || batch < 1)
    return "no samples";
  std::vector<int64_t> rows;
  for (int64_t j = 0; j < batch; ++j)
    rows.push_back(sampleAt(k * batch + j));
  bool consecutive = true;
  for (size_t j = 1; j < rows.size(); ++j)
    consecutive &= rows[j] == rows[j - 1] + 1;
  if (consecutive)
    return rows.size() == 1
               ? "sample " + std::to_string(rows[0])
               : "samples " + std::to_string(rows.front()) + "-" + std::to_string(rows.back());
  std::string out = "samples ";
  for (size_t j = 0; j < rows.size() && j < 8; ++j)
    out += (j ? ", " : "") + std::to_string(rows[j]);
  return out + (rows.size() > 8 ? ", ..." : "");
}

Status DataFeeder::feed(int64_t k, const ExecutorBase &executor,
                        const plan::Program &program) const {
  // A token file truncated under the run: an error now, not SIGBUS in
  // readTokenSequence.
  ZRT_RETURN_IF_ERROR(tokenFile_.checkNotTruncated());
  ZRT_RETURN_IF_ERROR(promptFile_.checkNotTruncated());
  for (const plan::NamedBuffer &in : program.inputs()) {
    if (isTrainerInput(in.name()))
      continue;
    TensorRef dst = executor.buffer(in.buffer());
    int64_t batch = dst.shape[0];
    int64_t perSample = dst.numel() / std::max<int64_t>(batch, 1);
    size_t sampleBytes = (size_t)perSample * dtypeSize(dst.dtype);
    auto it = arrays_.find(in.name());
    // A token file fills input_ids, labels and position_ids together; the
    // rows not wanted here go to |spare|.
    std::vector<int64_t> spare(it == arrays_.end() ? 2 * tokens_.seq : 0);
    for (int64_t j = 0; j < batch; ++j) {
      int64_t sample = sampleAt(k * batch + j);
      char *row = dst.data + j * sampleBytes;
      if (it != arrays_.end()) {
        std::memcpy(row, it->second.data.data() + sample * sampleBytes, sampleBytes);
      } else { // a token file: input_ids, labels or position_ids
        auto *out = reinterpret_cast<int64_t *>(row);
        int64_t *x = spare.data(), *y = spare.data() + tokens_.seq, *positions = nullptr;
        if (in.name() == "input_ids")
          x = out;
        else if (in.name() == "labels")
          y = out;
        else
          positions = out;
        readTokenSequence(tokens_, tokenFile_.data(), sample, x, y, positions);
      }
    }
    auto bound = bounds_.find(in.name());
    if (bound == bounds_.end() || (dst.dtype != DType::I64 && dst.dtype != DType::I32))
      continue;
    const IndexBound &b = bound->second;
    for (int64_t i = 0; i < dst.numel(); ++i) {
      int64_t v = dst.dtype == DType::I64 ? dst.as<int64_t>()[i] : dst.as<int32_t>()[i];
      if (v >= 0 && v < b.rows)
        continue;
      return errorf(in.name(), " of sample ", sampleAt(k * batch + i / perSample), ", position ",
                    i % perSample, ": id ", v, " is outside [0, ", b.rows, "), the rows of '",
                    b.table, "' (indexed by ", b.location.empty() ? "a gather" : b.location, "); ",
                    v < 0 ? "ids are never negative (PyTorch's nn.Embedding refuses them)"
                          : "is the data tokenized for this model's vocabulary?");
    }
  }
  return Status::ok();
}
