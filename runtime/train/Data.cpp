//===- Data.cpp - feeding .npy sample arrays to a program -----------------===//
#include "train/Data.h"

#include "support/Files.h"

#include "plan/PlanLoader.h"

#include <algorithm>
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
  }
  return Status::ok();
}

Status zrt::tokenSequences(const std::string &bytes, const std::string &path, int bytesPerToken,
                           int64_t seq, NpyArray &x, NpyArray &y) {
  if (bytesPerToken != 2 && bytesPerToken != 4)
    return errorf("--tokens ", path, ": tokens are 2 or 4 bytes, not ", bytesPerToken);
  if (seq < 1)
    return errorf("--tokens ", path, ": the plan's sequence length is ", seq);
  size_t start = 0;
  if (bytes.size() >= 1024) {
    int32_t header[3];
    std::memcpy(header, bytes.data(), sizeof header);
    if (header[0] == 20240520) { // llm.c: magic, version, token count
      if (header[1] != 1 && header[1] != 2)
        return errorf("--tokens ", path, ": unknown llm.c token file version ", header[1]);
      start = 1024;
      if ((int64_t)(bytes.size() - start) != (int64_t)header[2] * bytesPerToken)
        return errorf("--tokens ", path, ": the header announces ", header[2],
                      " tokens, the file holds ", (bytes.size() - start) / bytesPerToken);
    }
  }
  if ((bytes.size() - start) % bytesPerToken)
    return errorf("--tokens ", path, ": the size is not a multiple of ", bytesPerToken,
                  " bytes (wrong --token-bytes, or a truncated file?)");
  int64_t n = (bytes.size() - start) / bytesPerToken;
  int64_t sequences = (n - 1) / seq;
  if (sequences < 1)
    return errorf("--tokens ", path, ": ", n, " tokens are fewer than one sequence of ", seq,
                  " plus its next token");
  x.dtype = y.dtype = DType::I64;
  x.shape = y.shape = {sequences, seq};
  x.data.resize(sequences * seq * 8);
  y.data.resize(sequences * seq * 8);
  auto token = [&](int64_t i) -> int64_t {
    const char *p = bytes.data() + start + i * bytesPerToken;
    if (bytesPerToken == 2) {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  };
  for (int64_t i = 0; i < sequences * seq; ++i) {
    int64_t a = token(i), c = token(i + 1);
    std::memcpy(x.data.data() + i * 8, &a, 8);
    std::memcpy(y.data.data() + i * 8, &c, 8);
  }
  return Status::ok();
}

Status DataFeeder::loadTokens(const std::string &path, int bytesPerToken, const plan::Plan &plan,
                              const plan::Program &program) {
  int ids = -1, labels = -1;
  for (const plan::NamedBuffer &in : program.inputs()) {
    if (isTrainerInput(in.name()))
      continue;
    if (in.name() == "input_ids")
      ids = in.buffer();
    else if (in.name() == "labels")
      labels = in.buffer();
    else
      return errorf("--tokens: the plan has an input '", in.name(),
                    "' besides input_ids and labels; pass it with --data");
  }
  if (ids < 0 || labels < 0)
    return errorf("--tokens feeds a plan with inputs 'input_ids' and 'labels' (compile with "
                  "--loss cross-entropy)");
  const plan::Buffer &b = plan.buffers(ids);
  if (b.shape_size() != 2 || b.dtype() != plan::I64)
    return errorf("--tokens: the plan's input_ids must be int64 [batch, sequence]");
  int64_t seq = b.shape(1);
  std::string bytes;
  if (Status s = readRegularFile(path, bytes); !s)
    return errorf("--tokens ", s.message());
  NpyArray x, y;
  ZRT_RETURN_IF_ERROR(tokenSequences(bytes, path, bytesPerToken, seq, x, y));
  const int64_t sequences = x.shape[0];
  arrays_["input_ids"] = std::move(x);
  arrays_["labels"] = std::move(y);
  samples_ = sequences;
  return Status::ok();
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

void DataFeeder::feed(int64_t k, const ExecutorBase &executor, const plan::Program &program) const {
  for (const plan::NamedBuffer &in : program.inputs()) {
    if (isTrainerInput(in.name()))
      continue;
    const NpyArray &a = arrays_.at(in.name());
    TensorRef dst = executor.buffer(in.buffer());
    int64_t batch = dst.shape[0];
    size_t sampleBytes = (size_t)(dst.numel() / std::max<int64_t>(batch, 1)) * dtypeSize(dst.dtype);
    for (int64_t j = 0; j < batch; ++j) {
      int64_t sample = sampleAt(k * batch + j);
      std::memcpy(dst.data + j * sampleBytes, a.data.data() + sample * sampleBytes, sampleBytes);
    }
  }
}
