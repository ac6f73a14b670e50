//===- Launch.cpp - ranks in threads, processes and nodes -----------------===//
#include "launch/Launch.h"

#include "comm/Hostfile.h"
#include "plan/PlanLoader.h"
#include "support/Files.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <csignal>
#include <dirent.h>
#include <fcntl.h>
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
                           const std::vector<std::string> &names, bool *signalled) {
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
  // After the first failure the others get SIGTERM, and SIGKILL 10 s later
  // from |killer| (only those not yet reaped: a reaped pid may be reused).
  std::mutex mutex;
  std::condition_variable done;
  bool finished = false;
  // reaped: waited for (its pid may be reused); sent: the signals this
  // launcher sent it (a bit each), so that dying of one of them is not a
  // cause.
  std::vector<bool> reaped(children.size(), false);
  std::vector<uint64_t> sent(children.size(), 0);
  auto sendToLive = [&](int sig) { // with |mutex| held
    for (size_t c = 0; c < children.size(); ++c)
      if (!reaped[c]) {
        kill(children[c], sig);
        sent[c] |= uint64_t(1) << sig;
      }
  };
  std::thread killer;
  // Every failure, in the order reaped, and whether it died of a signal
  // nobody here sent.
  struct Failure {
    int child, status;
    bool foreignSignal;
  };
  std::vector<Failure> failures;
  int left = (int)children.size();
  while (left > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR) {
      int received = launcherSignals.load();
      std::lock_guard<std::mutex> lock(mutex);
      sendToLive(received >= 2 ? SIGKILL : launcherSignal.load());
      continue;
    }
    if (pid < 0)
      break;
    int r = (int)(std::find(children.begin(), children.end(), pid) - children.begin());
    if (r == (int)children.size())
      continue; // not one of ours
    --left;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    std::lock_guard<std::mutex> lock(mutex);
    reaped[r] = true;
    if (ok)
      continue;
    bool ours = WIFSIGNALED(status) && WTERMSIG(status) < 64 && (sent[r] >> WTERMSIG(status) & 1);
    failures.push_back({r, status, WIFSIGNALED(status) && !ours});
    if (failures.size() > 1)
      continue;
    sendToLive(SIGTERM);
    killer = std::thread([&] {
      std::unique_lock<std::mutex> lock(mutex);
      if (!done.wait_for(lock, std::chrono::seconds(10), [&] { return finished; }))
        sendToLive(SIGKILL);
    });
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    finished = true;
  }
  done.notify_all();
  if (killer.joinable())
    killer.join();
  for (int k = 0; k < 3; ++k)
    sigaction(signals[k], &previous[k], nullptr);
  if (signalled)
    *signalled = launcherSignals.load() > 0;
  if (failures.empty())
    return 0;
  // The cause: a child killed by a signal from elsewhere (SIGKILL, a
  // crash) before one that exited with an error, which is usually a peer
  // that saw it die (the order they are reaped in is a race); else the
  // first failure.
  Failure cause = failures[0];
  for (const Failure &f : failures)
    if (f.foreignSignal) {
      cause = f;
      break;
    }
  int failed = cause.child, failedStatus = cause.status;
  if (WIFSIGNALED(failedStatus))
    std::fprintf(stderr, "zrun: %s was killed by signal %d; the others were stopped\n",
                 names[failed].c_str(), WTERMSIG(failedStatus));
  else
    std::fprintf(stderr, "zrun: %s failed (exit %d); the others were stopped\n",
                 names[failed].c_str(), WEXITSTATUS(failedStatus));
  return WIFEXITED(failedStatus) ? WEXITSTATUS(failedStatus) : 1;
}

//===--- elastic restarts -------------------------------------------------===//

namespace {

/// The samples one step of |p| takes.
int64_t globalBatch(const plan::Plan &p) {
  return p.micro_batch() * std::max<int64_t>(1, p.training().grad_accum_steps()) * p.world_size();
}

/// |command| for |world| ranks with |accum| accumulation steps: its
/// --world-size and --grad-accum replaced (or added), and -o |output|.
std::string commandFor(const plan::Plan &p, int world, int64_t accum, const std::string &output) {
  std::vector<std::string> args(p.command().begin(), p.command().end());
  auto set = [&](const std::string &flag, const std::string &value) {
    for (size_t i = 1; i < args.size(); ++i) {
      std::string name = args[i].substr(0, args[i].find('='));
      if (name != "-" + flag && name != "--" + flag)
        continue;
      if (name == args[i] && i + 1 < args.size())
        args[i + 1] = value;
      else
        args[i] = name + "=" + value;
      return;
    }
    args.push_back("--" + flag);
    args.push_back(value);
  };
  set("world-size", std::to_string(world));
  if (accum != std::max<int64_t>(1, p.training().grad_accum_steps()))
    set("grad-accum", std::to_string(accum));
  args.push_back("-o");
  args.push_back(output);
  std::string line;
  for (const std::string &a : args)
    line += (line.empty() ? "" : " ") + shellQuote(a);
  return line;
}

} // namespace

Status zrt::planForWorld(const std::string &planPath, int world, std::string &found) {
  plan::Plan first;
  ZRT_RETURN_IF_ERROR(loadPlanHeader(planPath, first));
  if (first.world_size() == world) {
    found = planPath;
    return Status::ok();
  }
  const int64_t samples = globalBatch(first);
  size_t slash = planPath.rfind('/');
  std::string dir = slash == std::string::npos ? "." : planPath.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : planPath.substr(0, slash + 1);
  std::vector<std::string> candidates;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 6 && name.compare(name.size() - 6, 6, ".zplan") == 0 &&
          prefix + name != planPath)
        candidates.push_back(prefix + name);
    }
    closedir(d);
  }
  std::sort(candidates.begin(), candidates.end());
  for (const std::string &c : candidates) {
    plan::Plan p;
    if (loadPlanHeader(c, p) && p.world_size() == world && p.source() == first.source() &&
        p.target() == first.target() && globalBatch(p) == samples) {
      found = c;
      return Status::ok();
    }
  }
  std::string stem = planPath.size() > 6 && planPath.substr(planPath.size() - 6) == ".zplan"
                         ? planPath.substr(0, planPath.size() - 6)
                         : planPath;
  std::string output = stem + "-w" + std::to_string(world) + ".zplan";
  std::string what = "no plan for " + std::to_string(world) + " ranks beside " + planPath + " (" +
                     first.source() + ", " + std::to_string(samples) + " samples per step)";
  const int64_t perRank = first.micro_batch() * world;
  if (perRank <= 0 || samples % perRank != 0)
    return errorf(what, ", and none can keep ", samples, " samples per step on ", world,
                  " ranks with micro-batch ", first.micro_batch(),
                  ": compile one with a --micro-batch and --grad-accum whose product with ", world,
                  " is ", samples, ", and put it beside the first plan");
  if (first.command().empty())
    return errorf(what, ": compile the model for --world-size ", world, " and --grad-accum ",
                  samples / perRank, " beside it (the plan does not record its zcc command)");
  return errorf(what, ": compile one with\n  ",
                commandFor(first, world, samples / perRank, output));
}

namespace {

/// What a restart runs: |argv| with the plan for |world| ranks and, when
/// the checkpoint directory has a complete checkpoint, --resume it
/// (replacing any --resume given). |from| says where it starts.
Status restartCommand(const std::vector<std::string> &argv, const Restarts &restarts, int world,
                      std::vector<std::string> &out, std::string &from) {
  std::string plan;
  ZRT_RETURN_IF_ERROR(planForWorld(argv[restarts.planArg], world, plan));
  std::string latest;
  bool resume = readRegularFile(restarts.checkpointDir + "/latest", latest, 4096).isOk();
  while (!latest.empty() && std::isspace((unsigned char)latest.back()))
    latest.pop_back();
  out.clear();
  for (size_t i = 0; i < argv.size(); ++i) {
    if (i == restarts.planArg) {
      out.push_back(plan);
      continue;
    }
    if (resume && argv[i] == "--resume") {
      ++i;
      continue;
    }
    if (resume && argv[i].rfind("--resume=", 0) == 0)
      continue;
    out.push_back(argv[i]);
  }
  if (resume) {
    out.push_back("--resume");
    out.push_back(restarts.checkpointDir);
  }
  from = (resume ? "from " + restarts.checkpointDir + "/" + latest : "from the start") + " on " +
         std::to_string(world) + (world == 1 ? " rank" : " ranks") +
         (plan != argv[restarts.planArg] ? " (" + plan + ")" : "");
  return Status::ok();
}

/// Runs |attempt| (the job's exit status, and whether the launcher was
/// told to stop) until it succeeds, is stopped, or has failed
/// restarts.max + 1 times. |attempt| gets the restart's number (0: the
/// first run).
Status withRestarts(const Restarts &restarts,
                    const std::function<Status(int, int &, bool &)> &attempt, int &exitCode) {
  for (int k = 0;; ++k) {
    bool signalled = false;
    ZRT_RETURN_IF_ERROR(attempt(k, exitCode, signalled));
    if (exitCode == 0 || signalled || restarts.max == 0)
      return Status::ok();
    if (k == restarts.max) {
      std::fprintf(stderr, "zrun: the job failed %d times; no restart left (--max-restarts %d)\n",
                   k + 1, restarts.max);
      return Status::ok();
    }
  }
}

/// Starts |program| (execvp for "ssh", else execv) with |argv|, after
/// |childSetup| ran in the child (its environment); with |dieWithParent|
/// the child is killed when the launcher dies. The child's pid, or -1.
pid_t spawn(const std::vector<std::string> &argv, const char *program, bool dieWithParent,
            const std::function<void()> &childSetup) {
  pid_t pid = fork();
  if (pid != 0)
    return pid;
  if (dieWithParent) {
    // A rank dies with its launcher: no orphan keeps a GPU.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
      _exit(1);
  }
  if (childSetup)
    childSetup();
  std::vector<char *> cargv;
  std::vector<std::string> args = argv;
  for (std::string &a : args)
    cargv.push_back(a.data());
  cargv.push_back(nullptr);
  if (std::strcmp(program, "ssh") == 0)
    execvp(program, cargv.data());
  else
    execv(program, cargv.data());
  std::fprintf(stderr, "zrun: cannot run %s: %s\n", program, std::strerror(errno));
  _exit(127);
}

/// The nodes of |nodes| that answer `ssh HOST true` within 30 s (all asked
/// at once); says which do not.
std::vector<NodeSlots> answeringNodes(const std::vector<NodeSlots> &nodes) {
  std::vector<pid_t> probes;
  for (const NodeSlots &n : nodes)
    probes.push_back(spawn({"ssh", "-o", "ConnectTimeout=10", "--", n.host, "true"}, "ssh",
                           /*dieWithParent=*/true, [] {
                             // Quiet: a node that is gone is reported below.
                             int null = open("/dev/null", O_WRONLY);
                             if (null >= 0) {
                               dup2(null, 1);
                               dup2(null, 2);
                             }
                           }));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::vector<int> status(nodes.size(), -1);
  size_t left = 0;
  for (pid_t p : probes)
    left += p > 0;
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid > 0) {
      for (size_t i = 0; i < probes.size(); ++i)
        if (probes[i] == pid) {
          status[i] = st, probes[i] = -1, --left;
        }
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<NodeSlots> alive;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (probes[i] > 0) { // no answer in time
      kill(probes[i], SIGKILL);
      waitpid(probes[i], nullptr, 0);
    }
    if (status[i] >= 0 && WIFEXITED(status[i]) && WEXITSTATUS(status[i]) == 0)
      alive.push_back(nodes[i]);
    else
      std::fprintf(stderr, "zrun: node %s does not answer over ssh; the job goes on without it\n",
                   nodes[i].host.c_str());
  }
  return alive;
}

int slotCount(const std::vector<NodeSlots> &nodes) {
  int n = 0;
  for (const NodeSlots &node : nodes)
    n += (int)node.slots.size();
  return n;
}

} // namespace

Status zrt::launchHosts(const HostLaunch &launch, const Restarts &restarts, int &exitCode) {
  exitCode = 1;
  std::string text;
  if (Status s = readRegularFile(launch.hostfile, text, 1 << 20); !s)
    return errorf("--hostfile ", s.message());
  std::vector<NodeSlots> nodes;
  ZRT_RETURN_IF_ERROR(parseHostfile(text, launch.hostfile, nodes));
  ZRT_RETURN_IF_ERROR(
      selectSlots(nodes, launch.include, launch.exclude, launch.numNodes, launch.numGpus));
  if (restarts.minNodes > (int)nodes.size())
    return errorf("--min-nodes ", restarts.minNodes, ": the job has ", nodes.size(),
                  nodes.size() == 1 ? " node" : " nodes");
  char cwd[4096];
  std::string dir = getcwd(cwd, sizeof cwd) ? cwd : ".";
  if (launch.dryRun) {
    for (const NodeCommand &c : nodeCommands(nodes, launch.argv, dir, launch.port)) {
      std::string line;
      for (const std::string &a : c.argv)
        line += (line.empty() ? "" : " ") + shellQuote(a);
      std::printf("%s\n", line.c_str());
    }
    exitCode = 0;
    return Status::ok();
  }
  const int minNodes = restarts.minNodes > 0 ? restarts.minNodes : (int)nodes.size();
  return withRestarts(
      restarts,
      [&](int k, int &code, bool &signalled) -> Status {
        std::vector<NodeSlots> alive = nodes;
        std::vector<std::string> argv = launch.argv;
        if (k > 0) {
          alive = answeringNodes(nodes);
          if ((int)alive.size() < minNodes)
            return errorf(alive.size(), " of ", nodes.size(), " nodes answer, fewer than the ",
                          minNodes, " the job needs to go on (--min-nodes); no restart");
          std::string from;
          ZRT_RETURN_IF_ERROR(restartCommand(launch.argv, restarts, slotCount(alive), argv, from));
          std::fprintf(stderr, "zrun: restart %d of %d, %s on %zu %s\n", k, restarts.max,
                       from.c_str(), alive.size(), alive.size() == 1 ? "node" : "nodes");
        }
        std::vector<pid_t> children;
        std::vector<std::string> names;
        for (const NodeCommand &c : nodeCommands(alive, argv, dir, launch.port)) {
          children.push_back(spawn(c.argv, "ssh", /*dieWithParent=*/false, {}));
          names.push_back("node " + c.host);
        }
        code = superviseChildren(children, names, &signalled);
        return Status::ok();
      },
      exitCode);
}

Status zrt::launchLocal(const std::vector<std::string> &argv0, int nproc, int port,
                        const Restarts &restarts, int &exitCode) {
  exitCode = 1;
  return withRestarts(
      restarts,
      [&](int k, int &code, bool &signalled) -> Status {
        std::vector<std::string> argv = argv0;
        if (k > 0) {
          std::string from;
          ZRT_RETURN_IF_ERROR(restartCommand(argv0, restarts, nproc, argv, from));
          std::fprintf(stderr, "zrun: restart %d of %d, %s\n", k, restarts.max, from.c_str());
        }
        std::vector<pid_t> children;
        for (int r = 0; r < nproc; ++r) {
          pid_t pid = spawn(argv, "/proc/self/exe", /*dieWithParent=*/true, [&] {
            // One node of a --hostfile job: its ranks start at
            // ZRUN_RANK_OFFSET in a world of WORLD_SIZE, with the master on
            // MASTER_ADDR.
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
          });
          if (pid < 0) {
            int error = errno;
            for (pid_t c : children)
              kill(c, SIGTERM);
            return errorf("--nproc-per-node ", nproc, ": cannot start rank ", r, " (",
                          std::strerror(error), ")");
          }
          children.push_back(pid);
        }
        std::vector<std::string> names;
        for (int r = 0; r < nproc; ++r)
          names.push_back("rank " + std::to_string(r));
        code = superviseChildren(children, names, &signalled);
        return Status::ok();
      },
      exitCode);
}
