//===- CudaExecutor.h - run plans on an NVIDIA GPU ---------------*- C++ -*-===//
//
// The CUDA backend of zrun (`--backend cuda`). The header has no CUDA types:
// zrun and the tests include it whether or not CUDA was built in.
//
// One rank = one executor on one device: every arena is one cudaMalloc; the
// input arena has a pinned host mirror that the trainer writes (copied to the
// device when a program starts), and program outputs are copied back to
// pinned host memory when it ends. Instructions run in order on one stream:
// kernels with a CUDA implementation (cuda/KernelTable.cu) launch there; the
// others run on the host on staged copies of their buffers (the host
// fallback: correct, slow, counted in stats(), and the list shrinks as
// kernels are ported). Collectives: NCCL between processes (one per GPU);
// W in-process ranks on one device run theirs as device kernels and copies,
// ordered by events that the rank threads exchange (ranks of one process on
// several devices stage through the host).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_CUDAEXECUTOR_H
#define ZRT_CUDA_CUDAEXECUTOR_H

#include "comm/Rendezvous.h"
#include "exec/Executor.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace zrt {

/// Whether this zrun has the CUDA backend and a device it can use; if not,
/// why (for the error message, and for tests that skip).
bool cudaUsable(std::string &why);

/// Per-kernel launch counts of the CUDA executors of this process: native
/// (a CUDA kernel) and host fallback.
/// deviceBytes: per device, the most device memory this process's
/// allocations used when a program ended (cudaMemGetInfo against the free
/// memory before the first allocation, after the CUDA context existed).
struct CudaStats {
  std::map<std::string, int64_t> native, fallback;
  std::map<int, int64_t> deviceBytes;
};
CudaStats cudaStats();

/// Whether the CUDA backend runs kernel |k| of |plan| natively (false: the
/// host fallback; also false without the CUDA backend). Needs no GPU.
bool cudaRunsNatively(const plan::Plan &plan, const plan::Kernel &k);

/// The NCCL communicator of a launched multi-process job (cuda/Nccl.h).
Status makeNcclCommunicator(const LaunchEnv &env, int device, double timeoutSeconds,
                            std::unique_ptr<Communicator> &out);

/// The collectives zrun comm-bench times.
enum class BenchCollective { AllReduce, AllGather, ReduceScatter };

/// One comm-bench call on this rank: the elements of the whole buffer
/// (|bytes| of |type|), of its input and of its output, and the input
/// (rank + 1 in every element).
struct BenchCall {
  BenchCollective op;
  CommType type;
  int world;
  int64_t total, inElems, outElems;
  std::vector<char> input;
  BenchCall(BenchCollective op, int64_t bytes, CommType type, int world, int rank)
      : op(op), type(type), world(world), total(bytes / commTypeBytes(type)),
        inElems(op == BenchCollective::AllGather ? total / world : total),
        outElems(op == BenchCollective::ReduceScatter ? total / world : total),
        input(inElems * commTypeBytes(type)) {
    std::vector<float> value(inElems, (float)(rank + 1));
    narrowComm(value.data(), input.data(), 0, inElems, type);
  }
  /// Whether |output| holds what the collective gives: the sum 1 + ... + W
  /// everywhere (small integers: exact in every type, whatever the order),
  /// or each rank's value in its place.
  bool correct(const void *output) const {
    std::vector<float> got(outElems);
    widenComm(output, got.data(), outElems, type);
    const float sum = (float)world * (world + 1) / 2;
    for (int64_t i = 0; i < outElems; ++i)
      if (got[i] != (op == BenchCollective::AllGather ? (float)(i / inElems + 1) : sum))
        return false;
    return true;
  }
};

/// zrun comm-bench on this rank's GPU: |iters| calls of |op| (after
/// |warmup|) through |comm|'s stream collectives (NCCL) on |bytes| bytes of
/// |type| -- the whole buffer, as nccl-tests counts it: all-reduce's,
/// all-gather's output, reduce-scatter's input -- timed with events;
/// |seconds| the mean a call. Each rank's input holds rank + 1, and
/// |correct| says whether every element of the output is the sum (or the
/// gathered rank) it must be.
Status benchDeviceCollective(Communicator &comm, BenchCollective op, int64_t bytes, CommType type,
                             int warmup, int iters, double &seconds, bool &correct);

/// zrun's options of the CUDA backend (docs/cuda.md).
struct CudaOptions {
  /// --cuda-graphs: a one-rank program of native kernels and device copies
  /// runs as a CUDA graph captured on its second run (measured: no faster on
  /// GPT-2 124M, whose step is GPU-bound; off by default).
  bool graphs = false;
  /// --offload-chunk N: elements per chunk of the host optimizer of
  /// zero-offload (DeepSpeed's sub_group_size); 0: whole kernels.
  int64_t offloadChunk = 16ll << 20;
  /// --gemm-tune: time the cuBLASLt heuristic's best 8 algorithms for each
  /// GEMM shape on its first call and keep the fastest (off by default: the
  /// choice rests on timings, so two runs may pick differently and differ in
  /// the last bits).
  bool gemmTune = false;
};

/// A rank's executor on device |device| (rank % device count by default).
std::unique_ptr<ExecutorBase> makeCudaExecutor(const plan::Plan &plan, int rank, Communicator *comm,
                                               int device, const CudaOptions &options,
                                               Status &status);

} // namespace zrt

#endif // ZRT_CUDA_CUDAEXECUTOR_H
