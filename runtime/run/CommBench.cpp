//===- CommBench.cpp - zrun comm-bench: collectives at a sweep of sizes ---===//
//
// nccl-tests is not on our machines, so this is its all_reduce / all_gather
// / reduce_scatter sweep through zrun's own communicators: NCCL on device
// buffers (the calls the CUDA executor makes for ZeRO, runtime/cuda/
// CommBench.cu) or Gloo on host buffers. Sizes count the whole buffer as
// nccl-tests does; bus bandwidth applies its factors (2 (W - 1) / W for
// all-reduce, (W - 1) / W for the others), so the figures compare with
// nccl-tests' and with zrun --profile's collectives.
//
//===----------------------------------------------------------------------===//
#include "run/Run.h"

#include <chrono>
#include <cstring>

namespace zrt {
namespace {

/// The host communicator's form of benchDeviceCollective: host buffers,
/// the wall clock after a barrier.
Status benchHostCollective(Communicator &comm, BenchCollective op, int64_t bytes, CommType type,
                           int warmup, int iters, double &seconds, bool &correct) {
  BenchCall c(op, bytes, type, comm.size(), comm.rank());
  std::vector<char> out(c.outElems * commTypeBytes(type));
  auto call = [&]() -> Status {
    switch (op) {
    case BenchCollective::AllReduce:
      return comm.allReduce(c.input.data(), out.data(), c.total, type, ReduceOp::Sum);
    case BenchCollective::AllGather:
      return comm.allGather(c.input.data(), out.data(), c.inElems, type);
    case BenchCollective::ReduceScatter:
      return comm.reduceScatter(c.input.data(), out.data(), c.total, type, ReduceOp::Sum);
    }
    return Status::ok();
  };
  for (int i = 0; i < warmup; ++i)
    ZRT_RETURN_IF_ERROR(call());
  ZRT_RETURN_IF_ERROR(comm.barrier());
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    ZRT_RETURN_IF_ERROR(call());
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
  correct = c.correct(out.data());
  return Status::ok();
}

Status sweep(const CommBenchOptions &o, Communicator &comm, std::vector<CommBenchRow> &rows) {
  const int world = comm.size();
  const int64_t unit = world * commTypeBytes(o.type); // every rank's share whole
  for (BenchCollective op :
       {BenchCollective::AllReduce, BenchCollective::AllGather, BenchCollective::ReduceScatter})
    for (int64_t size : o.sizes) {
      CommBenchRow row;
      row.op = op;
      row.bytes = size / unit * unit;
      if (row.bytes == 0)
        return errorf("comm-bench --sizes: ", size, " bytes is less than one ",
                      commTypeName(o.type), " element for each of the ", world, " ranks");
      bool correct = false;
      ZRT_RETURN_IF_ERROR(o.backend == "cuda"
                              ? benchDeviceCollective(comm, op, row.bytes, o.type, o.warmup,
                                                      o.iters, row.seconds, correct)
                              : benchHostCollective(comm, op, row.bytes, o.type, o.warmup, o.iters,
                                                    row.seconds, correct));
      // Every rank's mean time, averaged; a failed check on any rank fails.
      float both[2] = {(float)row.seconds, correct ? 0.0f : 1.0f};
      ZRT_RETURN_IF_ERROR(comm.allReduce(both, both, 2, ReduceOp::Sum));
      row.seconds = both[0] / world;
      row.correct = both[1] == 0;
      row.algbw = row.bytes / row.seconds;
      double factor = op == BenchCollective::AllReduce ? 2.0 * (world - 1) / world
                                                       : (double)(world - 1) / world;
      row.busbw = row.algbw * factor;
      rows.push_back(row);
    }
  return Status::ok();
}

} // namespace

const char *benchCollectiveName(BenchCollective op) {
  return op == BenchCollective::AllReduce   ? "all_reduce"
         : op == BenchCollective::AllGather ? "all_gather"
                                            : "reduce_scatter";
}

Status commBench(const CommBenchOptions &options, const std::optional<LaunchEnv> &job,
                 std::vector<CommBenchRow> &rows) {
  if (options.backend != "cuda" && options.backend != "cpu")
    return errorf("comm-bench --backend ", options.backend, ": cpu or cuda");
  if (options.sizes.empty())
    return errorf("comm-bench --sizes: no size given");
  // Alone, this process is a job of one rank: the same communicator, so
  // the same calls, as a launched rank's.
  std::string why;
  if (options.backend == "cuda" && !cudaUsable(why))
    return errorf("comm-bench --backend cuda: ", why,
                  " (--backend cpu times Gloo's collectives on host buffers)");
  LaunchEnv env = job ? *job : LaunchEnv{};
  std::unique_ptr<Communicator> comm;
  ZRT_RETURN_IF_ERROR(options.backend == "cuda"
                          ? makeNcclCommunicator(env, -1, options.commTimeout, comm)
                          : makeGlooCommunicator(env, options.commTimeout, comm));
  Status s = sweep(options, *comm, rows);
  if (!s) {
    comm->abort("comm-bench failed");
    std::string prefix = "rank " + std::to_string(env.rank) + ": ";
    if (s.message().rfind(prefix, 0) != 0)
      s = Status::error(prefix + s.message());
  }
  return s;
}

} // namespace zrt
