//===- DeepSpeedConfig.cpp - reading DeepSpeed JSON configs ---------------===//
//
// A table-driven walk over the JSON object: each section lists the keys it
// knows and how to read them; anything else is a warning. Numbers accept
// JSON numbers (5e8 included); integers must be integral; "auto" is accepted
// where HuggingFace's integration accepts it.
//
//===----------------------------------------------------------------------===//
#include "zcc/Config/DeepSpeedConfig.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <set>

#include <cmath>
#include <functional>

using namespace llvm;

namespace zcc {
namespace {

/// Reads one JSON object of the config against a table of known keys.
class Reader {
public:
  Reader(DeepSpeedConfig &config) : config(config) {}

  /// "FILE: key 'a.b': MESSAGE"
  Error error(StringRef key, const Twine &message) {
    return createStringError(inconvertibleErrorCode(),
                             config.path + ": key '" + key + "': " + message);
  }
  void warn(StringRef key, const Twine &message) {
    config.warnings.push_back((config.path + ": key '" + key + "': " + message).str());
  }

  /// |v| as JSON text, cut to 120 characters (a value may be megabytes).
  static std::string show(const json::Value &v) {
    std::string s;
    raw_string_ostream os(s);
    os << v;
    os.flush();
    return s.size() > 120 ? s.substr(0, 100) + "... (" + std::to_string(s.size()) + " chars)" : s;
  }
  bool isAuto(const json::Value &v) {
    auto s = v.getAsString();
    return s && *s == "auto";
  }

  Error number(StringRef key, const json::Value &v, std::optional<double> &out, double min,
               bool allowAuto = true, bool strictMin = false) {
    if (allowAuto && isAuto(v)) {
      config.autoKeys.insert(key);
      return Error::success();
    }
    std::optional<double> d = v.getAsNumber();
    if (!d || !std::isfinite(*d))
      return error(key, "expected a number" + Twine(allowAuto ? " or \"auto\"" : "") + ", got " +
                            show(v));
    if (strictMin ? !(*d > min) : !(*d >= min))
      return error(
          key, formatv("expected a number {0} {1}, got {2}", strictMin ? ">" : ">=", min, show(v)));
    out = *d;
    return Error::success();
  }
  Error integer(StringRef key, const json::Value &v, std::optional<int64_t> &out, int64_t min,
                bool allowAuto = true) {
    if (allowAuto && isAuto(v)) {
      config.autoKeys.insert(key);
      return Error::success();
    }
    std::optional<double> d = v.getAsNumber();
    if (!d || *d != std::floor(*d) || std::fabs(*d) > 9.0e15)
      return error(key, "expected an integer" + Twine(allowAuto ? " or \"auto\"" : "") + ", got " +
                            show(v));
    if (*d < (double)min)
      return error(key, formatv("expected an integer >= {0}, got {1}", min, show(v)));
    out = (int64_t)*d;
    return Error::success();
  }
  Error boolean(StringRef key, const json::Value &v, std::optional<bool> &out,
                bool allowAuto = false) {
    if (allowAuto && isAuto(v)) {
      config.autoKeys.insert(key);
      return Error::success();
    }
    std::optional<bool> b = v.getAsBoolean();
    if (!b)
      return error(key, "expected true or false" + Twine(allowAuto ? " or \"auto\"" : "") +
                            ", got " + show(v));
    out = *b;
    return Error::success();
  }
  Error string(StringRef key, const json::Value &v, std::optional<std::string> &out,
               ArrayRef<StringRef> allowed) {
    std::optional<StringRef> s = v.getAsString();
    if (!s || (!allowed.empty() && !llvm::is_contained(allowed, *s))) {
      std::string list;
      for (StringRef a : allowed)
        list += (list.empty() ? "" : ", ") + ("\"" + a + "\"").str();
      return error(key, "expected one of " + list + ", got " + show(v));
    }
    out = s->str();
    return Error::success();
  }

  using Handler = std::function<Error(StringRef key, const json::Value &)>;
  struct Section {
    StringMap<Handler> keys;
    /// Keys DeepSpeed knows that change nothing in zcc (warned as such).
    StringMap<std::string> ignored;
  };

  /// Walks |object| (named |prefix|) with |section|'s handlers.
  Error walk(StringRef prefix, const json::Value &value, const Section &section) {
    const json::Object *object = value.getAsObject();
    if (!object && prefix.empty())
      return createStringError(inconvertibleErrorCode(),
                               config.path + ": expected a JSON object at the top level, got " +
                                   show(value));
    if (!object)
      return error(prefix, "expected an object, got " + show(value));
    // Sorted keys: the warnings come out in a stable order.
    std::vector<std::string> names;
    for (const auto &kv : *object)
      names.push_back(kv.first.str());
    llvm::sort(names);
    for (const std::string &name : names) {
      std::string key = prefix.empty() ? name : (prefix + "." + name).str();
      const json::Value &v = *object->get(name);
      if (auto it = section.keys.find(name); it != section.keys.end()) {
        if (Error e = it->second(key, v))
          return e;
      } else if (auto ig = section.ignored.find(name); ig != section.ignored.end()) {
        warn(key,
             "has no effect in zcc" + Twine(ig->second.empty() ? "" : " (" + ig->second + ")"));
      } else {
        unknown(key, name, section);
      }
    }
    return Error::success();
  }

  /// Records unknown key |key| (|name| in |section|) with the closest name
  /// the section knows, or a hint for a common mistake.
  void unknown(StringRef key, StringRef name, const Section &section) {
    std::string why = hint(key);
    if (why.empty()) {
      StringRef best;
      unsigned bestDistance = ~0u;
      auto consider = [&](StringRef known) {
        unsigned d = name.edit_distance(known, /*AllowReplacements=*/true, bestDistance);
        if (d < bestDistance)
          bestDistance = d, best = known;
      };
      for (const auto &kv : section.keys)
        consider(kv.first());
      for (const auto &kv : section.ignored)
        consider(kv.first());
      // Close: at most a third of the name's letters differ (a typo, a
      // British spelling, a dropped underscore), never more than 4.
      if (!best.empty() &&
          bestDistance <= std::min<size_t>(4, std::max<size_t>(1, name.size() / 3)))
        why = "; did you mean '" + best.str() + "'?";
    }
    config.unknownKeys.push_back(
        (config.path + ": key '" + key + "': not a DeepSpeed key zcc knows" + why).str());
  }

  /// What to write instead of a common mistake.
  static std::string hint(StringRef key) {
    static const StringMap<const char *> hints = {
        {"bfloat16", "; DeepSpeed's section is bf16"},
    };
    auto it = hints.find(key);
    return it == hints.end() ? "" : it->second;
  }

  DeepSpeedConfig &config;
};

} // namespace

/// A DeepSpeed config is a few KB; more is not one.
constexpr uint64_t kMaxConfigBytes = 16 << 20;
/// DeepSpeed's own configs nest 3 deep.
constexpr int kMaxConfigDepth = 32;

/// What llvm::json::parse does not check: the nesting depth (its recursive
/// descent overflows the stack on a file nested 50,000 deep) and keys given
/// twice in one object (the parser keeps one silently). Empty: fine.
static std::string checkJsonShape(StringRef text) {
  std::vector<std::set<std::string>> keys; // per open object; arrays: none
  std::vector<bool> isObject;
  int line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n')
      ++line;
    if (c == '{' || c == '[') {
      if ((int)isObject.size() >= kMaxConfigDepth)
        return "line " + std::to_string(line) + ": nested more than " +
               std::to_string(kMaxConfigDepth) + " deep; is this a DeepSpeed config?";
      isObject.push_back(c == '{');
      keys.emplace_back();
    } else if (c == '}' || c == ']') {
      if (!isObject.empty()) {
        isObject.pop_back();
        keys.pop_back();
      }
    } else if (c == '"') {
      size_t start = ++i;
      while (i < text.size() && text[i] != '"')
        i += text[i] == '\\' ? 2 : 1;
      std::string s = text.substr(start, std::min(i, text.size()) - start).str();
      size_t j = i + 1;
      while (j < text.size() &&
             (text[j] == ' ' || text[j] == '\t' || text[j] == '\r' || text[j] == '\n'))
        ++j;
      bool isKey = j < text.size() && text[j] == ':' && !isObject.empty() && isObject.back();
      if (isKey && !keys.back().insert(s).second)
        return "line " + std::to_string(line) + ": key \"" + s.substr(0, 100) +
               "\" appears twice in one object; keep one";
    }
  }
  return "";
}

Expected<DeepSpeedConfig> readDeepSpeedConfig(StringRef path) {
  llvm::sys::fs::file_status st;
  if (std::error_code ec = llvm::sys::fs::status(path, st))
    return createStringError(ec, "--deepspeed " + path + ": cannot read (" + ec.message() + ")");
  if (st.type() != llvm::sys::fs::file_type::regular_file)
    return createStringError(inconvertibleErrorCode(),
                             "--deepspeed " + path +
                                 ": not a regular file (a device, FIFO or directory); pass the "
                                 "JSON file");
  if (st.getSize() > kMaxConfigBytes)
    return createStringError(inconvertibleErrorCode(),
                             "--deepspeed " + path + ": " + Twine(st.getSize()) +
                                 " bytes; a DeepSpeed config is a few KB (at most 16 MiB here)");
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return createStringError(buffer.getError(), "--deepspeed " + path + ": cannot read (" +
                                                    buffer.getError().message() + ")");
  return parseDeepSpeedConfig((*buffer)->getBuffer(), path);
}

Expected<DeepSpeedConfig> parseDeepSpeedConfig(StringRef text, StringRef path) {
  DeepSpeedConfig config;
  config.path = path.str();
  if (text.size() > kMaxConfigBytes)
    return createStringError(inconvertibleErrorCode(),
                             "--deepspeed " + path +
                                 ": larger than 16 MiB; not a DeepSpeed config");
  if (std::string why = checkJsonShape(text); !why.empty())
    return createStringError(inconvertibleErrorCode(), "--deepspeed " + path + ": " + why);
  Expected<json::Value> root = json::parse(text);
  if (!root)
    return createStringError(inconvertibleErrorCode(),
                             "--deepspeed " + path +
                                 ": not valid JSON: " + toString(root.takeError()));
  Reader r(config);
  using Section = Reader::Section;
  auto num = [&](std::optional<double> &out, double min, bool strictMin = false) {
    return [&r, &out, min, strictMin](StringRef k, const json::Value &v) {
      return r.number(k, v, out, min, true, strictMin);
    };
  };
  auto count = [&](std::optional<double> &out, double min) {
    return [&r, &out, min](StringRef k, const json::Value &v) -> Error {
      if (Error e = r.number(k, v, out, min))
        return e;
      if (out && (*out != std::floor(*out) || *out > 1e15))
        return r.error(k, formatv("expected a whole number of elements from {0} to 1e15 (such "
                                  "as 5e8), got {1}",
                                  (int64_t)min, Reader::show(v)));
      return Error::success();
    };
  };
  auto integer = [&](std::optional<int64_t> &out, int64_t min) {
    return [&r, &out, min](StringRef k, const json::Value &v) { return r.integer(k, v, out, min); };
  };
  auto flag = [&](std::optional<bool> &out, bool allowAuto = false) {
    return [&r, &out, allowAuto](StringRef k, const json::Value &v) {
      return r.boolean(k, v, out, allowAuto);
    };
  };

  // optimizer.params: read into the config; which ones apply depends on type.
  Section optimizerParams;
  optimizerParams.keys["lr"] = num(config.lr, 0);
  optimizerParams.keys["betas"] = [&](StringRef k, const json::Value &v) -> Error {
    if (r.isAuto(v)) {
      config.autoKeys.insert(k);
      return Error::success();
    }
    const json::Array *a = v.getAsArray();
    std::optional<double> b1 = a && a->size() == 2 ? (*a)[0].getAsNumber() : std::nullopt;
    std::optional<double> b2 = a && a->size() == 2 ? (*a)[1].getAsNumber() : std::nullopt;
    if (!b1 || !b2 || !(*b1 >= 0 && *b1 < 1) || !(*b2 >= 0 && *b2 < 1))
      return r.error(k, "expected [beta1, beta2] in [0, 1), got " + Reader::show(v));
    config.beta1 = *b1;
    config.beta2 = *b2;
    return Error::success();
  };
  optimizerParams.keys["eps"] = num(config.eps, 0, /*strictMin=*/true);
  optimizerParams.keys["weight_decay"] = num(config.weightDecay, 0);
  optimizerParams.keys["momentum"] = num(config.momentum, 0);
  optimizerParams.keys["nesterov"] = flag(config.nesterov);
  optimizerParams.ignored["torch_adam"] = "zcc's AdamW is PyTorch's";
  optimizerParams.ignored["adam_w_mode"] = "";
  optimizerParams.ignored["dampening"] = "";
  Section optimizer;
  optimizer.keys["type"] = [&](StringRef k, const json::Value &v) -> Error {
    std::optional<std::string> type;
    // DeepSpeed's names (case-insensitive there); Adam is AdamW by default
    // (adam_w_mode: true).
    std::optional<StringRef> s = v.getAsString();
    std::string lower = s ? s->lower() : "";
    if (lower == "adamw" || lower == "adam")
      config.optimizer = "adamw";
    else if (lower == "sgd")
      config.optimizer = "sgd";
    else
      return r.error(
          k,
          "expected \"AdamW\", \"Adam\" or \"SGD\" (zcc's optimizers), got " + Reader::show(v) +
              (lower.find("lamb") != std::string::npos || lower.find("onebit") != std::string::npos
                   ? "; LAMB and 1-bit optimizers are not supported"
                   : ""));
    return Error::success();
  };
  optimizer.keys["params"] = [&](StringRef k, const json::Value &v) {
    return r.walk(k, v, optimizerParams);
  };

  Section schedulerParams;
  schedulerParams.keys["warmup_min_lr"] = num(config.warmupMinLr, 0);
  schedulerParams.keys["warmup_max_lr"] = num(config.warmupMaxLr, 0);
  schedulerParams.keys["warmup_num_steps"] = integer(config.warmupNumSteps, 0);
  schedulerParams.keys["total_num_steps"] = integer(config.totalNumSteps, 1);
  schedulerParams.keys["warmup_min_ratio"] = num(config.warmupMinRatio, 0);
  schedulerParams.keys["cos_min_ratio"] = num(config.cosMinRatio, 0);
  schedulerParams.keys["warmup_type"] = [&](StringRef k, const json::Value &v) {
    return r.string(k, v, config.warmupType, {"log", "linear"});
  };
  schedulerParams.ignored["last_batch_iteration"] = "";
  Section scheduler;
  scheduler.keys["type"] = [&](StringRef k, const json::Value &v) -> Error {
    std::optional<StringRef> s = v.getAsString();
    if (s && (*s == "WarmupLR" || *s == "WarmupDecayLR" || *s == "WarmupCosineLR")) {
      config.scheduler = s->str();
      return Error::success();
    }
    return r.error(k, "expected \"WarmupLR\", \"WarmupDecayLR\" or \"WarmupCosineLR\", got " +
                          Reader::show(v) +
                          (s && (*s == "OneCycle" || *s == "LRRangeTest")
                               ? " (OneCycle and LRRangeTest are not supported)"
                               : ""));
  };
  scheduler.keys["params"] = [&](StringRef k, const json::Value &v) {
    return r.walk(k, v, schedulerParams);
  };

  Section fp16;
  fp16.keys["enabled"] = flag(config.fp16Enabled, /*allowAuto=*/true);
  fp16.keys["loss_scale"] = [&](StringRef k, const json::Value &v) -> Error {
    if (Error e = r.number(k, v, config.lossScale, 0))
      return e;
    // A static scale beyond 2^32 overflows every fp16 gradient: every step
    // would be skipped.
    if (config.lossScale && *config.lossScale > 4294967296.0)
      return r.error(k,
                     "expected 0 (dynamic) or a static scale up to 2^32, got " + Reader::show(v));
    return Error::success();
  };
  fp16.keys["initial_scale_power"] = [&](StringRef k, const json::Value &v) -> Error {
    if (Error e = r.integer(k, v, config.initialScalePower, 0))
      return e;
    if (config.initialScalePower && *config.initialScalePower > 63)
      return r.error(k, "expected an integer in [0, 63], got " + Reader::show(v));
    return Error::success();
  };
  fp16.keys["loss_scale_window"] = integer(config.lossScaleWindow, 1);
  fp16.keys["hysteresis"] = integer(config.hysteresis, 1);
  fp16.keys["consecutive_hysteresis"] = flag(config.consecutiveHysteresis);
  fp16.keys["min_loss_scale"] = num(config.minLossScale, 0, /*strictMin=*/true);
  fp16.ignored["auto_cast"] = "zcc casts the whole graph";
  // Not read by DeepSpeed either, but in configs users have (the seed guide's).
  fp16.ignored["initial_loss_scale"] = "DeepSpeed ignores it too: the initial scale is "
                                       "2^fp16.initial_scale_power (default 16, i.e. 65536)";
  fp16.ignored["fp16_master_weights_and_grads"] = "masters stay float32";
  Section bf16;
  bf16.keys["enabled"] = flag(config.bf16Enabled, /*allowAuto=*/true);
  bf16.ignored["immediate_grad_update"] = "";

  auto offload = [&](std::optional<DeepSpeedOffload> &out) {
    return [&r, &out, &config](StringRef k, const json::Value &v) -> Error {
      const json::Object *o = v.getAsObject();
      if (!o)
        return r.error(k, "expected an object, got " + Reader::show(v));
      DeepSpeedOffload result;
      std::vector<std::string> names;
      for (const auto &kv : *o)
        names.push_back(kv.first.str());
      llvm::sort(names);
      for (const std::string &name : names) {
        std::string key = (k + "." + name).str();
        const json::Value &x = *o->get(name);
        if (name == "device") {
          std::optional<std::string> d;
          if (Error e = r.string(key, x, d, {"none", "cpu", "nvme"}))
            return e;
          result.device = *d;
        } else if (name == "pin_memory") {
          std::optional<bool> b;
          if (Error e = r.boolean(key, x, b))
            return e;
          result.pinMemory = *b;
        } else if (name == "nvme_path") {
          std::optional<std::string> p;
          if (Error e = r.string(key, x, p, {}))
            return e;
          result.nvmePath = *p;
        } else if (name == "buffer_count" || name == "buffer_size" || name == "max_in_cpu" ||
                   name == "pipeline_read" || name == "pipeline_write" || name == "fast_init" ||
                   name == "ratio") {
          r.warn(key, "has no effect in zcc");
        } else {
          config.unknownKeys.push_back(config.path + ": key '" + key +
                                       "': not a DeepSpeed key zcc knows (offload sections "
                                       "have device, pin_memory, nvme_path, buffer_count, ...)");
        }
      }
      out = result;
      return Error::success();
    };
  };
  Section zero;
  zero.keys["stage"] = [&](StringRef k, const json::Value &v) -> Error {
    if (Error e = r.integer(k, v, config.zeroStage, 0, /*allowAuto=*/false))
      return e;
    if (*config.zeroStage > 3)
      return r.error(k, "expected 0, 1, 2 or 3, got " + Reader::show(v));
    return Error::success();
  };
  // Element counts: whole numbers (DeepSpeed's configs write 5e8).
  zero.keys["reduce_bucket_size"] = count(config.reduceBucketSize, 1);
  zero.keys["allgather_bucket_size"] = count(config.allgatherBucketSize, 1);
  zero.keys["stage3_prefetch_bucket_size"] = count(config.prefetchBucketSize, 0);
  zero.keys["stage3_param_persistence_threshold"] = count(config.paramPersistenceThreshold, 0);
  zero.keys["stage3_max_live_parameters"] = count(config.maxLiveParameters, 1);
  zero.keys["stage3_max_reuse_distance"] = count(config.maxReuseDistance, 0);
  zero.keys["sub_group_size"] = count(config.subGroupSize, 1);
  zero.keys["overlap_comm"] = flag(config.overlapComm);
  zero.keys["contiguous_gradients"] = flag(config.contiguousGradients);
  zero.keys["reduce_scatter"] = flag(config.reduceScatter);
  zero.keys["allgather_partitions"] = flag(config.allgatherPartitions);
  zero.keys["offload_optimizer"] = offload(config.offloadOptimizer);
  zero.keys["offload_param"] = offload(config.offloadParam);
  zero.keys["mics_shard_size"] = integer(config.micsShardSize, -1);
  zero.keys["zero_hpz_partition_size"] = integer(config.hpzPartitionSize, 1);
  zero.keys["zero_quantized_weights"] = flag(config.quantizedWeights);
  zero.keys["zero_quantized_gradients"] = flag(config.quantizedGradients);
  for (const char *k :
       {"round_robin_gradients", "stage3_gather_16bit_weights_on_model_save",
        "stage3_gather_fp16_weights_on_model_save", "elastic_checkpoint",
        "ignore_unused_parameters", "load_from_fp32_weights", "memory_efficient_linear"})
    zero.ignored[k] = "";
  zero.ignored["cpu_offload"] = "deprecated in DeepSpeed; use offload_optimizer";

  Section top;
  top.keys["train_batch_size"] = integer(config.trainBatchSize, 1);
  top.keys["train_micro_batch_size_per_gpu"] = integer(config.microBatchPerGpu, 1);
  top.keys["gradient_accumulation_steps"] = integer(config.gradientAccumulationSteps, 1);
  top.keys["gradient_clipping"] = num(config.gradientClipping, 0);
  // DeepSpeed builds an optimizer or scheduler from its "type": a section
  // without one would silently change nothing.
  top.keys["optimizer"] = [&](StringRef k, const json::Value &v) -> Error {
    if (Error e = r.walk(k, v, optimizer))
      return e;
    if (!config.optimizer)
      return r.error(k, "the section has no \"type\" (\"AdamW\", \"Adam\" or \"SGD\")");
    return Error::success();
  };
  top.keys["scheduler"] = [&](StringRef k, const json::Value &v) -> Error {
    if (Error e = r.walk(k, v, scheduler))
      return e;
    if (!config.scheduler)
      return r.error(k, "the section has no \"type\" (\"WarmupLR\", \"WarmupDecayLR\" or "
                        "\"WarmupCosineLR\")");
    return Error::success();
  };
  top.keys["communication_data_type"] = [&](StringRef k, const json::Value &v) {
    return r.string(k, v, config.communicationDataType, {"fp32", "fp16", "bf16"});
  };
  Section dataTypes;
  dataTypes.keys["grad_accum_dtype"] = [&](StringRef k, const json::Value &v) {
    return r.string(k, v, config.gradAccumDtype, {"fp32", "fp16", "bf16"});
  };
  top.keys["data_types"] = [&](StringRef k, const json::Value &v) {
    return r.walk(k, v, dataTypes);
  };
  top.keys["fp16"] = [&](StringRef k, const json::Value &v) { return r.walk(k, v, fp16); };
  top.keys["bf16"] = [&](StringRef k, const json::Value &v) { return r.walk(k, v, bf16); };
  top.keys["zero_optimization"] = [&](StringRef k, const json::Value &v) {
    return r.walk(k, v, zero);
  };
  for (const char *k :
       {"steps_per_print", "wall_clock_breakdown", "dump_state", "zero_allow_untested_optimizer",
        "prescale_gradients", "gradient_predivide_factor", "sparse_gradients", "flops_profiler",
        "tensorboard", "wandb", "csv_monitor", "comms_logger", "memory_breakdown",
        "zero_force_ds_cpu_optimizer", "seed"})
    top.ignored[k] = "";
  // activation_checkpointing: DeepSpeed's checkpointing of the blocks the
  // model code wraps, i.e. zcc's --recompute layer; its knobs tune how
  // checkpoints are stored.
  Section checkpointing;
  checkpointing.keys["partition_activations"] = flag(config.partitionActivations);
  checkpointing.keys["cpu_checkpointing"] = flag(config.cpuCheckpointing);
  for (const char *k : {"contiguous_memory_optimization", "number_checkpoints",
                        "synchronize_checkpoint_boundary", "profile"})
    checkpointing.ignored[k] = "";
  top.keys["activation_checkpointing"] = [&](StringRef k, const json::Value &v) {
    config.activationCheckpointing = true;
    return r.walk(k, v, checkpointing);
  };
  top.ignored["amp"] = "use fp16 or bf16";
  Section aio;
  aio.keys["block_size"] = integer(config.aioBlockSize, 4096);
  aio.keys["queue_depth"] = integer(config.aioQueueDepth, 1);
  aio.ignored["thread_count"] = "one I/O thread a rank, io_uring keeps queue_depth in flight";
  aio.ignored["single_submit"] = "";
  aio.ignored["overlap_events"] = "";
  aio.ignored["use_gds"] = "no GPUDirect Storage: NVMe is read into pinned host memory";
  top.keys["aio"] = [&](StringRef k, const json::Value &v) { return r.walk(k, v, aio); };

  if (Error e = r.walk("", *root, top))
    return std::move(e);
  if (config.fp16Enabled.value_or(false) && config.bf16Enabled.value_or(false))
    return createStringError(inconvertibleErrorCode(),
                             config.path + ": key 'fp16.enabled' and 'bf16.enabled' are both "
                                           "true; enable one");
  return config;
}

} // namespace zcc
