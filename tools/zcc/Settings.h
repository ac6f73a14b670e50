//===- Settings.h - the training settings of one zcc run ---------*- C++ -*-===//
//
// zcc's flags and a DeepSpeed config (--deepspeed) describe the same things.
// resolveSettings merges them: a flag fills what the config leaves out or
// sets to "auto"; a flag given explicitly that disagrees with an explicit
// config value is an error naming both (as HuggingFace's integration refuses
// mismatched TrainingArguments), never a silent choice.
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_TOOLS_SETTINGS_H
#define ZCC_TOOLS_SETTINGS_H

#include "zcc/Config/DeepSpeedConfig.h"
#include "zcc/Pipelines/Pipelines.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace zcc {

/// Every training setting zcc resolves from its flags and a DeepSpeed
/// config, with zcc's defaults (DeepSpeed's where it has one). Most come from
/// include/zcc/Pipelines/Settings.def (one entry each: name, type, default,
/// help, flag, pipeline option); the DeepSpeed scheduler's stay here (no flag:
/// a config sets them, zrun's flags decide without one).
struct Settings {
#define ZCC_PIPELINE_FLAG(member, type, dflt, option, flag, value, help) type member = dflt;
#define ZCC_PIPELINE(member, type, dflt, option, help) type member = dflt;
#define ZCC_FLAG(member, type, dflt, flag, value, help) type member = dflt;
#include "zcc/Pipelines/Settings.def"
  // The DeepSpeed scheduler, if any; -1 steps: "auto" (zrun's flags decide).
  std::optional<std::string> schedule;
  double scheduleLr = 0, warmupMinLr = 0, warmupMinRatio = 0, cosMinRatio = 1e-4;
  int64_t warmupSteps = 1000, totalSteps = -1;
  bool warmupLog = true;
};

/// What the flags say, and which were on the command line: |given| asks
/// the option itself (zcc: cl::opt's occurrence count), by its name without
/// dashes ("zero-stage"; "betas" for beta1 and beta2).
struct FlagValues {
  Settings settings;
  std::function<bool(llvm::StringRef flag)> given = [](llvm::StringRef) { return false; };
};

/// Merges the flags with |config| (if any) and checks the result. Warnings
/// (unknown keys, settings zcc does not act on yet) go to |warn|.
llvm::Expected<Settings> resolveSettings(const FlagValues &flags, const DeepSpeedConfig *config,
                                         llvm::function_ref<void(const std::string &)> warn);

/// Checks resolved settings on their own and against each other (ranges,
/// the stages each ZeRO feature needs, the mesh groups): the first problem,
/// as a message that names the flag and what to give.
llvm::Error checkSettings(const Settings &settings);

/// The mesh group size --mics-shard-size or --hpz-partition-size |size| asks
/// for at |world| ranks: 0 (off) for DeepSpeed's off values (mics -1,
/// hpZ 0 or 1) and for a group of every rank, which is plain ZeRO.
int64_t meshGroup(int64_t size, int64_t world, bool hpz);

/// Sets the pipeline's options that |settings| decide in |options|, with
/// recomputation |recompute| (--recompute's, or a candidate of --auto); the
/// driver sets its own (target, loss, what to emit).
void setPipelineOptions(TrainingPipelineOptions &options, const Settings &settings,
                        llvm::StringRef recompute);

} // namespace zcc

#endif // ZCC_TOOLS_SETTINGS_H
