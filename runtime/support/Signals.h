//===- Signals.h - stopping a run cleanly on a signal ------------*- C++ -*-===//
//
// A preempted cluster job gets SIGTERM (Slurm, Kubernetes), a user presses
// Ctrl-C (SIGINT), a terminal closes (SIGHUP). While a StopOnSignals lives,
// the first of these sets flag() to the signal's number and the trainer
// stops after the step in flight, saving a checkpoint; a second one ends the
// process at once (exit 128 + signal). Under zrun's own launcher the ranks
// get a signal twice when it went to the whole job (the launcher forwards
// it too): a repeat whose sender is the launcher (ZRUN_LAUNCHER_PID) is not
// a second signal.
//
// The flag is process-wide (a signal handler can reach nothing else); only
// one StopOnSignals may live at a time.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_SUPPORT_SIGNALS_H
#define ZRT_SUPPORT_SIGNALS_H

#include <atomic>
#include <csignal>

namespace zrt {

class StopOnSignals {
public:
  StopOnSignals();
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals &) = delete;
  StopOnSignals &operator=(const StopOnSignals &) = delete;
  const std::atomic<int> &flag() const;

private:
  struct sigaction previous_[3];
};

/// "SIGTERM", "SIGINT", "SIGHUP", or "signal N".
const char *signalName(int sig);

} // namespace zrt

#endif // ZRT_SUPPORT_SIGNALS_H
