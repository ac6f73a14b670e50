//===- Cli.h - zrun's command-line pieces the commands share ----*- C++ -*-===//
//
// CLI11 validators whose messages read "--flag: expected WHAT, got 'VALUE'",
// the options every command takes (Common), the launch flags, and the
// helpers the launchers need (argv without some options, this program's
// path). zrun.cpp declares the commands with them; Train.cpp zrun train.
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_TOOLS_ZRUN_CLI_H
#define ZCC_TOOLS_ZRUN_CLI_H

#include "launch/Launch.h"
#include "run/Run.h"
#include "support/Files.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace zrun {

/// A runtime error, printed: exit code 1.
int fail(const zrt::Status &s);
/// A command-line mistake: the error and where to read about the options
/// (exit code 2).
int usageError(const std::string &message, const std::string &command);

CLI::Validator check(std::string what, std::function<bool(const std::string &)> ok);
CLI::Validator integer(int64_t min, std::string what, int64_t max = INT64_MAX);
CLI::Validator number(double min, bool strict, std::string what);
CLI::Validator oneOf(std::set<std::string> values, std::string what);
/// NAME=FILE.
extern const CLI::Validator kAssignment;
zrt::NamedFiles splitAssignments(const std::vector<std::string> &values);

/// Sets |out| when the option is given (the plan's value stays otherwise).
template <typename T>
CLI::Option *optional(CLI::App *app, const std::string &name, std::optional<T> &out,
                      const std::string &help) {
  return app->add_option_function<T>(
      name, [&out](const T &v) { out = v; }, help);
}

/// The options every command takes.
struct Common {
  zrt::RunOptions run;
  std::vector<std::string> data;
};
void addCommon(CLI::App *cmd, Common &c, const std::string &planHelp);
/// Arguments the command did not take: the first one, as an error.
std::optional<std::string> unknownArgument(const CLI::App *cmd);

/// How a command launches its ranks.
struct LaunchFlags {
  int nprocPerNode = 0, masterPort = 29500;
  zrt::HostLaunch hosts; // hostfile empty: no hostfile launch
  zrt::Restarts restarts;
};
/// --nproc-per-node and --master-port: ranks as processes of this node.
void addLocalLaunch(CLI::App *cmd, LaunchFlags &l, const char *group);
/// Those and DeepSpeed's hostfile launch (--hostfile, --include, ...).
void addLaunch(CLI::App *cmd, LaunchFlags &l);
/// The index in |args| (zrun COMMAND ...) of |cmd|'s first positional
/// argument: the first that is neither an option nor an option's value.
size_t positionalIndex(const CLI::App *cmd, const std::vector<std::string> &args);
/// argv without the options in |withValue| (and their values) and the flags
/// in |flags|; both spellings, "--name VALUE" and "--name=VALUE".
std::vector<std::string> without(int argc, char **argv, const std::set<std::string> &withValue,
                                 const std::set<std::string> &flags);
/// This program's path (for the launchers' child processes).
std::string selfPath(const char *argv0);
/// --tokens and the options that say how a token file is cut.
void addTokenOptions(CLI::App *cmd, zrt::TokenSource &tokens);

} // namespace zrun

#endif // ZCC_TOOLS_ZRUN_CLI_H
