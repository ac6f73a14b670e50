//===- Nccl.h - NCCL across processes, one GPU each -------------*- C++ -*-===//
//
// The communicator of multi-process runs (`zrun train --nproc-per-node N`,
// or under torchrun/DeepSpeed/Slurm/OpenMPI launchers): one process per GPU,
// NCCL between them, the unique id exchanged through the TCP rendezvous.
// libnccl is loaded when first needed (dlopen), so zrun runs without it
// elsewhere.
//
// The CUDA executor calls the device-side collectives on its stream; the
// trainer uses the host-side Communicator interface (a loss average, a
// barrier), staged through a small device buffer. Every wait has a deadline:
// an NCCL error or a peer that never answers aborts the communicator and
// ends the process with a message naming the rank and the operation.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_NCCL_H
#define ZRT_CUDA_NCCL_H

#include "comm/Communicator.h"
#include "comm/Rendezvous.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace zrt {

class NcclCommunicator : public Communicator, public StreamCollectives {
public:
  /// Joins the job: the rendezvous (rank 0 makes the NCCL id), then
  /// ncclCommInitRank on |device|.
  static Status create(const LaunchEnv &env, int device, double timeoutSeconds,
                       std::unique_ptr<NcclCommunicator> &out);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return world_; }
  // Host buffers (the trainer's scalars; float32 only).
  using Communicator::allGather;
  using Communicator::allReduce;
  using Communicator::reduceScatter;
  Status allReduce(const void *in, void *out, int64_t n, CommType type, ReduceOp op) override;
  Status reduceScatter(const void *in, void *out, int64_t n, CommType type, ReduceOp op) override;
  Status allGather(const void *in, void *out, int64_t n, CommType type) override;
  Status allToAll(const void *in, void *out, int64_t n, CommType type) override;
  Status barrier() override;
  /// Aborts this communicator and the subgroups split from it.
  void abort(const std::string &why) override;
  /// ncclCommSplit: collective over every rank of this (world)
  /// communicator, each asking for its own group of one partition. The
  /// subgroup has no watchdog of its own: the world's watches the programs,
  /// and aborting the world aborts it.
  Status subgroup(const std::vector<int> &ranks, std::unique_ptr<Communicator> &out) override;

  StreamCollectives *streamCollectives() override { return this; }
  // Device buffers, on |stream| (asynchronous; wait() completes them).
  Status deviceAllReduce(const void *in, void *out, int64_t n, CommType type, ReduceOp op,
                         void *stream) override;
  Status deviceReduceScatter(const void *in, void *out, int64_t n, CommType type, ReduceOp op,
                             void *stream) override;
  Status deviceAllGather(const void *in, void *out, int64_t n, CommType type,
                         void *stream) override;
  /// A send and a receive per peer in one NCCL group (every NCCL with
  /// point-to-point, 2.7 on; ncclAlltoAll is 2.28's).
  Status deviceAllToAll(const void *in, void *out, int64_t n, CommType type, void *stream) override;
  /// Waits for |stream| with the deadline, checking NCCL's async errors.
  Status wait(void *stream, const char *what) override;

  /// Brackets work that involves the peers (a program, a host collective).
  /// A watchdog thread aborts the communicator when one lasts longer than
  /// the timeout (a dead peer leaves NCCL's kernels spinning, and the host
  /// can block launching behind them), and ends the process if aborting does
  /// not free it: a run never hangs.
  void begin(const std::string &what) override;
  void end() override;

private:
  NcclCommunicator() = default;
  void watch();
  void abortChildren(const std::string &why); // watchMutex_ held
  NcclCommunicator *parent_ = nullptr;        // a subgroup's world
  std::vector<NcclCommunicator *> children_;  // the subgroups (watchMutex_)
  int rank_ = 0, world_ = 1, device_ = 0;
  double timeout_ = 300;
  void *comm_ = nullptr;   // ncclComm_t
  void *stream_ = nullptr; // for the host-side calls
  float *scratch_ = nullptr;
  int64_t scratchFloats_ = 0;
  // The watchdog.
  std::mutex watchMutex_;
  std::condition_variable watchCv_;
  std::chrono::steady_clock::time_point busySince_;
  std::string busyWhat_;
  bool busy_ = false, stopWatch_ = false;
  std::atomic<bool> aborted_{false};
  std::string abortedWhy_;
  std::thread watchdog_;
};

} // namespace zrt

#endif // ZRT_CUDA_NCCL_H
