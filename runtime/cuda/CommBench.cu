//===- CommBench.cu - zrun comm-bench on the GPU ---------------------------===//
//
// The device half of zrun comm-bench (runtime/run/CommBench.cpp): one
// collective on this rank's GPU through the communicator's stream
// collectives -- the calls the CUDA executor makes for ZeRO's gathers and
// reductions -- timed with events, its result checked on the host.
//
//===----------------------------------------------------------------------===//
#include "cuda/CudaCheck.h"
#include "cuda/CudaExecutor.h"

#include <cuda_runtime.h>

#include <vector>

namespace zrt {
namespace {

/// Device memory, a stream and two events, released however the bench ends.
struct BenchResources {
  void *in = nullptr, *out = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~BenchResources() {
    cudaFree(in);
    cudaFree(out);
    if (start)
      cudaEventDestroy(start);
    if (stop)
      cudaEventDestroy(stop);
    if (stream)
      cudaStreamDestroy(stream);
  }
};

} // namespace

Status benchDeviceCollective(Communicator &comm, BenchCollective op, int64_t bytes, CommType type,
                             int warmup, int iters, double &seconds, bool &correct) {
  StreamCollectives *sc = comm.streamCollectives();
  if (!sc)
    return errorf("comm-bench --backend cuda: this communicator has no device collectives "
                  "(launch one process per GPU: --nproc-per-node N)");
  const BenchCall c(op, bytes, type, comm.size(), comm.rank());
  const int64_t es = commTypeBytes(type);
  BenchResources r;
  ZRT_CUDA(cudaMalloc(&r.in, c.inElems * es));
  ZRT_CUDA(cudaMalloc(&r.out, c.outElems * es));
  ZRT_CUDA(cudaMemcpy(r.in, c.input.data(), c.inElems * es, cudaMemcpyHostToDevice));
  ZRT_CUDA(cudaMemset(r.out, 0, c.outElems * es));
  ZRT_CUDA(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  ZRT_CUDA(cudaEventCreate(&r.start));
  ZRT_CUDA(cudaEventCreate(&r.stop));
  auto call = [&]() -> Status {
    switch (op) {
    case BenchCollective::AllReduce:
      return sc->deviceAllReduce(r.in, r.out, c.total, type, ReduceOp::Sum, r.stream);
    case BenchCollective::AllGather:
      return sc->deviceAllGather(r.in, r.out, c.inElems, type, r.stream);
    case BenchCollective::ReduceScatter:
      return sc->deviceReduceScatter(r.in, r.out, c.total, type, ReduceOp::Sum, r.stream);
    }
    return Status::ok();
  };
  sc->begin("comm-bench");
  Status s = Status::ok();
  for (int i = 0; i < warmup && s; ++i)
    s = call();
  if (s)
    s = cudaStatus(cudaEventRecord(r.start, r.stream), "cudaEventRecord", __FILE__, __LINE__);
  for (int i = 0; i < iters && s; ++i)
    s = call();
  if (s)
    s = cudaStatus(cudaEventRecord(r.stop, r.stream), "cudaEventRecord", __FILE__, __LINE__);
  if (s)
    s = sc->wait(r.stream, "comm-bench");
  sc->end();
  ZRT_RETURN_IF_ERROR(s);
  float ms = 0;
  ZRT_CUDA(cudaEventElapsedTime(&ms, r.start, r.stop));
  seconds = ms / 1e3 / iters;
  std::vector<char> out(c.outElems * es);
  ZRT_CUDA(cudaMemcpy(out.data(), r.out, out.size(), cudaMemcpyDeviceToHost));
  correct = c.correct(out.data());
  return Status::ok();
}

} // namespace zrt
