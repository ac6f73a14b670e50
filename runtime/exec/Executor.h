//===- Executor.h - run a validated plan on the CPU --------------*- C++ -*-===//
//
// The CPU backend: arenas in host memory, kernels from the CPU library
// (cpu/Kernels.h), collectives over the rank group on a communication thread
// per rank (so an async collective overlaps the kernels after it).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_EXEC_EXECUTOR_H
#define ZRT_EXEC_EXECUTOR_H

#include "comm/Communicator.h"
#include "exec/CommGroups.h"
#include "exec/Interpreter.h"
#include "support/Status.h"
#include "support/TaskThread.h"

#include <chrono>
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
  int64_t submit(std::function<Status()> task) { return tasks_.submit(std::move(task)); }
  Status wait(int64_t ticket) { return tasks_.wait(ticket); }

private:
  Communicator *comm_;
  TaskThread tasks_;
};

/// Owns the arenas of one rank and runs the plan's programs over them.
class Executor : public Interpreter {
public:
  /// |plan| must have passed validatePlan. Allocates every arena at exactly
  /// the size the compiler planned and copies the initial state in (rank
  /// |rank|'s part of sharded state). Plans with collectives need |comm|
  /// (of the plan's world size; not owned).
  explicit Executor(const plan::Plan &plan, int rank = 0, Communicator *comm = nullptr);

  /// Bytes allocated for the arenas (device + state + constant + input).
  int64_t allocatedBytes() const override { return allocated_; }

  /// A view of buffer |index| in its arena.
  TensorRef buffer(int index) const override;

  /// The state arena (parameters, gradients, optimizer state): what a
  /// checkpoint saves and restores.
  char *stateData() const { return state_.data.get(); }
  int64_t stateBytes() const { return state_.bytes; }
  /// The state arena, then the host arena's offloaded state, then the
  /// NVMe arena.
  Status saveState(std::vector<char> &bytes, bool withNvme = true) override {
    bytes.assign(stateData(), stateData() + stateBytes());
    bytes.insert(bytes.end(), host_.data.get(), host_.data.get() + plan_.host_state_bytes());
    return withNvme ? saveNvme(bytes) : Status::ok();
  }
  Status loadState(const std::vector<char> &bytes, bool withNvme = true) override;
  Status writeState(int64_t offset, const char *data, int64_t bytes) override;

  /// Runs every instruction of |program| in order.
  Status run(const plan::Program &program) override;

private:
  TensorRef operand(int index) const override { return buffer(index); }
  Status beforeStep(const Step &step) override;
  void afterStep(const Step &step) override;
  Status runKernel(const Step &step) override { return cpuKernel(step.kernel).run(step.call); }
  Status runCopy(const Step &step) override;
  Status runCollective(const Step &step) override { return collective(step); }
  Status runWait(const Step &step) override;

  struct Arena {
    std::unique_ptr<char, void (*)(void *)> data{nullptr, std::free};
    int64_t bytes = 0;
  };
  char *arenaBase(int arena) const;

  Status collective(const Step &step);
  Status runCollective(const plan::Collective &c);

  int rank_;
  Communicator *comm_;
  CommGroups groups_; // comm_'s subgroups for a plan with a mesh
  Arena device_, state_, constant_, input_, host_;
  int64_t allocated_ = 0;
  double stepStartUs_ = 0; // zrun --profile, --trace
  // --trace: the communication thread's slices, moved into trace_ after
  // each program.
  std::mutex commTraceMutex_;
  std::vector<TraceSlice> commTrace_;
  // Last, so that the stream stops before the arenas it reads are freed.
  std::map<int, int64_t> pending_; // async collectives by output buffer
  std::unique_ptr<CommStream> stream_;
};

} // namespace zrt

#endif // ZRT_EXEC_EXECUTOR_H
