//===- CudaExecutor.cu - run plans on an NVIDIA GPU -----------------------===//
//
// Size: the executor's memory, streams, collectives, offload
// staging and host fallback in one class. Splitting out the offload staging
// and the collectives' dispatch is open in issue 51; not done yet.
//
//===----------------------------------------------------------------------===//
#include "cpu/Kernels.h"
#include "cuda/CublasLt.h"
#include "cuda/CudaCheck.h"
#include "cuda/CudaExecutor.h"
#include "cuda/CudaKernels.h"
#include "cuda/DeviceStats.h"

#include "exec/CommGroups.h"
#include "exec/InFlightCopies.h"
#include "plan/PlanLoader.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>

namespace zrt {
namespace {

/// Pinned host memory (for the input and output mirrors).
struct Pinned {
  char *data = nullptr;
  ~Pinned() {
    if (data)
      cudaFreeHost(data);
  }
};

class CudaExecutor : public Interpreter {
public:
  CudaExecutor(const plan::Plan &plan, int rank, Communicator *comm, int device,
               const CudaOptions &options)
      : Interpreter(plan), rank_(rank), comm_(comm), groups_(plan, rank, comm), device_(device),
        options_(options) {}

  ~CudaExecutor() override {
    cudaSetDevice(device_);
    if (ctx_.stream)
      cudaStreamSynchronize(ctx_.stream);
    for (auto &[name, g] : graphs_)
      if (g.exec)
        cudaGraphExecDestroy(g.exec);
    for (int a = plan::DEVICE; a <= plan::INPUT; ++a)
      if (arenas_[a])
        cudaFree(arenas_[a]);
    if (ctx_.workspace)
      cudaFree(ctx_.workspace);
    if (ctx_.scratch)
      cudaFree(ctx_.scratch);
    if (side_.scratch)
      cudaFree(side_.scratch);
    if (ctx_.errorInfo)
      cudaFree(ctx_.errorInfo);
    for (unsigned *done : {ctx_.blocksDone, side_.blocksDone})
      if (done)
        cudaFree(done);
    if (ctx_.lt)
      cublasLtDestroy(ctx_.lt);
    for (cudaEvent_t e : allEvents_)
      cudaEventDestroy(e);
    for (auto &[name, marks] : profileEvents_)
      for (cudaEvent_t e : marks)
        cudaEventDestroy(e);
    for (cudaEvent_t e : traceEvents_)
      cudaEventDestroy(e);
    for (cudaEvent_t e : {readyEvent_, traceOrigin_})
      if (e)
        cudaEventDestroy(e);
    for (DeviceSync &sync : deviceSync_)
      for (cudaEvent_t e : sync.done)
        if (e)
          cudaEventDestroy(e);
    for (cudaStream_t *s : {&commStream_, &copyStream_, &side_.stream})
      if (*s) {
        cudaStreamSynchronize(*s);
        cudaStreamDestroy(*s);
      }
    if (ctx_.stream)
      cudaStreamDestroy(ctx_.stream);
  }

  Status init() {
    ZRT_CUDA(cudaSetDevice(device_));
    if (plan_.memory_budget() > 0) // zrun checked the arenas and workspace against it
      ctx_.scratchLimit =
          std::max<int64_t>(0, plan_.memory_budget() - (32 << 20) - plan_.device_arena_bytes() -
                                   plan_.state_arena_bytes() - plan_.constant_arena_bytes() -
                                   plan_.input_arena_bytes());
    ZRT_CUDA(cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking));
    ZRT_CUDA(cudaStreamCreateWithFlags(&commStream_, cudaStreamNonBlocking));
    ZRT_CUDA(cudaStreamCreateWithFlags(&copyStream_, cudaStreamNonBlocking));
    if (const char *why = cublasLtLoadError())
      return errorf("--backend cuda: ", why);
    ZRT_CUBLAS(cublasLtCreate(&ctx_.lt));
    ctx_.workspaceBytes = 32u << 20; // cuBLASLt's recommendation for Hopper
    ctx_.tuneGemms = options_.gemmTune;
    ZRT_CUDA(cudaMalloc(&ctx_.workspace, ctx_.workspaceBytes));
    ZRT_CUDA(cudaMalloc(&ctx_.errorInfo, 5 * sizeof(long long)));
    ZRT_CUDA(cudaMemsetAsync(ctx_.errorInfo, 0, 5 * sizeof(long long), ctx_.stream));
    ZRT_RETURN_IF_ERROR(zeroedCounter(ctx_));
    int64_t sizes[6] = {0,
                        plan_.device_arena_bytes(),
                        plan_.state_arena_bytes(),
                        plan_.constant_arena_bytes(),
                        plan_.input_arena_bytes(),
                        plan_.host_arena_bytes()};
    for (int a = plan::DEVICE; a <= plan::INPUT; ++a) {
      sizes_[a] = sizes[a];
      size_t bytes = (size_t)std::max<int64_t>(sizes[a], 1);
      ZRT_CUDA(cudaMalloc(&arenas_[a], bytes));
      ZRT_CUDA(cudaMemsetAsync(arenas_[a], 0, bytes, ctx_.stream));
      allocated_ += sizes[a];
    }
    ZRT_CUDA(cudaMallocHost(&input_.data, (size_t)std::max<int64_t>(sizes[plan::INPUT], 1)));
    std::memset(input_.data, 0, (size_t)std::max<int64_t>(sizes[plan::INPUT], 1));
    // The host arena (offloaded state, issue 7): pinned and mapped, so that
    // copies to and from it are asynchronous and kernels can address it.
    sizes_[plan::HOST] = sizes[plan::HOST];
    if (sizes[plan::HOST] > 0) {
      ZRT_CUDA(cudaMallocHost(&host_.data, (size_t)sizes[plan::HOST]));
      std::memset(host_.data, 0, (size_t)sizes[plan::HOST]);
      arenas_[plan::HOST] = host_.data;
    }
    // The initial state and constants, assembled on the host as the CPU
    // executor does (Interpreter::writeInitialContents), then copied up; the
    // host arena (pinned) is written in place.
    if (host_.data)
      writeInitialContents(plan::HOST, rank_, host_.data);
    // The device arenas are zeroed: a buffer at a time, no host image of
    // the whole arena (9 GB of state for GPT-2 1.5B at stage 1).
    for (int a : {plan::STATE, plan::CONSTANT})
      ZRT_RETURN_IF_ERROR(
          writeInitialContents(a, rank_, [&](int64_t offset, const char *data, int64_t bytes) {
            return copy(static_cast<char *>(arenas_[a]) + offset, data, (size_t)bytes,
                        cudaMemcpyHostToDevice);
          }));
    return Status::ok();
  }

  int64_t allocatedBytes() const override { return allocated_; }
  std::vector<std::string> tuningReport() const override {
    if (!ctx_.tuneGemms)
      return {};
    const GemmTuneStats &t = ctx_.tuneStats;
    std::vector<std::string> lines = t.lines;
    char summary[200];
    std::snprintf(summary, sizeof summary,
                  "gemm-tune: %d GEMM shapes timed, %d took another algorithm than the "
                  "heuristic's first: %.3f -> %.3f ms for one call of each",
                  t.shapes, t.changed, t.heuristicMs, t.chosenMs);
    lines.push_back(summary);
    return lines;
  }

  TensorRef buffer(int index) const override {
    const plan::Buffer &b = plan_.buffers(index);
    TensorRef t = describe(index);
    if (b.arena() == plan::INPUT) {
      t.data = input_.data + b.offset();
    } else if (b.arena() == plan::HOST) {
      t.data = host_.data + b.offset();
    } else {
      auto it = outputs_.find(index);
      t.data = it == outputs_.end() ? nullptr : const_cast<char *>(it->second.data());
    }
    return t;
  }

  Status run(const plan::Program &program) override {
    ZRT_RETURN_IF_ERROR(refreshDerivedState(program));
    StreamCollectives *nccl = comm_ ? comm_->streamCollectives() : nullptr;
    if (nccl)
      nccl->begin("program '" + program.name() + "'");
    Status s = runProgram(program);
    if (nccl)
      nccl->end();
    return s;
  }

  Status runProgram(const plan::Program &program) {
    ZRT_CUDA(cudaSetDevice(device_));
    if (sizes_[plan::INPUT] > 0)
      ZRT_CUDA(cudaMemcpyAsync(arenas_[plan::INPUT], input_.data, sizes_[plan::INPUT],
                               cudaMemcpyHostToDevice, ctx_.stream));
    marks_ = nullptr;
    issuedAhead_ = -1;
    sideMarks_.clear();
    traceEventsUsed_ = 0;
    double originUs = 0;
    if (timing()) {
      marks_ = &profileEvents_[program.name()];
      while ((int)marks_->size() < program.instructions_size() + 1) {
        cudaEvent_t e = nullptr;
        ZRT_CUDA(cudaEventCreate(&e));
        marks_->push_back(e);
      }
    }
    if (traceStep_ >= 0) {
      // --trace: the program's events anchored to the host clock here (the
      // stream is idle: the program before this one has synchronized).
      if (!traceOrigin_)
        ZRT_CUDA(cudaEventCreate(&traceOrigin_));
      ZRT_CUDA(cudaEventRecord(traceOrigin_, ctx_.stream));
      ZRT_CUDA(cudaEventSynchronize(traceOrigin_));
      originUs = traceClockUs();
    }
    std::vector<cudaEvent_t> *marks = marks_;
    auto issue = [&] { return walk(program); };
    ZRT_RETURN_IF_ERROR(marks ? issue() : issueAsGraph(program, issue));
    // The copies still in flight end before the program does, and so does
    // anything started and not waited for.
    for (cudaEvent_t done : copies_.takeAll()) {
      ZRT_CUDA(cudaStreamWaitEvent(ctx_.stream, done, 0));
      freeEvents_.push_back(done);
    }
    for (auto &[buffer, done] : pending_) {
      ZRT_CUDA(cudaStreamWaitEvent(ctx_.stream, done, 0));
      freeEvents_.push_back(done);
    }
    pending_.clear();
    if (marks)
      ZRT_CUDA(cudaEventRecord((*marks)[program.instructions_size()], ctx_.stream));
    // The program's outputs come back to the host.
    for (const plan::NamedBuffer &out : program.outputs()) {
      TensorRef t = device(out.buffer());
      std::vector<char> &host = outputs_[out.buffer()];
      host.resize(bytesOf(t));
      ZRT_CUDA(
          cudaMemcpyAsync(host.data(), t.data, host.size(), cudaMemcpyDeviceToHost, ctx_.stream));
    }
    if (StreamCollectives *nccl = comm_ ? comm_->streamCollectives() : nullptr)
      ZRT_RETURN_IF_ERROR(nccl->wait(ctx_.stream, ("program '" + program.name() + "'").c_str()));
    else
      ZRT_CUDA(cudaStreamSynchronize(ctx_.stream));
    measureDeviceMemory(device_);
    if (marks)
      ZRT_RETURN_IF_ERROR(recordTimes(program, *marks, originUs));
    // Data-dependent errors the kernels found (labels, indices).
    long long info[5];
    ZRT_RETURN_IF_ERROR(copy(info, ctx_.errorInfo, sizeof info, cudaMemcpyDeviceToHost));
    if (info[0] != 0) {
      ZRT_CUDA(cudaMemsetAsync(ctx_.errorInfo, 0, sizeof info, ctx_.stream));
      return errorf("program '", program.name(), "' on the GPU: ", describeCudaError(info));
    }
    return Status::ok();
  }

  /// --profile's and --trace's times of the program just run, from its
  /// events (the stream has synchronized).
  Status recordTimes(const plan::Program &program, const std::vector<cudaEvent_t> &marks,
                     double originUs) {
    auto since = [&](cudaEvent_t e, double &us) {
      float ms = 0;
      ZRT_CUDA(cudaEventElapsedTime(&ms, traceOrigin_, e));
      us = originUs + 1000.0 * ms;
      return Status::ok();
    };
    for (int i = 0; i < program.instructions_size(); ++i) {
      float ms = 0;
      ZRT_CUDA(cudaEventElapsedTime(&ms, marks[i], marks[i + 1]));
      if (profiling_) {
        InstructionTime &t = profile_[{program.name(), i}];
        t.ms += ms;
        ++t.runs;
      }
      if (traceStep_ >= 0) {
        double start;
        ZRT_RETURN_IF_ERROR(since(marks[i], start));
        trace_.push_back({traceStep_, &program, i, Track::Compute, start, 1000.0 * ms});
      }
    }
    for (const SideMark &m : sideMarks_) {
      double start, end;
      ZRT_RETURN_IF_ERROR(since(m.start, start));
      ZRT_RETURN_IF_ERROR(since(m.end, end));
      trace_.push_back({traceStep_, &program, m.index, m.track, start, end - start});
    }
    return Status::ok();
  }

  /// --trace: an instruction that runs on another stream than the compute
  /// one, between two events recorded on that stream.
  struct SideMark {
    int index;
    Track track;
    cudaEvent_t start, end;
  };
  template <typename Issue>
  Status traceBeside(const Step &step, Track track, cudaStream_t stream, Issue issue) {
    ZRT_RETURN_IF_ERROR(followCompute(stream));
    SideMark m{step.index, track, traceEvent(), traceEvent()};
    if (!m.start || !m.end)
      return errorf("--trace: cannot create a CUDA event");
    ZRT_CUDA(cudaEventRecord(m.start, stream));
    ZRT_RETURN_IF_ERROR(issue());
    ZRT_CUDA(cudaEventRecord(m.end, stream));
    sideMarks_.push_back(m);
    return Status::ok();
  }
  cudaEvent_t traceEvent() {
    if (traceEventsUsed_ == traceEvents_.size()) {
      cudaEvent_t e = nullptr;
      if (cudaEventCreate(&e) != cudaSuccess)
        return nullptr;
      traceEvents_.push_back(e);
    }
    return traceEvents_[traceEventsUsed_++];
  }

  //===--- The interpreter's hooks (exec/Interpreter.h) -------------------===//

  TensorRef operand(int index) const override { return device(index); }
  const char *where() const override { return " on the GPU"; }

  /// zrun --profile's event before the step; a step that touches the bytes
  /// of a copy in flight waits for it (a chunked host kernel waits per
  /// chunk instead).
  Status beforeStep(const Step &step) override {
    if (marks_)
      ZRT_CUDA(cudaEventRecord((*marks_)[step.index], ctx_.stream));
    if (step.index == issuedAhead_)
      return Status::ok();
    bool kernel = step.kind == Step::Kernel;
    bool host = (kernel && onHost(step.inst->kernel())) || touchesNvme(*step.inst);
    if (!copies_.empty() && !(kernel && chunkedOnHost(step.kernel, step.inst->kernel())))
      return orderAfterCopies(operandsOf(*step.inst), host);
    return Status::ok();
  }

  Status runKernel(const Step &step) override {
    const plan::Kernel &k = step.inst->kernel();
    const char *name = kernelName(step.kernel);
    if (chunkedOnHost(step.kernel, k)) {
      countLaunch(true, std::string(name) + " (host, chunked)");
      return runChunkedOnHost(step, issuedAhead_);
    }
    if (onHost(k)) {
      // Every operand in the pinned host arena (zero-offload's host
      // optimizer): the CPU kernel, once the stream has produced them.
      countLaunch(true, std::string(name) + " (host)");
      ZRT_CUDA(cudaStreamSynchronize(ctx_.stream));
      return cpuKernel(step.kernel).run(step.call);
    }
    bool native = hasCudaKernel(step.kernel, step.call);
    countLaunch(native, name);
    // An async kernel (zcc --optimizer-in-backward's updates) on the side
    // stream, after everything before it on the compute stream; its Wait
    // joins it back. zrun --profile runs it in order, to time it alone.
    if (native && k.async() && !marks_)
      return launchBeside(step, k);
    return native ? launchCudaKernel(step.kernel, step.call, ctx_)
                  : hostFallback(step.kernel, step.call);
  }

  /// |c|'s own blocksDone counter, zeroed on its stream.
  static Status zeroedCounter(CudaContext &c) {
    ZRT_CUDA(cudaMalloc(&c.blocksDone, sizeof(unsigned)));
    ZRT_CUDA(cudaMemsetAsync(c.blocksDone, 0, sizeof(unsigned), c.stream));
    return Status::ok();
  }

  Status launchBeside(const Step &step, const plan::Kernel &k) {
    if (!side_.stream) {
      // The compute context's handles, its own stream and scratch (the
      // kernels beside run while the compute stream's use theirs).
      side_ = ctx_;
      side_.stream = nullptr;
      side_.scratch = nullptr;
      side_.scratchBytes = 0;
      side_.blocksDone = nullptr;
      ZRT_CUDA(cudaStreamCreateWithFlags(&side_.stream, cudaStreamNonBlocking));
      ZRT_RETURN_IF_ERROR(zeroedCounter(side_));
    }
    ZRT_RETURN_IF_ERROR(followCompute(side_.stream));
    ZRT_RETURN_IF_ERROR(launchCudaKernel(step.kernel, step.call, side_));
    cudaEvent_t done = event();
    ZRT_CUDA(cudaEventRecord(done, side_.stream));
    pending_[k.outputs(k.outputs_size() - 1)] = done;
    return Status::ok();
  }

  Status runCopy(const Step &step) override {
    if (step.index == issuedAhead_) // a chunked host kernel issued it already
      return Status::ok();
    const plan::Copy &c = step.inst->copy();
    if (touchesNvme(*step.inst)) {
      // Host I/O on the host arena's bytes, once the stream is done with
      // them (the copies in flight into them: beforeStep).
      countLaunch(true, "nvme copy (host)");
      ZRT_CUDA(cudaStreamSynchronize(ctx_.stream));
      bool toFile = plan_.buffers(c.target()).arena() == plan::NVME;
      return nvmeCopy(step, host_.data + plan_.buffers(toFile ? c.source() : c.target()).offset());
    }
    if (traceStep_ >= 0 && crossesHost(c))
      return traceBeside(step, Track::Copy, copyStream_, [&] { return copyInstruction(c); });
    return copyInstruction(c);
  }

  Status runCollective(const Step &step) override {
    const plan::Collective &c = step.inst->collective();
    if (traceStep_ >= 0 && c.async() && c.kind() != plan::Collective::LOCAL_SHARD &&
        groups_.size(c.group()) > 1)
      return traceBeside(step, Track::Communication, commStream_, [&] { return collective(c); });
    return collective(c);
  }

  /// An async NCCL collective on the communication stream: the compute
  /// stream waits for its event (host-staged collectives completed when
  /// issued).
  Status runWait(const Step &step) override {
    bool found = false;
    ZRT_RETURN_IF_ERROR(nvmeWait(step.inst->wait().output(), found));
    if (found)
      return Status::ok();
    auto it = pending_.find(step.inst->wait().output());
    if (it == pending_.end())
      return Status::ok();
    Status s =
        cudaStatus(cudaStreamWaitEvent(ctx_.stream, it->second, 0), "wait", __FILE__, __LINE__);
    freeEvents_.push_back(it->second);
    pending_.erase(it);
    return s;
  }

  /// zrun --cuda-graphs: a program whose every instruction is a native
  /// kernel or a device copy on the compute stream (one rank, nothing on
  /// the host, no collective) runs as a CUDA graph captured on its second
  /// run (the first builds the GEMM descriptors, loads the generated
  /// kernels and grows the scratch memory, none of which a capture may do).
  /// A program whose kernel attributes change between runs (the optimizer's
  /// learning rate and bias corrections) stays on the stream. Measured on
  /// GPT-2 124M: the same bits, and no faster (41.06/41.00 against
  /// 41.11/40.84 ms per step): the step is GPU-bound. Off by default.
  struct ProgramGraph {
    int runs = 0;
    std::vector<double> floats; // its kernels' attributes at the last run
    bool changing = false;      // they differed between two runs
    cudaGraphExec_t exec = nullptr;
  };

  bool graphable(const plan::Program &program) {
    if (!options_.graphs || plan_.world_size() != 1 || !copies_.empty())
      return false;
    for (const Step &step : prepared(program)) {
      const plan::Instruction &inst = *step.inst;
      if (step.kind == Step::Copy) {
        if (plan_.buffers(inst.copy().source()).arena() == plan::HOST ||
            plan_.buffers(inst.copy().target()).arena() == plan::HOST)
          return false;
        continue;
      }
      if (step.kind != Step::Kernel)
        return false;
      const plan::Kernel &k = inst.kernel();
      if (chunkedOnHost(step.kernel, k) || onHost(k) || k.async())
        return false;
      for (int index : k.inputs())
        if (plan_.buffers(index).arena() == plan::HOST)
          return false;
      if (!hasCudaKernel(step.kernel, step.call))
        return false;
    }
    return true;
  }

  Status issueAsGraph(const plan::Program &program, const std::function<Status()> &issue) {
    if (!graphable(program))
      return issue();
    ProgramGraph &g = graphs_[program.name()];
    std::vector<double> floats;
    for (const plan::Instruction &inst : program.instructions())
      if (inst.has_kernel())
        floats.insert(floats.end(), inst.kernel().floats().begin(), inst.kernel().floats().end());
    // Attributes that change from run to run (the optimizer's learning rate
    // and bias corrections): that program stays on the stream.
    bool first = g.runs++ == 0;
    if (!first && floats != g.floats)
      g.changing = true;
    g.floats = std::move(floats);
    if (first || g.changing)
      return issue();
    if (!g.exec) {
      ZRT_CUDA(cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal));
      Status s = issue();
      cudaGraph_t graph = nullptr;
      cudaError_t e = cudaStreamEndCapture(ctx_.stream, &graph);
      ZRT_RETURN_IF_ERROR(s);
      ZRT_CUDA(e);
      e = cudaGraphInstantiate(&g.exec, graph, 0);
      cudaGraphDestroy(graph);
      ZRT_CUDA(e);
    }
    ZRT_CUDA(cudaGraphLaunch(g.exec, ctx_.stream));
    return Status::ok();
  }

  /// The state arena, then the host arena's offloaded state, then the NVMe
  /// arena.
  Status saveState(std::vector<char> &bytes, bool withNvme = true) override {
    ZRT_CUDA(cudaSetDevice(device_));
    size_t state = (size_t)sizes_[plan::STATE], host = (size_t)plan_.host_state_bytes();
    bytes.resize(state + host);
    ZRT_CUDA(cudaStreamSynchronize(ctx_.stream));
    if (state)
      ZRT_RETURN_IF_ERROR(copy(bytes.data(), arenas_[plan::STATE], state, cudaMemcpyDeviceToHost));
    if (host)
      std::memcpy(bytes.data() + state, host_.data, host);
    return withNvme ? saveNvme(bytes) : Status::ok();
  }

  Status loadState(const std::vector<char> &bytes, bool withNvme = true) override {
    size_t state = (size_t)sizes_[plan::STATE], host = (size_t)plan_.host_state_bytes();
    size_t nvme = withNvme ? (size_t)plan_.nvme_arena_bytes() : 0;
    if (bytes.size() != state + host + nvme)
      return errorf("the state has ", bytes.size(), " bytes, the plan's state ",
                    state + host + nvme);
    ZRT_CUDA(cudaSetDevice(device_));
    ZRT_CUDA(cudaStreamSynchronize(ctx_.stream));
    if (state)
      ZRT_RETURN_IF_ERROR(copy(arenas_[plan::STATE], bytes.data(), state, cudaMemcpyHostToDevice));
    if (host)
      std::memcpy(host_.data, bytes.data() + state, host);
    derivedStateStale_ = true;
    return withNvme ? loadNvme(bytes.data() + state + host) : Status::ok();
  }

  Status writeState(int64_t offset, const char *data, int64_t bytes) override {
    const int64_t state = sizes_[plan::STATE], host = plan_.host_state_bytes();
    if (offset < 0 || bytes < 0 || offset + bytes > state + host + plan_.nvme_arena_bytes())
      return errorf("state bytes [", offset, ", ", offset + bytes,
                    ") are outside the plan's state");
    derivedStateStale_ = true;
    if (offset >= state + host)
      return writeNvme(offset - state - host, data, bytes);
    if (offset >= state) {
      std::memcpy(static_cast<char *>(host_.data) + (offset - state), data, bytes);
      return Status::ok();
    }
    ZRT_CUDA(cudaSetDevice(device_));
    return copy(static_cast<char *>(arenas_[plan::STATE]) + offset, data, bytes,
                cudaMemcpyHostToDevice);
  }

private:
  TensorRef describe(int index) const { return describeBuffer(plan_.buffers(index)); }
  TensorRef hostView(int index, char *arenaBase) const {
    TensorRef t = describe(index);
    t.data = arenaBase + plan_.buffers(index).offset();
    return t;
  }
  TensorRef device(int index) const {
    TensorRef t = describe(index);
    t.data = arenas_[plan_.buffers(index).arena()] + plan_.buffers(index).offset();
    return t;
  }
  /// A copy instruction. Between the host arena and the device (offload:
  /// gradient shards in the backward, optimizer operands, updated
  /// parameters) it runs on the copy stream once the compute stream has
  /// reached it, so that the kernels after it overlap the transfer; the
  /// instructions that touch its bytes wait for it (orderAfterCopies).
  bool crossesHost(const plan::Copy &c) const {
    return (plan_.buffers(c.source()).arena() == plan::HOST) !=
           (plan_.buffers(c.target()).arena() == plan::HOST);
  }
  Status copyInstruction(const plan::Copy &c) {
    TensorRef src = device(c.source()), dst = device(c.target());
    size_t bytes = bytesOf(src);
    if (!crossesHost(c)) {
      // cudaMemcpyDefault: either side may be the pinned host arena.
      ZRT_CUDA(cudaMemcpyAsync(dst.data, src.data, bytes, cudaMemcpyDefault, ctx_.stream));
      return Status::ok();
    }
    ZRT_RETURN_IF_ERROR(followCompute(copyStream_));
    return copyOnCopyStream(dst.data, src.data, bytes);
  }

  /// |bytes| from |src| to |dst| on the copy stream, in pieces of
  /// kCopyChunk bytes with an event each: a chunked host kernel waits only
  /// for the pieces its chunk reads.
  Status copyOnCopyStream(char *dst, const char *src, size_t bytes) {
    for (size_t at = 0; at < bytes; at += kCopyChunk) {
      size_t n = std::min(kCopyChunk, bytes - at);
      cudaEvent_t done = event();
      ZRT_CUDA(cudaMemcpyAsync(dst + at, src + at, n, cudaMemcpyDefault, copyStream_));
      ZRT_CUDA(cudaEventRecord(done, copyStream_));
      copies_.add(src + at, dst + at, n, done);
    }
    return Status::ok();
  }

  /// Large elementwise host kernels (the offloaded AdamW/SGD update and the
  /// clip of the gradient twin) run in chunks, as DeepSpeed's CPU Adam runs
  /// sub-groups: each chunk waits only for the copies into its own bytes, and
  /// when the next instruction uploads the kernel's first output, each
  /// chunk's part goes to the device as soon as it is computed.
  bool chunkedOnHost(KernelId id, const plan::Kernel &k) const {
    if (!onHost(k) || (id != KernelId::Adamw && id != KernelId::Sgd && id != KernelId::Mul))
      return false;
    auto numel = [&](int b) { return describe(b).numel(); };
    int64_t n = numel(k.inputs(0));
    // Elementwise over operands of n elements; the others are scalars.
    for (const auto *list : {&k.inputs(), &k.outputs()})
      for (int b : *list)
        if (numel(b) != 1 && numel(b) != n)
          return false;
    return options_.offloadChunk > 0 && n >= 2 * options_.offloadChunk;
  }

  Status runChunkedOnHost(const Step &step, int &issuedAhead) {
    const plan::Program &program = *step.program;
    const KernelCall &call = step.call;
    int i = step.index;
    int64_t n = call.in[0].numel();
    auto slice = [&](const TensorRef &t, int64_t begin, int64_t count) {
      if (t.shape.empty() || t.numel() != n)
        return t; // a scalar operand (lr, step, skip, the clip coefficient)
      TensorRef part = t;
      part.shape = {count};
      part.data = t.data + begin * dtypeSize(t.dtype);
      return part;
    };
    // The upload of output 0 that follows, if any.
    const plan::Copy *upload = nullptr;
    if (i + 1 < program.instructions_size() && program.instructions(i + 1).has_copy()) {
      const plan::Copy &c = program.instructions(i + 1).copy();
      if (c.source() == program.instructions(i).kernel().outputs(0) &&
          plan_.buffers(c.target()).arena() != plan::HOST &&
          plan_.buffers(c.target()).arena() != plan::NVME)
        upload = &c;
    }
    ZRT_CUDA(cudaStreamSynchronize(ctx_.stream));
    if (upload) {
      // Its target's earlier readers and writers are on the compute stream
      // (just drained) or the copy stream (in order).
      ZRT_RETURN_IF_ERROR(followCompute(copyStream_));
      issuedAhead = i + 1;
    }
    const KernelInfo *kernel = &cpuKernel(step.kernel);
    KernelCall part = call;
    for (int64_t begin = 0; begin < n; begin += options_.offloadChunk) {
      int64_t count = std::min<int64_t>(options_.offloadChunk, n - begin);
      std::vector<ByteRange> ranges;
      for (size_t k = 0; k < call.in.size(); ++k) {
        part.in[k] = slice(call.in[k], begin, count);
        ranges.push_back({part.in[k].data, bytesOf(part.in[k]), false});
      }
      for (size_t k = 0; k < call.out.size(); ++k) {
        part.out[k] = slice(call.out[k], begin, count);
        ranges.push_back({part.out[k].data, bytesOf(part.out[k]), true});
      }
      ZRT_RETURN_IF_ERROR(orderAfterCopies(ranges, /*host=*/true));
      ZRT_RETURN_IF_ERROR(kernel->run(part));
      if (upload)
        ZRT_RETURN_IF_ERROR(
            copyOnCopyStream(device(upload->target()).data + begin * dtypeSize(call.out[0].dtype),
                             part.out[0].data, bytesOf(part.out[0])));
    }
    return Status::ok();
  }

  /// The bytes an instruction reads or writes.
  std::vector<ByteRange> operandsOf(const plan::Instruction &inst) {
    std::vector<std::pair<int, bool>> buffers;
    if (inst.has_kernel()) {
      for (int b : inst.kernel().inputs())
        buffers.push_back({b, false});
      for (int b : inst.kernel().outputs())
        buffers.push_back({b, true});
    } else if (inst.has_copy()) {
      buffers = {{inst.copy().source(), false}, {inst.copy().target(), true}};
    } else if (inst.has_collective()) {
      buffers = {{inst.collective().input(), false}, {inst.collective().output(), true}};
    } else if (inst.has_wait()) {
      buffers = {{inst.wait().output(), false}};
    }
    std::vector<ByteRange> ranges;
    for (auto [b, written] : buffers) {
      if (plan_.buffers(b).arena() == plan::NVME)
        continue; // a file
      TensorRef t = device(b);
      ranges.push_back({t.data, bytesOf(t), written});
    }
    return ranges;
  }

  /// Orders an instruction touching |ranges| after the copies in flight
  /// whose bytes it touches (it reads or writes a copy's target, or writes
  /// its source): the compute stream waits for them, or for a host kernel
  /// (|host|) the host does.
  Status orderAfterCopies(const std::vector<ByteRange> &ranges, bool host) {
    for (cudaEvent_t done : copies_.takeConflicts(ranges)) {
      if (host)
        ZRT_CUDA(cudaEventSynchronize(done));
      else
        ZRT_CUDA(cudaStreamWaitEvent(ctx_.stream, done, 0));
      freeEvents_.push_back(done);
    }
    return Status::ok();
  }

  bool touchesNvme(const plan::Instruction &inst) const {
    return inst.has_copy() && (plan_.buffers(inst.copy().source()).arena() == plan::NVME ||
                               plan_.buffers(inst.copy().target()).arena() == plan::NVME);
  }

  bool onHost(const plan::Kernel &k) const {
    for (const auto *list : {&k.inputs(), &k.outputs()})
      for (int index : *list)
        if (plan_.buffers(index).arena() != plan::HOST)
          return false;
    return true;
  }
  static size_t bytesOf(const TensorRef &t) { return (size_t)t.numel() * dtypeSize(t.dtype); }

  /// Host <-> device copies ordered on the executor's stream and finished
  /// before returning. (A plain cudaMemcpy runs on the legacy default stream,
  /// which does not order with our non-blocking streams, and a pageable
  /// host-to-device cudaMemcpy may return before the data has landed.)
  Status copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0)
      return Status::ok();
    ZRT_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, ctx_.stream));
    ZRT_CUDA(cudaStreamSynchronize(ctx_.stream));
    return Status::ok();
  }

  /// A kernel without a CUDA implementation yet: its operands are staged to
  /// the host, the CPU kernel runs, the outputs go back.
  Status hostFallback(KernelId id, const KernelCall &deviceCall) {
    KernelCall host = deviceCall;
    std::vector<std::vector<char>> staging(host.in.size() + host.out.size());
    ZRT_CUDA(cudaStreamSynchronize(ctx_.stream));
    size_t slot = 0;
    for (auto *list : {&host.in, &host.out})
      for (TensorRef &t : *list) {
        std::vector<char> &bytes = staging[slot++];
        bytes.resize(bytesOf(t));
        if (!bytes.empty())
          ZRT_RETURN_IF_ERROR(copy(bytes.data(), t.data, bytes.size(), cudaMemcpyDeviceToHost));
        t.data = bytes.data();
      }
    ZRT_RETURN_IF_ERROR(cpuKernel(id).run(host));
    for (size_t o = 0; o < host.out.size(); ++o)
      if (bytesOf(host.out[o]))
        ZRT_RETURN_IF_ERROR(copy(deviceCall.out[o].data, host.out[o].data, bytesOf(host.out[o]),
                                 cudaMemcpyHostToDevice));
    return Status::ok();
  }

  /// Collectives: one rank copies; NCCL between processes; in-process ranks
  /// on the device (deviceCollective), or through the host when they are
  /// spread over several devices.
  Status collective(const plan::Collective &c) {
    TensorRef in = device(c.input()), out = device(c.output());
    const int ranks = groups_.size(c.group());
    if (c.kind() == plan::Collective::LOCAL_SHARD || ranks == 1) {
      size_t bytes = bytesOf(out);
      size_t skip = c.kind() == plan::Collective::LOCAL_SHARD ? bytes * groups_.rank(c.group()) : 0;
      ZRT_CUDA(
          cudaMemcpyAsync(out.data, in.data + skip, bytes, cudaMemcpyDeviceToDevice, ctx_.stream));
      return Status::ok();
    }
    Communicator *comm;
    ZRT_RETURN_IF_ERROR(groups_.get(c.group(), comm));
    ReduceOp rop = c.reduce() == plan::Collective::AVG ? ReduceOp::Avg : ReduceOp::Sum;
    if (StreamCollectives *nccl = comm->streamCollectives()) {
      // One process per GPU: NCCL on the device buffers. A synchronous
      // collective runs on the compute stream; an async one (zero-schedule's
      // start) on the communication stream once the compute stream reaches
      // it, overlapping the kernels that follow until its wait.
      countLaunch(true, "collective");
      CommType type = commTypeOf(in.dtype);
      cudaStream_t stream;
      ZRT_RETURN_IF_ERROR(streamFor(c, stream));
      switch (c.kind()) {
      case plan::Collective::ALL_REDUCE:
        ZRT_RETURN_IF_ERROR(
            nccl->deviceAllReduce(in.data, out.data, in.numel(), type, rop, stream));
        break;
      case plan::Collective::REDUCE_SCATTER:
        ZRT_RETURN_IF_ERROR(
            nccl->deviceReduceScatter(in.data, out.data, in.numel(), type, rop, stream));
        break;
      case plan::Collective::ALL_GATHER:
        ZRT_RETURN_IF_ERROR(nccl->deviceAllGather(in.data, out.data,
                                                  commCount(in.numel(), in.dtype), type, stream));
        break;
      case plan::Collective::ALL_TO_ALL: {
        // NCCL's sends and receives must not overlap: an output over the
        // input goes through stream-ordered scratch.
        size_t bytes = bytesOf(out);
        bool overlap = out.data < in.data + bytes && in.data < out.data + bytes;
        void *dst = out.data;
        if (overlap)
          ZRT_CUDA(cudaMallocAsync(&dst, bytes, stream));
        ZRT_RETURN_IF_ERROR(nccl->deviceAllToAll(in.data, dst, in.numel(), type, stream));
        if (overlap) {
          ZRT_CUDA(cudaMemcpyAsync(out.data, dst, bytes, cudaMemcpyDeviceToDevice, stream));
          ZRT_CUDA(cudaFreeAsync(dst, stream));
        }
        break;
      }
      default:
        return errorf("unknown collective ", (int)c.kind());
      }
      if (c.async()) {
        cudaEvent_t done = event();
        ZRT_CUDA(cudaEventRecord(done, commStream_));
        pending_[c.output()] = done;
      }
      return Status::ok();
    }
    if (comm->sharesAddressSpace() && sameDevice_ != 0 && ranks <= kMaxDeviceRanks)
      return deviceCollective(c, *comm, in, out);
    return hostCollective(c, *comm, in, out);
  }

  /// The stream collective |c| runs on: the compute stream, or for an async
  /// one (zero-schedule's start) the communication stream, once the compute
  /// stream has reached it.
  Status streamFor(const plan::Collective &c, cudaStream_t &stream) {
    stream = ctx_.stream;
    if (!c.async())
      return Status::ok();
    ZRT_RETURN_IF_ERROR(followCompute(commStream_));
    stream = commStream_;
    return Status::ok();
  }

  /// W in-process ranks on one device: the collective runs on the GPU, the
  /// host threads only exchange pointers and events. Each rank records
  /// 'ready' on its stream (the communication stream for an async
  /// collective), waits for every rank's 'ready', computes its own output
  /// from every rank's input (rank-ordered float sums, bit-identical to the
  /// CPU group), records 'done', and waits for every rank's 'done' before
  /// anything after the collective may overwrite its input.
  Status deviceCollective(const plan::Collective &c, Communicator &comm, TensorRef in,
                          TensorRef out) {
    struct Post {
      const void *in;
      cudaEvent_t event;
      int device;
    };
    const int world = comm.size(), rank = comm.rank();
    if (!readyEvent_)
      ZRT_CUDA(cudaEventCreateWithFlags(&readyEvent_, cudaEventDisableTiming));
    DeviceSync &sync = deviceSync_[c.group()];
    if (!sync.done[0])
      for (cudaEvent_t &e : sync.done)
        ZRT_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    cudaStream_t stream;
    ZRT_RETURN_IF_ERROR(streamFor(c, stream));
    ZRT_CUDA(cudaEventRecord(readyEvent_, stream));
    Post mine{in.data, readyEvent_, device_};
    std::vector<char> bytes;
    ZRT_RETURN_IF_ERROR(comm.exchange(&mine, sizeof mine, bytes));
    std::vector<Post> posts(world);
    std::memcpy(posts.data(), bytes.data(), world * sizeof(Post));
    for (const Post &p : posts)
      if (p.device != device_) {
        // Ranks spread over several GPUs of one process: host-staged (every
        // rank sees the same posts, so all take this path from now on).
        sameDevice_ = 0;
        return hostCollective(c, comm, in, out);
      }
    sameDevice_ = 1;
    countLaunch(true, "collective");
    for (int r = 0; r < world; ++r)
      if (r != rank)
        ZRT_CUDA(cudaStreamWaitEvent(stream, posts[r].event, 0));
    std::vector<const void *> inputs(world);
    for (int r = 0; r < world; ++r)
      inputs[r] = posts[r].in;
    // An output that overlaps this rank's input is written once every rank
    // has read the input: through stream-ordered scratch.
    size_t outBytes = bytesOf(out);
    bool overlap = out.data < in.data + bytesOf(in) && in.data < out.data + outBytes;
    char *dst = out.data;
    if (overlap)
      ZRT_CUDA(cudaMallocAsync((void **)&dst, std::max<size_t>(outBytes, 4), stream));
    bool avg = c.reduce() == plan::Collective::AVG;
    CommType type = commTypeOf(in.dtype);
    switch (c.kind()) {
    case plan::Collective::ALL_REDUCE:
      ZRT_RETURN_IF_ERROR(
          launchRankReduce(inputs.data(), world, 0, in.numel(), dst, type, avg, stream));
      break;
    case plan::Collective::REDUCE_SCATTER:
      ZRT_RETURN_IF_ERROR(launchRankReduce(inputs.data(), world, rank * out.numel(), out.numel(),
                                           dst, type, avg, stream));
      break;
    case plan::Collective::ALL_GATHER:
      for (int r = 0; r < world; ++r)
        ZRT_CUDA(cudaMemcpyAsync(dst + r * bytesOf(in), inputs[r], bytesOf(in),
                                 cudaMemcpyDeviceToDevice, stream));
      break;
    case plan::Collective::ALL_TO_ALL: {
      size_t chunk = bytesOf(in) / world;
      for (int r = 0; r < world; ++r)
        ZRT_CUDA(cudaMemcpyAsync(dst + r * chunk,
                                 static_cast<const char *>(inputs[r]) + rank * chunk, chunk,
                                 cudaMemcpyDeviceToDevice, stream));
      break;
    }
    default:
      return errorf("unknown collective ", (int)c.kind());
    }
    // 'done' alternates between two events of the group: a rank re-records
    // one only two of the group's collectives later, when every member has
    // enqueued its waits on it.
    cudaEvent_t done = sync.done[sync.count++ % 2];
    ZRT_CUDA(cudaEventRecord(done, stream));
    Post finished{nullptr, done, device_};
    ZRT_RETURN_IF_ERROR(comm.exchange(&finished, sizeof finished, bytes));
    std::memcpy(posts.data(), bytes.data(), world * sizeof(Post));
    for (int r = 0; r < world; ++r)
      if (r != rank)
        ZRT_CUDA(cudaStreamWaitEvent(stream, posts[r].event, 0));
    if (overlap) {
      ZRT_CUDA(cudaMemcpyAsync(out.data, dst, outBytes, cudaMemcpyDeviceToDevice, stream));
      ZRT_CUDA(cudaFreeAsync(dst, stream));
    }
    if (c.async()) {
      cudaEvent_t complete = event();
      ZRT_CUDA(cudaEventRecord(complete, stream));
      pending_[c.output()] = complete;
    }
    return Status::ok();
  }

  /// Ranks of one process on several devices: staged through the host and
  /// the in-process communicator.
  Status hostCollective(const plan::Collective &c, Communicator &comm, TensorRef in,
                        TensorRef out) {
    countLaunch(false, "collective");
    std::vector<char> hin(bytesOf(in)), hout(bytesOf(out));
    ZRT_CUDA(cudaStreamSynchronize(ctx_.stream));
    ZRT_RETURN_IF_ERROR(copy(hin.data(), in.data, hin.size(), cudaMemcpyDeviceToHost));
    ReduceOp op = c.reduce() == plan::Collective::AVG ? ReduceOp::Avg : ReduceOp::Sum;
    CommType type = commTypeOf(in.dtype);
    switch (c.kind()) {
    case plan::Collective::ALL_REDUCE:
      ZRT_RETURN_IF_ERROR(comm.allReduce(hin.data(), hout.data(), in.numel(), type, op));
      break;
    case plan::Collective::REDUCE_SCATTER:
      ZRT_RETURN_IF_ERROR(comm.reduceScatter(hin.data(), hout.data(), in.numel(), type, op));
      break;
    case plan::Collective::ALL_GATHER:
      ZRT_RETURN_IF_ERROR(
          comm.allGather(hin.data(), hout.data(), commCount(in.numel(), in.dtype), type));
      break;
    case plan::Collective::ALL_TO_ALL:
      ZRT_RETURN_IF_ERROR(comm.allToAll(hin.data(), hout.data(), in.numel(), type));
      break;
    default:
      return errorf("unknown collective ", (int)c.kind());
    }
    ZRT_RETURN_IF_ERROR(copy(out.data, hout.data(), hout.size(), cudaMemcpyHostToDevice));
    return Status::ok();
  }

  int rank_;
  Communicator *comm_;
  CommGroups groups_; // comm_'s subgroups for a plan with a mesh
  int device_;
  CudaContext ctx_;
  char *arenas_[plan::NVME + 1] = {}; // HOST: host_.data; NVME: none (a file)
  int64_t sizes_[plan::NVME + 1] = {};
  int64_t allocated_ = 0;
  Pinned input_, host_;
  mutable std::map<int, std::vector<char>> outputs_;
  cudaStream_t commStream_ = nullptr; // async NCCL collectives
  cudaStream_t copyStream_ = nullptr; // host <-> device copy instructions (copyInstruction)
  CudaContext side_;                  // async kernels (launchBeside): own stream and scratch
  CudaOptions options_;
  InFlightCopies<cudaEvent_t> copies_;            // on the copy stream
  static constexpr size_t kCopyChunk = 64u << 20; // bytes per copy piece
  std::map<int, cudaEvent_t> pending_;            // their completion, by output buffer
  std::vector<cudaEvent_t> freeEvents_, allEvents_;
  // In-process device collectives (deviceCollective).
  int sameDevice_ = -1; // unknown until the first collective
  cudaEvent_t readyEvent_ = nullptr;
  struct DeviceSync {
    cudaEvent_t done[2] = {nullptr, nullptr};
    int64_t count = 0; // the group's collectives so far
  };
  DeviceSync deviceSync_[3];                                      // by plan::Collective::Group
  std::map<std::string, std::vector<cudaEvent_t>> profileEvents_; // zrun --profile
  std::map<std::string, ProgramGraph> graphs_;                    // --cuda-graphs
  std::vector<cudaEvent_t> *marks_ = nullptr; // this run's profile events, if profiling
  // --trace: the host clock's anchor, the side streams' slices of the program
  // running, and the events they use (reused from program to program).
  cudaEvent_t traceOrigin_ = nullptr;
  std::vector<SideMark> sideMarks_;
  std::vector<cudaEvent_t> traceEvents_;
  size_t traceEventsUsed_ = 0;
  int issuedAhead_ = -1; // the upload a chunked host kernel already issued

  /// Makes |stream| wait for what the compute stream has been given so far
  /// (the copy, communication and side streams start their work after it).
  Status followCompute(cudaStream_t stream) {
    cudaEvent_t reached = event();
    ZRT_CUDA(cudaEventRecord(reached, ctx_.stream));
    ZRT_CUDA(cudaStreamWaitEvent(stream, reached, 0));
    freeEvents_.push_back(reached);
    return Status::ok();
  }

  /// An event for ordering the two streams (reused; recording one again is
  /// safe once the stream that waited on it has been enqueued).
  cudaEvent_t event() {
    if (!freeEvents_.empty()) {
      cudaEvent_t e = freeEvents_.back();
      freeEvents_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    allEvents_.push_back(e);
    return e;
  }
};

} // namespace

std::unique_ptr<ExecutorBase> makeCudaExecutor(const plan::Plan &plan, int rank, Communicator *comm,
                                               int device, const CudaOptions &options,
                                               Status &status) {
  std::string why;
  if (!cudaUsable(why)) {
    status = errorf("--backend cuda: ", why);
    return nullptr;
  }
  if (device < 0) {
    int count = 1;
    cudaGetDeviceCount(&count);
    device = rank % count;
  }
  captureBaseline(device);
  auto executor = std::make_unique<CudaExecutor>(plan, rank, comm, device, options);
  status = executor->init();
  if (!status)
    return nullptr;
  return executor;
}

} // namespace zrt
