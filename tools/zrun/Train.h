//===- Train.h - zrun train's options and launch -----------------*- C++ -*-===//
#ifndef ZCC_TOOLS_ZRUN_TRAIN_H
#define ZCC_TOOLS_ZRUN_TRAIN_H

#include "Cli.h"

#include "comm/Rendezvous.h"
#include "support/Signals.h"

namespace zrun {

/// zrun train's options and what run() needs of them after parsing.
struct TrainCommand {
  CLI::App *app = nullptr;
  zrt::TrainOptions t;
  LaunchFlags launch;
  std::optional<std::string> warmupType;
  std::string traceSteps;
  bool testCrashInSave = false;
  double testSlowSave = 0;
};

/// Adds `zrun train` and its options to |app|, into |c|.
void addTrain(CLI::App &app, Common &common, const std::string &planHelp, TrainCommand &c);
/// Runs `zrun train` as parsed into |c|: a launcher (--hostfile, or
/// --nproc-per-node), or this process's ranks; its exit code.
int runTrain(TrainCommand &c, Common &common, CLI::App *cmd, int argc, char **argv,
             const std::optional<zrt::LaunchEnv> &job, zrt::StopOnSignals &signals);

} // namespace zrun

#endif // ZCC_TOOLS_ZRUN_TRAIN_H
