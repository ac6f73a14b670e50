//===- Data.cpp - feeding .npy sample arrays to a program -----------------===//
#include "train/Data.h"

#include "plan/PlanLoader.h"

#include <cstring>
#include <set>

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
    auto it = arrays_.find(in.name());
    if (it == arrays_.end())
      return errorf("the plan needs input '", in.name(), "': pass --data ", in.name(),
                    "=FILE.npy");
    const NpyArray &a = it->second;
    const plan::Buffer &b = plan.buffers(in.buffer());
    DType want;
    toDType(b.dtype(), want);
    std::vector<int64_t> shape(b.shape().begin(), b.shape().end());
    if (a.dtype != want)
      return errorf("--data ", in.name(), ": the array is ", dtypeName(a.dtype),
                    ", the plan's input is ", dtypeName(want),
                    " (convert with arr.astype(np.", dtypeName(want), "))");
    if (shape.empty() || a.shape.size() != shape.size() ||
        !std::equal(shape.begin() + 1, shape.end(), a.shape.begin() + 1))
      return errorf("--data ", in.name(), ": samples of shape ", shapeStr(a.shape, 1),
                    " do not match the plan's input ", shapeStr(shape), " (micro-batch ",
                    shape.empty() ? 0 : shape[0], " of ", shapeStr(shape, 1),
                    "); was the plan compiled for another model or --input-shape?");
    if (a.shape[0] < 1)
      return errorf("--data ", in.name(), ": the array has no samples");
    if (samples_ && a.shape[0] != samples_)
      return errorf("--data ", in.name(), ": ", a.shape[0], " samples, but other inputs have ",
                    samples_);
    samples_ = a.shape[0];
  }
  return Status::ok();
}

void DataFeeder::feed(int64_t k, const Executor &executor, const plan::Program &program) const {
  for (const plan::NamedBuffer &in : program.inputs()) {
    const NpyArray &a = arrays_.at(in.name());
    TensorRef dst = executor.buffer(in.buffer());
    int64_t batch = dst.shape[0];
    size_t sampleBytes = (size_t)(dst.numel() / std::max<int64_t>(batch, 1)) * dtypeSize(dst.dtype);
    for (int64_t j = 0; j < batch; ++j) {
      int64_t sample = (k * batch + j) % samples_;
      std::memcpy(dst.data + j * sampleBytes, a.data.data() + sample * sampleBytes, sampleBytes);
    }
  }
}
