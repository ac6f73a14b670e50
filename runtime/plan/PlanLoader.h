//===- PlanLoader.h - read and validate a plan -------------------*- C++ -*-===//
//
// The runtime validates the whole plan before it runs anything (as IREE's
// bytecode verifier does): every buffer inside its arena, its initial data of
// the right size, every instruction a known kernel whose operands pass the
// kernel's check, every program input and output a valid buffer. A plan that
// loads is safe to run: no out-of-bounds access is possible afterwards, except
// for data-dependent indices, which the kernels check themselves.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_PLAN_PLANLOADER_H
#define ZRT_PLAN_PLANLOADER_H

#include "cpu/Kernels.h"
#include "plan/plan.pb.h"
#include "support/Status.h"
#include "train/Npy.h"

#include <string>
#include <vector>

namespace zrt {

/// The plan format version this runtime reads.
constexpr int kPlanVersion = 1;

/// The most ranks a plan may be compiled for.
constexpr int kMaxWorldSize = 4096;

/// The bytes of a rank's state that checkpoints hold: the state arena, then
/// the host arena's offloaded state (zero-offload), then the NVMe arena
/// (all of it state).
inline int64_t checkpointStateBytes(const plan::Plan &p) {
  return p.state_arena_bytes() + p.host_state_bytes() + p.nvme_arena_bytes();
}

/// Where state buffer |b| starts in those bytes.
inline int64_t stateImageOffset(const plan::Plan &p, const plan::Buffer &b) {
  return b.offset() + (b.arena() == plan::HOST   ? p.state_arena_bytes()
                       : b.arena() == plan::NVME ? p.state_arena_bytes() + p.host_state_bytes()
                                                 : 0);
}

/// The ranks the plan's sharded state is split over (world size, or the
/// mesh's group size under MiCS / HSDP), and which of those shards rank
/// |rank| holds.
inline int64_t stateShards(const plan::Plan &p) {
  return p.state_shards() > 0 ? p.state_shards() : p.world_size();
}
inline int64_t stateShardOf(const plan::Plan &p, int rank) { return rank % stateShards(p); }

/// The ranks of |rank|'s collective group |g| in a plan of |world| ranks and
/// mesh groups of |groupSize| (ascending; |rank| among them).
std::vector<int> groupRanks(int world, int groupSize, plan::Collective::Group g, int rank);

/// Parses |bytes| as a plan and validates it.
Status parsePlan(const std::string &bytes, plan::Plan &out);

/// Reads, parses and validates the plan file at |path|; errors name the file.
Status loadPlan(const std::string &path, plan::Plan &out);

/// The plan's small fields only (version, world size, stage, source,
/// micro-batch, training, target, command): what zrun's elastic launcher
/// compares plans by, without reading their buffers and programs. Not
/// validated; errors name the file.
Status loadPlanHeader(const std::string &path, plan::Plan &out);

/// Validates a parsed plan (see the file comment).
Status validatePlan(const plan::Plan &plan);

/// Element type of a plan dtype, or false if the dtype is unknown.
bool toDType(int planDType, DType &out);

/// Program inputs that the trainer fills itself, not from data: the fp16
/// loss scale, and dropout's [seed, stream position] (zcc's PlanWriter
/// knows the same names).
inline bool isTrainerInput(const std::string &name) {
  // lr: micro_step's where the optimizer runs in it (zcc --optimizer-in-backward).
  return name == "loss_scale" || name == "dropout_rng" || name == "lr";
}

/// Samples per rank and micro-step: the leading dimension of micro_step's
/// first data input (0 for a plan that does not train). zcc records it as
/// the plan's micro_batch, which the validator checks against this.
int64_t planMicroBatch(const plan::Plan &plan);

/// The program named |name|, or null.
const plan::Program *findProgram(const plan::Plan &plan, const std::string &name);

/// The buffer of |program|'s output (or input) |name|; -1 if there is none
/// (or no program).
int namedBuffer(const plan::Program *program, bool output, const std::string &name);

/// Buffer |b|'s type and shape, without data.
TensorRef describeBuffer(const plan::Buffer &b);

/// Kernel |k|'s operands (described, without data) and attributes: what a
/// kernel's check, or a backend's "can it run this" question, needs.
KernelCall describeKernel(const plan::Plan &p, const plan::Kernel &k);

} // namespace zrt

#endif // ZRT_PLAN_PLANLOADER_H
