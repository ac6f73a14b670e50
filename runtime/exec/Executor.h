//===- Executor.h - run a validated plan on the CPU --------------*- C++ -*-===//
#ifndef ZRT_EXEC_EXECUTOR_H
#define ZRT_EXEC_EXECUTOR_H

#include "comm/Communicator.h"
#include "cpu/Kernels.h"
#include "plan/plan.pb.h"
#include "support/Status.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace zrt {

/// A rank's communication stream: collectives run on their own thread, in
/// the order they are issued (every rank issues the same sequence), so that
/// an async collective overlaps the kernels that follow it until its wait.
class CommStream {
public:
  explicit CommStream(Communicator *comm);
  /// Waits for everything issued; a stream destroyed with work pending (its
  /// rank failed mid-program) aborts the group first, so nothing hangs.
  ~CommStream();
  int64_t submit(std::function<Status()> task);
  Status wait(int64_t ticket);

private:
  void loop();
  Communicator *comm_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<int64_t, std::function<Status()>>> queue_;
  std::map<int64_t, Status> done_;
  int64_t next_ = 0, running_ = -1;
  bool stop_ = false;
  std::thread thread_;
};

/// What the trainer needs from a backend (CPU: Executor; CUDA:
/// runtime/cuda). One object per rank.
class ExecutorBase {
public:
  virtual ~ExecutorBase() = default;
  /// Bytes allocated for the arenas, as planned.
  virtual int64_t allocatedBytes() const = 0;
  /// A host view of buffer |index|: program inputs are written through it
  /// before run(), program outputs read after it.
  virtual TensorRef buffer(int index) const = 0;
  /// Runs every instruction of |program| in order.
  virtual Status run(const plan::Program &program) = 0;
  /// The state arena's bytes (parameters, gradients, optimizer state), then
  /// the host arena's offloaded state, for checkpoints and weights, and back.
  virtual Status saveState(std::vector<char> &bytes) = 0;
  virtual Status loadState(const std::vector<char> &bytes) = 0;

  /// zrun --profile: the time of every instruction, summed over runs, by
  /// program name and instruction index. The CPU times kernels with a clock;
  /// the CUDA backend records an event between instructions on its compute
  /// stream (so an async collective counts only its launch).
  struct InstructionTime {
    double ms = 0;
    int64_t runs = 0;
  };
  using Profile = std::map<std::pair<std::string, int>, InstructionTime>;
  void enableProfiling() { profiling_ = true; }
  void resetProfile() { profile_.clear(); }
  const Profile &profile() const { return profile_; }

protected:
  bool profiling_ = false;
  Profile profile_;
};

/// Owns the arenas of one rank and runs the plan's programs over them.
class Executor : public ExecutorBase {
public:
  /// |plan| must have passed validatePlan. Allocates every arena at exactly
  /// the size the compiler planned and copies the initial state in (rank
  /// |rank|'s part of sharded state). Plans with collectives need |comm|
  /// (of the plan's world size; not owned).
  explicit Executor(const plan::Plan &plan, int rank = 0, Communicator *comm = nullptr);

  /// Bytes allocated for the arenas (device + state + constant + input).
  int64_t allocatedBytes() const override { return allocated_; }

  /// The program named |name|, or null.
  const plan::Program *program(const std::string &name) const;

  /// A view of buffer |index| in its arena.
  TensorRef buffer(int index) const override;

  /// The state arena (parameters, gradients, optimizer state): what a
  /// checkpoint saves and restores.
  char *stateData() const { return state_.data.get(); }
  int64_t stateBytes() const { return state_.bytes; }
  /// The state arena, then the host arena's offloaded state.
  Status saveState(std::vector<char> &bytes) override {
    bytes.assign(stateData(), stateData() + stateBytes());
    bytes.insert(bytes.end(), host_.data.get(), host_.data.get() + plan_.host_state_bytes());
    return Status::ok();
  }
  Status loadState(const std::vector<char> &bytes) override;

  /// Runs every instruction of |program| in order.
  Status run(const plan::Program &program) override;

private:
  struct Arena {
    std::unique_ptr<char, void (*)(void *)> data{nullptr, std::free};
    int64_t bytes = 0;
  };
  char *arenaBase(int arena) const;

  Status collective(const plan::Collective &c);
  Status runCollective(const plan::Collective &c);

  const plan::Plan &plan_;
  int rank_;
  Communicator *comm_;
  Arena device_, state_, constant_, input_, host_;
  int64_t allocated_ = 0;
  // Last, so that the stream stops before the arenas it reads are freed.
  std::map<int, int64_t> pending_; // async collectives by output buffer
  std::unique_ptr<CommStream> stream_;
};

} // namespace zrt

#endif // ZRT_EXEC_EXECUTOR_H
