//===- Launch.h - ranks in threads, processes and nodes ----------*- C++ -*-===//
//
// How zrun's ranks start and end, as DeepSpeed's and torchrun's launchers
// do it:
//  - in one process: a thread per rank over an in-process communicator
//    (runRanks);
//  - one process per GPU on this node (zrun --nproc-per-node N): children
//    with torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
//    MASTER_PORT), each dying with its launcher (launchLocal);
//  - one `zrun ... --nproc-per-node n` per node of a hostfile over ssh
//    (launchHosts; comm/Hostfile.h builds the commands).
// A failing rank, child or node stops the others (no rank waits forever)
// and its status is the launcher's. With --max-restarts K (torchrun's
// elastic agent) the launcher then starts the job again, up to K times,
// from its newest complete checkpoint; a hostfile job goes on with the
// nodes that still answer when there are at least --min-nodes of them,
// on a plan for the ranks that remain found next to the first
// (docs/zero.md, "Elastic restarts"). No globals: what a launch needs is in
// its arguments.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_LAUNCH_LAUNCH_H
#define ZRT_LAUNCH_LAUNCH_H

#include "comm/Communicator.h"
#include "support/Status.h"

#include <functional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace zrt {

/// Runs |body| for every rank of a |world|-rank plan: one thread per rank,
/// sharing an in-process communicator (world 1: this thread, none). A rank
/// that fails aborts the group; the error returned is the failing rank's.
Status runRanks(int world, const std::function<Status(int, Communicator *)> &body);

/// Waits for |children| (|names| for messages); when one fails, stops the
/// others (SIGTERM, then SIGKILL after 10 s). Returns the failing child's
/// exit status (1 if it was killed by a signal), or 0. Of several failures
/// the cause is a child killed by a signal from elsewhere, if any (its
/// peers fail when it dies, and may be reaped first), else the first. |signalled| (if
/// given): whether the launcher itself was told to stop (SIGTERM, SIGINT,
/// SIGHUP), which it forwarded.
int superviseChildren(const std::vector<pid_t> &children, const std::vector<std::string> &names,
                      bool *signalled = nullptr);

/// Restarting a failed job (zrun --max-restarts K).
struct Restarts {
  int max = 0;               // --max-restarts: 0, the job runs once
  int minNodes = 0;          // --min-nodes (hostfile): 0, every node
  std::string checkpointDir; // a restart resumes from its `latest`
  size_t planArg = 0;        // the plan's index in the command (argv)
};

/// zrun ... --nproc-per-node N: |argv| (this command, without the launch
/// flags) run as N ranks of this node. An error: no job started (the ranks
/// already forked are stopped); otherwise |exitCode| is the job's
/// (superviseChildren), after the restarts |restarts| allows.
Status launchLocal(const std::vector<std::string> &argv, int nproc, int port,
                   const Restarts &restarts, int &exitCode);

/// zrun ... --hostfile FILE: DeepSpeed's hostfile and selection flags.
struct HostLaunch {
  std::string hostfile, include, exclude;
  int numNodes = -1, numGpus = -1, port = 29500;
  bool dryRun = false;           // print the ssh commands instead
  std::vector<std::string> argv; // the zrun command each node runs
};
/// The hostfile, selection and ssh commands; errors as launchLocal's. A
/// restart first asks every selected node over ssh whether it answers.
Status launchHosts(const HostLaunch &launch, const Restarts &restarts, int &exitCode);

/// The plan for |world| ranks that continues the job of |plan|: |plan|
/// itself if it is for |world|, else a .zplan beside it compiled from the
/// same model for |world| ranks with the same samples per step. Otherwise
/// an error that gives the zcc command which makes one (the command |plan|
/// records, for |world| ranks).
Status planForWorld(const std::string &plan, int world, std::string &found);

} // namespace zrt

#endif // ZRT_LAUNCH_LAUNCH_H
