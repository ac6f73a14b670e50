//===- Interpreter.h - the instruction walk both backends share --*- C++ -*-===//
//
// A plan's program is a straight line of kernels, copies, collectives and
// waits. The walk over it exists once, here: an Interpreter resolves each
// program the first time it runs (every kernel name to its KernelId, every
// operand to a TensorRef into the backend's memory, the location for error
// messages), then each run is a loop over those steps that calls the
// backend's hook for the step's kind. The CPU executor (exec/Executor.h)
// and the CUDA executor (cuda/CudaExecutor.cu) are such backends; zrun and
// the trainer see only ExecutorBase.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_EXEC_INTERPRETER_H
#define ZRT_EXEC_INTERPRETER_H

#include "cpu/Kernels.h"
#include "plan/plan.pb.h"
#include "support/Status.h"
#include "support/SwapFile.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace zrt {

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
  /// the host arena's offloaded state, then (|withNvme|) the NVMe arena's,
  /// for checkpoints, and back. Checkpoints of NVMe plans move the NVMe part
  /// with readNvme/writeNvme a piece at a time instead (it may not fit in
  /// memory).
  virtual Status saveState(std::vector<char> &bytes, bool withNvme = true) = 0;
  virtual Status loadState(const std::vector<char> &bytes, bool withNvme = true) = 0;
  /// Writes |bytes| at |offset| of those bytes (a range within one arena's
  /// part): how --weights go in a tensor at a time, without a copy of the
  /// whole state in memory.
  virtual Status writeState(int64_t offset, const char *data, int64_t bytes) = 0;
  /// A plan with an NVMe arena (zcc --offload-optimizer nvme): opens rank
  /// |rank|'s swap file in |dir| (empty: the plan's nvme_path) before any
  /// program runs or state is loaded.
  virtual Status openNvme(const std::string &dir, int rank) = 0;
  /// Writes |bytes| at byte |offset| of the NVMe arena (the weights of
  /// parameter shards kept there, offload_param nvme).
  virtual Status writeNvme(int64_t offset, const char *data, int64_t bytes) = 0;
  /// Reads |bytes| at byte |offset| of the NVMe arena (checkpoints).
  virtual Status readNvme(int64_t offset, char *data, int64_t bytes) = 0;
  /// The swap file openNvme opened (null without one).
  virtual const SwapFile *swapFile() const { return nullptr; }
  /// What the backend chose by measuring (zrun --gemm-tune), as lines to
  /// print; empty if nothing.
  virtual std::vector<std::string> tuningReport() const { return {}; }

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

  /// zrun --trace: while a step is traced, every instruction that runs is a
  /// slice on one of the rank's tracks, timed as --profile times it (the
  /// compute track holds every instruction, a collective's or wait's slice
  /// being the time the compute stream stood for it); an async collective
  /// or a host <-> device copy is also a slice on the stream that ran it.
  /// Times in microseconds of the host's monotonic clock (the CUDA backend
  /// anchors its events to it at each program's start).
  enum class Track { Compute = 0, Communication = 1, Copy = 2 };
  struct TraceSlice {
    int64_t step;
    const plan::Program *program;
    int index;
    Track track;
    double startUs, durUs;
  };
  /// Traces what runs from now on as step |step|; -1 stops tracing.
  void traceStep(int64_t step) { traceStep_ = step; }
  /// The slices recorded so far, in no particular order.
  std::vector<TraceSlice> takeTrace() { return std::move(trace_); }

protected:
  /// Whether instructions are timed (--profile, or a traced step).
  bool timing() const { return profiling_ || traceStep_ >= 0; }
  bool profiling_ = false;
  Profile profile_;
  int64_t traceStep_ = -1;
  std::vector<TraceSlice> trace_;
};

/// Microseconds on the monotonic clock every rank's trace is stamped with.
double traceClockUs();

/// The instruction walk over a backend's hooks.
class Interpreter : public ExecutorBase {
public:
  /// The program named |name|, or null.
  const plan::Program *program(const std::string &name) const;

  Status openNvme(const std::string &dir, int rank) override;
  Status writeNvme(int64_t offset, const char *data, int64_t bytes) override;
  Status readNvme(int64_t offset, char *data, int64_t bytes) override;
  const SwapFile *swapFile() const override { return nvme_.get(); }

protected:
  explicit Interpreter(const plan::Plan &plan) : plan_(plan) {}

  /// One instruction, resolved.
  struct Step {
    enum Kind { Kernel, Copy, Collective, Wait } kind;
    const plan::Program *program;
    int index; // in its program
    const plan::Instruction *inst;
    KernelId kernel{};    // Kernel: the kernel
    KernelCall call;      // Kernel: operands in the backend's memory
    std::string location; // " (ONNX node)" or empty
  };

  /// Runs |program|'s steps in order; an error names the program, the
  /// instruction, its ONNX node and (for kernels) the kernel.
  Status walk(const plan::Program &program);

  /// The view of buffer |index| that kernels of this backend read and write
  /// (stable for the executor's life: steps keep it).
  virtual TensorRef operand(int index) const = 0;
  /// Hooks, per step. before/after bracket every step (profiling; the CUDA
  /// backend orders a step after the copies in flight that touch it).
  virtual Status beforeStep(const Step &) { return Status::ok(); }
  virtual void afterStep(const Step &) {}
  virtual Status runKernel(const Step &step) = 0;
  virtual Status runCopy(const Step &step) = 0;
  virtual Status runCollective(const Step &step) = 0;
  virtual Status runWait(const Step &step) = 0;
  /// Appended to the place in error messages (" on the GPU").
  virtual const char *where() const { return ""; }

  /// |program|'s steps, resolved on first use.
  const std::vector<Step> &prepared(const plan::Program &program);

  /// zero-fuse-optimizer: the plan's `refresh` program recomputes state that
  /// derives from the parameters (their 16-bit copies). It runs before the
  /// next program whenever the state was written from outside the programs:
  /// the initial values, and every loadState (weights, a checkpoint).
  bool derivedStateStale_ = true;
  Status refreshDerivedState(const plan::Program &next);

  /// Writes arena |arena|'s initial contents for rank |rank| into |base|
  /// (host memory laid out as the arena, zeroed): fills first, then data
  /// (a parameter inside a zero-filled flat bucket overlaps the bucket and
  /// brings its own bytes); a sharded buffer's data is every rank's, of
  /// which this rank takes its slice.
  void writeInitialContents(int arena, int rank, char *base) const;
  /// The same a buffer at a time, for an arena that starts zeroed and is
  /// not host memory (the CUDA backend's state and constants): |write|
  /// gets each buffer's bytes at its offset (zero fills skipped), so no
  /// image of the whole arena is built on the host.
  Status writeInitialContents(
      int arena, int rank,
      const std::function<Status(int64_t offset, const char *data, int64_t bytes)> &write) const;

  /// A copy between the NVMe arena and host memory: |host| is the host
  /// arena's bytes of the copy's other buffer. An async copy completes at
  /// nvmeWait on its target (|found|: whether one was in flight).
  Status nvmeCopy(const Step &step, char *host);
  Status nvmeWait(int target, bool &found);
  /// Checkpoints: the NVMe arena's bytes appended to |bytes|, and written
  /// back from |data|.
  Status saveNvme(std::vector<char> &bytes);
  Status loadNvme(const char *data);

  const plan::Plan &plan_;
  std::unique_ptr<SwapFile> nvme_;
  std::map<int, int64_t> nvmePending_; // async NVMe copies by target buffer

private:
  std::map<const plan::Program *, std::vector<Step>> prepared_;
};

} // namespace zrt

#endif // ZRT_EXEC_INTERPRETER_H
