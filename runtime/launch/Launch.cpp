//===- Launch.cpp - ranks in threads, processes and nodes -----------------===//
#include "launch/Launch.h"

#include "comm/Hostfile.h"
#include "support/Files.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <csignal>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace zrt;

Status zrt::runRanks(int world, const std::function<Status(int, Communicator *)> &body) {
  if (world == 1)
    return body(0, nullptr);
  InProcessGroup group(world);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < world; ++r)
    comms.push_back(group.communicator(r));
  std::vector<Status> results(world);
  std::atomic<int> firstFailure{-1};
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      Status s = body(r, comms[r].get());
      if (!s) {
        int none = -1;
        if (firstFailure.compare_exchange_strong(none, r))
          comms[r]->abort(errorf("rank ", r, " failed").message());
      }
      results[r] = s;
    });
  for (std::thread &t : threads)
    t.join();
  int r = firstFailure.load();
  if (r < 0)
    return Status::ok();
  return world > 1 ? errorf("rank ", r, ": ", results[r].message()) : results[r];
}

namespace {
// The launcher's signals (a handler reaches nothing else): the last one and
// how many arrived.
std::atomic<int> launcherSignal{0}, launcherSignals{0};
void onLauncherSignal(int sig) {
  launcherSignal.store(sig);
  launcherSignals.fetch_add(1);
}
} // namespace

int zrt::superviseChildren(const std::vector<pid_t> &children,
                           const std::vector<std::string> &names) {
  // SIGTERM, SIGINT, SIGHUP: forwarded to the children, which stop after
  // their step in flight and save; a second one kills them. No SA_RESTART:
  // waitpid returns to forward.
  launcherSignals.store(0);
  struct sigaction action, previous[3];
  std::memset(&action, 0, sizeof action);
  action.sa_handler = onLauncherSignal;
  sigemptyset(&action.sa_mask);
  const int signals[3] = {SIGTERM, SIGINT, SIGHUP};
  for (int k = 0; k < 3; ++k)
    sigaction(signals[k], &action, &previous[k]);
  int failed = -1, failedStatus = 0, left = (int)children.size();
  while (left > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR) {
      int received = launcherSignals.load();
      for (pid_t c : children)
        kill(c, received >= 2 ? SIGKILL : launcherSignal.load());
      continue;
    }
    if (pid < 0)
      break;
    --left;
    int r = (int)(std::find(children.begin(), children.end(), pid) - children.begin());
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && failed < 0) {
      failed = r;
      failedStatus = status;
      for (pid_t c : children)
        if (c != pid)
          kill(c, SIGTERM);
      std::thread([children] {
        std::this_thread::sleep_for(std::chrono::seconds(10));
        for (pid_t c : children)
          kill(c, SIGKILL);
      }).detach();
    }
  }
  for (int k = 0; k < 3; ++k)
    sigaction(signals[k], &previous[k], nullptr);
  if (failed < 0)
    return 0;
  if (WIFSIGNALED(failedStatus))
    std::fprintf(stderr, "zrun: %s was killed by signal %d; the others were stopped\n",
                 names[failed].c_str(), WTERMSIG(failedStatus));
  else
    std::fprintf(stderr, "zrun: %s failed (exit %d); the others were stopped\n",
                 names[failed].c_str(), WEXITSTATUS(failedStatus));
  return WIFEXITED(failedStatus) ? WEXITSTATUS(failedStatus) : 1;
}

Status zrt::launchHosts(const HostLaunch &launch, int &exitCode) {
  exitCode = 1;
  std::string text;
  if (Status s = readRegularFile(launch.hostfile, text, 1 << 20); !s)
    return errorf("--hostfile ", s.message());
  std::vector<NodeSlots> nodes;
  ZRT_RETURN_IF_ERROR(parseHostfile(text, launch.hostfile, nodes));
  ZRT_RETURN_IF_ERROR(
      selectSlots(nodes, launch.include, launch.exclude, launch.numNodes, launch.numGpus));
  char cwd[4096];
  std::string dir = getcwd(cwd, sizeof cwd) ? cwd : ".";
  std::vector<NodeCommand> commands = nodeCommands(nodes, launch.argv, dir, launch.port);
  if (launch.dryRun) {
    for (const NodeCommand &c : commands) {
      std::string line;
      for (const std::string &a : c.argv)
        line += (line.empty() ? "" : " ") + shellQuote(a);
      std::printf("%s\n", line.c_str());
    }
    exitCode = 0;
    return Status::ok();
  }
  std::vector<pid_t> children;
  std::vector<std::string> names;
  for (const NodeCommand &c : commands) {
    pid_t pid = fork();
    if (pid == 0) {
      std::vector<char *> cargv;
      std::vector<std::string> args = c.argv;
      for (std::string &a : args)
        cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execvp("ssh", cargv.data());
      std::perror("zrun: ssh");
      _exit(127);
    }
    children.push_back(pid);
    names.push_back("node " + c.host);
  }
  exitCode = superviseChildren(children, names);
  return Status::ok();
}

Status zrt::launchLocal(const std::vector<std::string> &argv, int nproc, int port, int &exitCode) {
  exitCode = 1;
  std::vector<pid_t> children;
  for (int r = 0; r < nproc; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      int error = errno;
      for (pid_t c : children)
        kill(c, SIGTERM);
      return errorf("--nproc-per-node ", nproc, ": cannot start rank ", r, " (",
                    std::strerror(error), ")");
    }
    if (pid == 0) {
      // A rank dies with its launcher: no orphan keeps a GPU.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() == 1)
        _exit(1);
      // One node of a --hostfile job: its ranks start at ZRUN_RANK_OFFSET
      // in a world of WORLD_SIZE, with the master on MASTER_ADDR.
      const char *offsetVar = std::getenv("ZRUN_RANK_OFFSET");
      const char *worldVar = std::getenv("WORLD_SIZE");
      int offset = offsetVar ? std::atoi(offsetVar) : 0;
      setenv("RANK", std::to_string(offset + r).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      if (!(offsetVar && worldVar))
        setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", offsetVar ? 0 : 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      setenv("NCCL_NVLS_ENABLE", "0", 0);
      // Signals this launcher forwards are repeats, not second signals
      // (support/Signals.h).
      setenv("ZRUN_LAUNCHER_PID", std::to_string(getppid()).c_str(), 1);
      std::vector<char *> cargv;
      std::vector<std::string> args = argv;
      for (std::string &a : args)
        cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execv("/proc/self/exe", cargv.data());
      std::perror("zrun: exec");
      _exit(127);
    }
    children.push_back(pid);
  }
  std::vector<std::string> names;
  for (int r = 0; r < nproc; ++r)
    names.push_back("rank " + std::to_string(r));
  exitCode = superviseChildren(children, names);
  return Status::ok();
}
