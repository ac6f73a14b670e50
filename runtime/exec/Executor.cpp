//===- Executor.cpp - run a validated plan on the CPU ---------------------===//
#include "exec/Executor.h"

#include "plan/PlanLoader.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

using namespace zrt;

static void allocateArena(int64_t bytes, std::unique_ptr<char, void (*)(void *)> &data,
                          int64_t &size, int64_t &total) {
  // Page-aligned (the plan needs 64 bytes; the NVMe arena's O_DIRECT copies
  // need 4096 of the host arena); zero-filled so that nothing reads garbage.
  size_t rounded = ((size_t)std::max<int64_t>(bytes, 1) + 4095) / 4096 * 4096;
  data.reset(static_cast<char *>(std::aligned_alloc(4096, rounded)));
  if (!data)
    throw std::bad_alloc();
  std::memset(data.get(), 0, rounded);
  size = bytes;
  total += bytes;
}

Executor::Executor(const plan::Plan &plan, int rank, Communicator *comm)
    : Interpreter(plan), rank_(rank), comm_(comm), groups_(plan, rank, comm) {
  allocateArena(plan.device_arena_bytes(), device_.data, device_.bytes, allocated_);
  allocateArena(plan.state_arena_bytes(), state_.data, state_.bytes, allocated_);
  allocateArena(plan.constant_arena_bytes(), constant_.data, constant_.bytes, allocated_);
  allocateArena(plan.input_arena_bytes(), input_.data, input_.bytes, allocated_);
  allocateArena(plan.host_arena_bytes(), host_.data, host_.bytes, allocated_);
  // The NVMe arena is a file (openNvme), not memory: buffer() of one of its
  // buffers is never a kernel's operand (the validator checks).
  for (int a : {plan::DEVICE, plan::STATE, plan::CONSTANT, plan::INPUT, plan::HOST})
    writeInitialContents(a, rank, arenaBase(a));
}

char *Executor::arenaBase(int arena) const {
  switch (arena) {
  case plan::DEVICE:
    return device_.data.get();
  case plan::STATE:
    return state_.data.get();
  case plan::CONSTANT:
    return constant_.data.get();
  case plan::INPUT:
    return input_.data.get();
  case plan::HOST:
    return host_.data.get();
  default:
    return nullptr; // NVMe: a file
  }
}

TensorRef Executor::buffer(int index) const {
  const plan::Buffer &b = plan_.buffers(index);
  TensorRef t = describeBuffer(b);
  char *base = arenaBase(b.arena());
  t.data = base ? base + b.offset() : nullptr;
  return t;
}

Status Executor::run(const plan::Program &program) {
  ZRT_RETURN_IF_ERROR(refreshDerivedState(program));
  Status s = walk(program);
  std::lock_guard<std::mutex> lock(commTraceMutex_);
  trace_.insert(trace_.end(), commTrace_.begin(), commTrace_.end());
  commTrace_.clear();
  return s;
}

// zrun --profile and --trace: every instruction's wall time (a wait's is the
// time the program stood still for its collective).
Status Executor::beforeStep(const Step &) {
  if (timing())
    stepStartUs_ = traceClockUs();
  return Status::ok();
}

void Executor::afterStep(const Step &step) {
  if (!timing())
    return;
  double us = traceClockUs() - stepStartUs_;
  if (profiling_) {
    InstructionTime &t = profile_[{step.program->name(), step.index}];
    t.ms += us / 1000;
    ++t.runs;
  }
  if (traceStep_ >= 0)
    trace_.push_back({traceStep_, step.program, step.index, Track::Compute, stepStartUs_, us});
}

Status Executor::runCopy(const Step &step) {
  const plan::Copy &c = step.inst->copy();
  if (plan_.buffers(c.source()).arena() == plan::NVME)
    return nvmeCopy(step, static_cast<char *>(buffer(c.target()).data));
  if (plan_.buffers(c.target()).arena() == plan::NVME)
    return nvmeCopy(step, static_cast<char *>(buffer(c.source()).data));
  TensorRef src = buffer(c.source()), dst = buffer(c.target());
  std::memmove(dst.data, src.data, src.numel() * dtypeSize(src.dtype));
  return Status::ok();
}

Status Executor::runWait(const Step &step) {
  bool found = false;
  ZRT_RETURN_IF_ERROR(nvmeWait(step.inst->wait().output(), found));
  if (found)
    return Status::ok();
  auto it = pending_.find(step.inst->wait().output());
  if (it == pending_.end())
    return Status::ok();
  Status s = stream_->wait(it->second);
  pending_.erase(it);
  return s;
}

CommStream::CommStream(Communicator *comm) : comm_(comm) {}

CommStream::~CommStream() {
  // Collectives still queued or running would wait for peers that may never
  // come (this rank failed mid-program): abort the group so they return.
  if (tasks_.busy())
    comm_->abort("rank " + std::to_string(comm_->rank()) + " stopped with collectives in flight");
  tasks_.stop();
}

Status Executor::collective(const Step &step) {
  const plan::Collective &c = step.inst->collective();
  if (c.kind() == plan::Collective::LOCAL_SHARD || groups_.size(c.group()) == 1)
    return runCollective(c); // no communication
  Communicator *world;
  ZRT_RETURN_IF_ERROR(groups_.get(plan::Collective::WORLD, world));
  if (!stream_)
    stream_ = std::make_unique<CommStream>(comm_);
  int64_t ticket =
      stream_->submit([this, c, traced = traceStep_, program = step.program, index = step.index] {
        double start = traced >= 0 ? traceClockUs() : 0;
        Status s = runCollective(c);
        if (traced >= 0) { // --trace: the collective on the communication thread
          std::lock_guard<std::mutex> lock(commTraceMutex_);
          commTrace_.push_back(
              {traced, program, index, Track::Communication, start, traceClockUs() - start});
        }
        return s;
      });
  if (c.async()) {
    pending_[c.output()] = ticket;
    return Status::ok();
  }
  return stream_->wait(ticket);
}

Status Executor::runCollective(const plan::Collective &c) {
  TensorRef in = buffer(c.input()), out = buffer(c.output());
  CommType type = commTypeOf(in.dtype);
  int64_t n = commCount(in.numel(), in.dtype), bytes = commTypeBytes(type);
  int ranks = groups_.size(c.group());
  if (c.kind() == plan::Collective::LOCAL_SHARD) {
    int64_t len = n / ranks;
    std::memmove(out.data, in.data + groups_.rank(c.group()) * len * bytes, len * bytes);
    return Status::ok();
  }
  if (ranks == 1) { // a group of one: the identity
    std::memmove(out.data, in.data, out.numel() * bytes);
    return Status::ok();
  }
  Communicator *comm;
  ZRT_RETURN_IF_ERROR(groups_.get(c.group(), comm));
  ReduceOp op = c.reduce() == plan::Collective::AVG ? ReduceOp::Avg : ReduceOp::Sum;
  switch (c.kind()) {
  case plan::Collective::ALL_REDUCE:
    return comm->allReduce(in.data, out.data, n, type, op);
  case plan::Collective::REDUCE_SCATTER:
    return comm->reduceScatter(in.data, out.data, n, type, op);
  case plan::Collective::ALL_GATHER:
    return comm->allGather(in.data, out.data, n, type);
  case plan::Collective::ALL_TO_ALL:
    return comm->allToAll(in.data, out.data, n, type);
  default:
    return errorf("unknown collective ", (int)c.kind());
  }
}

Status Executor::writeState(int64_t offset, const char *data, int64_t bytes) {
  const int64_t state = stateBytes(), host = plan_.host_state_bytes();
  if (offset < 0 || bytes < 0 || offset + bytes > state + host + plan_.nvme_arena_bytes())
    return errorf("state bytes [", offset, ", ", offset + bytes, ") are outside the plan's state");
  derivedStateStale_ = true;
  if (offset >= state + host)
    return writeNvme(offset - state - host, data, bytes);
  if (offset >= state)
    std::memcpy(host_.data.get() + (offset - state), data, bytes);
  else
    std::memcpy(stateData() + offset, data, bytes);
  return Status::ok();
}

Status Executor::loadState(const std::vector<char> &bytes, bool withNvme) {
  int64_t want = checkpointStateBytes(plan_) - (withNvme ? 0 : plan_.nvme_arena_bytes());
  if ((int64_t)bytes.size() != want)
    return errorf("the state has ", bytes.size(), " bytes, the plan's state ", want);
  std::memcpy(stateData(), bytes.data(), stateBytes());
  std::memcpy(host_.data.get(), bytes.data() + stateBytes(), plan_.host_state_bytes());
  derivedStateStale_ = true;
  return withNvme ? loadNvme(bytes.data() + stateBytes() + plan_.host_state_bytes()) : Status::ok();
}
