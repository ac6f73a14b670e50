//===- Executor.h - run a validated plan on the CPU --------------*- C++ -*-===//
#ifndef ZRT_EXEC_EXECUTOR_H
#define ZRT_EXEC_EXECUTOR_H

#include "comm/Communicator.h"
#include "cpu/Kernels.h"
#include "plan/plan.pb.h"
#include "support/Status.h"

#include <memory>
#include <string>
#include <vector>

namespace zrt {

/// Owns the arenas of one rank and runs the plan's programs over them.
class Executor {
public:
  /// |plan| must have passed validatePlan. Allocates every arena at exactly
  /// the size the compiler planned and copies the initial state in (rank
  /// |rank|'s part of sharded state). Plans with collectives need |comm|
  /// (of the plan's world size; not owned).
  explicit Executor(const plan::Plan &plan, int rank = 0, Communicator *comm = nullptr);

  /// Bytes allocated for the arenas (device + state + constant + input).
  int64_t allocatedBytes() const { return allocated_; }

  /// The program named |name|, or null.
  const plan::Program *program(const std::string &name) const;

  /// A view of buffer |index| in its arena.
  TensorRef buffer(int index) const;

  /// The state arena (parameters, gradients, optimizer state): what a
  /// checkpoint saves and restores.
  char *stateData() const { return state_.data.get(); }
  int64_t stateBytes() const { return state_.bytes; }

  /// Runs every instruction of |program| in order.
  Status run(const plan::Program &program);

private:
  struct Arena {
    std::unique_ptr<char, void (*)(void *)> data{nullptr, std::free};
    int64_t bytes = 0;
  };
  char *arenaBase(int arena) const;

  Status collective(const plan::Collective &c);

  const plan::Plan &plan_;
  int rank_;
  Communicator *comm_;
  Arena device_, state_, constant_, input_, host_;
  int64_t allocated_ = 0;
};

} // namespace zrt

#endif // ZRT_EXEC_EXECUTOR_H
