//===- Weights.cpp - parameter values from an ONNX model at start ---------===//
#include "train/Weights.h"

#include "support/Files.h"

#include "onnx.pb.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
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

int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// A state buffer whose contents are a weight: loaded by its own name.
bool isNamedWeight(const plan::Buffer &b) {
  return b.arena() == plan::STATE && !b.view() && b.dtype() == plan::F32 && b.shard_of() == 0 &&
         (b.external() || b.trainable() || b.role() == "buffer");
}

/// A stage-3 parameter shard (in the state arena, or offloaded to the host
/// arena): loaded through the ParamLayouts naming it.
bool isShardedBucket(const plan::Buffer &b) {
  return (b.arena() == plan::STATE || b.arena() == plan::HOST) && !b.view() &&
         b.dtype() == plan::F32 && b.shard_of() != 0 && (b.external() || b.role() == "param");
}

/// Where |b| starts in a rank's state bytes (ExecutorBase::saveState: the
/// state arena, then the host arena's offloaded state).
int64_t stateOffset(const plan::Plan &plan, const plan::Buffer &b) {
  return b.offset() + (b.arena() == plan::HOST ? plan.state_arena_bytes() : 0);
}

template <typename Fn> void forEachNamedWeight(const plan::Plan &plan, Fn fn) {
  for (int i = 0; i < plan.buffers_size(); ++i)
    if (isNamedWeight(plan.buffers(i)))
      fn(i, plan.buffers(i));
}

std::vector<int64_t> shapeOf(const google::protobuf::RepeatedField<int64_t> &s) {
  return std::vector<int64_t>(s.begin(), s.end());
}

} // namespace

Status WeightFile::open(const std::string &path, WeightFile &out) {
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
      for (const onnx::StringStringEntryProto &kv : t.external_data()) {
        char *end = nullptr;
        if (kv.key() == "location")
          e.file = (dir / kv.value()).string();
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
    return errorf("--weights ", path_, ": the model has no initializer '", name,
                  "', which the plan loads; pass the model the plan was compiled from");
  const Entry &e = it->second;
  if (e.dataType != onnx::TensorProto::FLOAT || e.shape != shape)
    return errorf("--weights ", path_, ": initializer '", name, "' is ",
                  e.dataType == onnx::TensorProto::FLOAT ? "float32 " : "not float32 ",
                  shapeText(e.shape), ", the plan's parameter is float32 ", shapeText(shape),
                  "; pass the model the plan was compiled from");
  int64_t bytes = numel(shape) * (int64_t)sizeof(float);
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
    if (e.offset + bytes > size)
      return errorf("--weights ", path_, ": initializer '", name, "' needs bytes [", e.offset, ", ",
                    e.offset + bytes, ") of ", e.file, ", which has ", size, " (truncated?)");
  }
  return Status::ok();
}

Status WeightFile::read(const std::string &name, const std::vector<int64_t> &shape,
                        std::vector<float> &out) const {
  ZRT_RETURN_IF_ERROR(check(name, shape));
  const Entry &e = tensors_.find(name)->second;
  int64_t n = numel(shape), bytes = n * (int64_t)sizeof(float);
  out.resize(n);
  if (e.file.empty()) {
    std::memcpy(out.data(), e.inline_.data(), bytes);
    return Status::ok();
  }
  std::ifstream in(e.file, std::ios::binary);
  if (!in.seekg(e.offset) || !in.read(reinterpret_cast<char *>(out.data()), bytes))
    return errorf("--weights ", e.file, ": cannot read initializer '", name, "'");
  return Status::ok();
}

bool planNeedsWeights(const plan::Plan &plan) {
  for (const plan::Buffer &b : plan.buffers())
    if (b.external())
      return true;
  return false;
}

Status checkWeights(const plan::Plan &plan, const WeightFile &weights) {
  // Names, types and shapes only; the data is read per rank.
  auto check = [&](const std::string &name, const std::vector<int64_t> &shape) {
    return weights.check(name, shape);
  };
  Status status;
  forEachNamedWeight(plan, [&](int, const plan::Buffer &b) {
    if (status)
      status = check(b.name(), shapeOf(b.shape()));
  });
  for (const plan::ParamLayout &l : plan.params())
    if (status && isShardedBucket(plan.buffers(l.bucket())))
      status = check(l.name(), shapeOf(l.shape()));
  return status;
}

Status loadWeights(const plan::Plan &plan, const WeightFile &weights, int rank,
                   ExecutorBase &executor, int &loaded) {
  std::vector<char> state;
  ZRT_RETURN_IF_ERROR(executor.saveState(state));
  loaded = 0;
  std::vector<float> values;
  Status status;
  forEachNamedWeight(plan, [&](int, const plan::Buffer &b) {
    if (!status)
      return;
    status = weights.read(b.name(), shapeOf(b.shape()), values);
    if (status) {
      std::memcpy(state.data() + b.offset(), values.data(), values.size() * sizeof(float));
      ++loaded;
    }
  });
  ZRT_RETURN_IF_ERROR(status);
  const int64_t world = plan.world_size();
  for (const plan::ParamLayout &l : plan.params()) {
    const plan::Buffer &bucket = plan.buffers(l.bucket());
    if (!isShardedBucket(bucket))
      continue;
    ZRT_RETURN_IF_ERROR(weights.read(l.name(), shapeOf(l.shape()), values));
    // This rank holds elements [lo, hi) of the whole flat bucket.
    int64_t shard = bucket.shard_of() / world, lo = rank * shard, hi = lo + shard;
    int64_t begin = std::max(lo, l.offset()),
            end = std::min(hi, l.offset() + (int64_t)values.size());
    if (begin < end)
      std::memcpy(state.data() + stateOffset(plan, bucket) + (begin - lo) * sizeof(float),
                  values.data() + (begin - l.offset()), (end - begin) * sizeof(float));
    ++loaded;
  }
  return executor.loadState(state);
}

} // namespace zrt
