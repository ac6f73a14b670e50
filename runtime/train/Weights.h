//===- Weights.h - parameter values from a model at start ---------*- C++ -*-===//
//
// `zcc --weights external` writes plans without parameter values (a GPT-2
// 124M plan is then 3 MB instead of 500 MB); `zrun --weights MODEL.onnx`
// fills them when a rank starts, from the model's float32 initializers
// (inline or in its external data files, as torch.onnx.export writes large
// models), and `zrun --weights DIR|FILE.safetensors` from a checkpoint's
// safetensors (names matched to the initializers'). The same flag replaces the values an embedded
// plan carries, e.g. with the trained model `zrun export --onnx` wrote.
//
// Which state buffers hold weights (`weightBuffers`): owning state buffers
// that are trainable parameters or frozen buffers (loaded by their name,
// which is the initializer's), and stage-3 parameter shards (loaded through
// the plan's ParamLayout: each rank reads only its slice of every member).
// A checkpoint's tensors are matched by the initializer's name, or through
// the plan's export record by the module's parameter name (tied names
// included); a buffer the record does not name keeps the plan's values when
// the checkpoint lacks it (a rotary inv_freq is in no checkpoint).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAIN_WEIGHTS_H
#define ZRT_TRAIN_WEIGHTS_H

#include "exec/Executor.h"
#include "plan/plan.pb.h"
#include "support/Status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace zrt {

/// The weights a run starts from, by name: an ONNX model's float32
/// initializers (inline or external data), or safetensors — one file, or a
/// Hugging Face checkpoint folder (model.safetensors, or shards listed by
/// model.safetensors.index.json) — with float32, bfloat16 or float16 tensors,
/// widened to float32. Data is read when a tensor is asked for, so opening a
/// 500 MB model reads its graph or headers only.
class WeightFile {
public:
  static Status open(const std::string &path, WeightFile &out);
  /// Whether |path| is read as safetensors (a folder, a .safetensors file).
  static bool isSafetensors(const std::string &path);

  const std::string &path() const { return path_; }
  /// Whether |name| is a float32 tensor of |shape| (the error says what it is).
  Status check(const std::string &name, const std::vector<int64_t> &shape) const;
  /// Reads elements [first, first + count) of |name| (count -1: to the
  /// end) as float32, checking that it is a tensor of |shape|.
  Status read(const std::string &name, const std::vector<int64_t> &shape, std::vector<float> &out,
              int64_t first = 0, int64_t count = -1) const;
  bool has(const std::string &name) const;
  /// The shape the file gives |name| (empty if it has none).
  std::vector<int64_t> shape(const std::string &name) const;

  /// Names of the tensors the file holds (for the plan's check of extras).
  std::vector<std::string> names() const;
  bool safetensors() const { return safetensors_; }

private:
  static Status openSafetensors(const std::string &path, WeightFile &out);
  static Status readSafetensorsHeader(const std::string &file, WeightFile &out,
                                      const std::map<std::string, std::string> *only);
  struct Entry {
    std::vector<int64_t> shape;
    int32_t dataType = 0; // onnx::TensorProto's element type
    std::string typeName; // as the file spells it (safetensors: "F32", "BF16", ...)
    std::string inline_;  // raw_data (or float_data as bytes)
    std::string file;     // external data / safetensors: path, byte offset and length
    int64_t offset = 0, length = -1;
  };
  std::string path_;
  bool safetensors_ = false;
  std::map<std::string, Entry> tensors_;
};

/// True when the plan carries no values for some weight buffer (zcc --weights
/// external): zrun then needs --weights.
bool planNeedsWeights(const plan::Plan &plan);

/// Checks, before any rank starts, that |weights| has every tensor the plan
/// loads, with its shape, and (safetensors) nothing the plan does not load:
/// the error names every missing, mis-shaped and extra tensor.
Status checkWeights(const plan::Plan &plan, const WeightFile &weights);

/// Writes rank |rank|'s part of every weight into |executor|'s state arena;
/// |loaded| counts the tensors read.
Status loadWeights(const plan::Plan &plan, const WeightFile &weights, int rank,
                   ExecutorBase &executor, int &loaded);

} // namespace zrt

#endif // ZRT_TRAIN_WEIGHTS_H
