//===- Signals.cpp - stopping a run cleanly on a signal -------------------===//
#include "support/Signals.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

namespace zrt {
namespace {

constexpr int kSignals[3] = {SIGTERM, SIGINT, SIGHUP};
std::atomic<int> stopSignal{0};
pid_t launcherPid = 0; // zrun --nproc-per-node's parent, whose repeats are forwarded copies

void onSignal(int sig, siginfo_t *info, void *) {
  if (stopSignal.load() != 0) {
    if (launcherPid != 0 && info && info->si_pid == launcherPid)
      return; // the launcher forwarding what this rank already got
    const char message[] = "zrun: second signal: stopping now\n";
    (void)!::write(2, message, sizeof message - 1);
    ::_exit(128 + sig);
  }
  stopSignal.store(sig);
  const char message[] = "zrun: signal received: stopping after this step (a checkpoint is "
                         "saved with --checkpoint-dir; signal again to stop now)\n";
  (void)!::write(2, message, sizeof message - 1);
}

} // namespace

StopOnSignals::StopOnSignals() {
  stopSignal.store(0);
  const char *launcher = std::getenv("ZRUN_LAUNCHER_PID");
  launcherPid = launcher ? (pid_t)std::atoi(launcher) : 0;
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_sigaction = onSignal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int k = 0; k < 3; ++k)
    sigaction(kSignals[k], &action, &previous_[k]);
}

StopOnSignals::~StopOnSignals() {
  for (int k = 0; k < 3; ++k)
    sigaction(kSignals[k], &previous_[k], nullptr);
}

const std::atomic<int> &StopOnSignals::flag() const { return stopSignal; }

const char *signalName(int sig) {
  switch (sig) {
  case SIGTERM:
    return "SIGTERM";
  case SIGINT:
    return "SIGINT";
  case SIGHUP:
    return "SIGHUP";
  default:
    return "a signal";
  }
}

} // namespace zrt
