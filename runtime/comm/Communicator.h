//===- Communicator.h - data-parallel collectives ----------------*- C++ -*-===//
//
// What the executor needs from a data-parallel group: all-reduce,
// reduce-scatter and all-gather on float32 buffers, plus a host barrier.
// Implementations: InProcessGroup (W ranks as threads of one process) here;
// NCCL (one process per GPU) in runtime/cuda/Nccl.h.
//
// Results are deterministic and bit-identical on every rank: each element is
// summed over ranks 0, 1, ..., W-1 in that order.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_COMM_COMMUNICATOR_H
#define ZRT_COMM_COMMUNICATOR_H

#include "support/Status.h"

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zrt {

enum class ReduceOp { Sum, Avg };

/// Collectives on device buffers, enqueued on a stream (|stream| is a
/// cudaStream_t; no CUDA types here): what a communicator between processes
/// with one GPU each (NCCL) offers the CUDA backend. Asynchronous: wait()
/// completes them.
class StreamCollectives {
public:
  virtual ~StreamCollectives() = default;
  virtual Status deviceAllReduce(const float *in, float *out, int64_t n, ReduceOp op,
                                 void *stream) = 0;
  virtual Status deviceReduceScatter(const float *in, float *out, int64_t n, ReduceOp op,
                                     void *stream) = 0;
  virtual Status deviceAllGather(const float *in, float *out, int64_t n, void *stream) = 0;
  /// Waits for |stream|, reporting the collectives' errors (|what|: for
  /// messages).
  virtual Status wait(void *stream, const char *what) = 0;
  /// Brackets work that involves the peers (a program): a watchdog may end
  /// work that outlives the communicator's timeout.
  virtual void begin(const std::string &what) = 0;
  virtual void end() = 0;
};

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// out = reduce over ranks of in (n elements each; out may be in).
  virtual Status allReduce(const float *in, float *out, int64_t n, ReduceOp op) = 0;
  /// out (n/W elements) = chunk `rank` of the reduction of in (n elements).
  virtual Status reduceScatter(const float *in, float *out, int64_t n, ReduceOp op) = 0;
  /// out (n*W elements) = every rank's in (n elements), in rank order.
  virtual Status allGather(const float *in, float *out, int64_t n) = 0;
  /// Waits for every rank (host-side synchronization of the trainer).
  virtual Status barrier() = 0;
  /// Ranks that share an address space (in-process ranks): every rank posts
  /// |bytes| bytes at |mine| and gets every rank's, concatenated in rank
  /// order. What the CUDA backend exchanges device pointers and events
  /// through, so that in-process collectives run on the GPU.
  virtual bool sharesAddressSpace() const { return false; }
  virtual Status exchange(const void *mine, size_t bytes, std::vector<char> &all) {
    return Status::error("this communicator cannot exchange pointers");
  }
  /// Collectives on device buffers and streams, if this communicator has
  /// them (NCCL); null: host buffers (or exchange(), in one process).
  virtual StreamCollectives *streamCollectives() { return nullptr; }
  /// Ends every rank's pending and future calls with an error: a rank that
  /// fails calls it so that the others do not wait forever.
  virtual void abort(const std::string &why) = 0;
};

struct LaunchEnv;
/// This process as rank |env.rank| of a CPU job of processes: Gloo over
/// TCP, meeting through zrun's rendezvous (comm/Gloo.cpp).
Status makeGlooCommunicator(const LaunchEnv &env, double timeoutSeconds,
                            std::unique_ptr<Communicator> &out);

/// The shared state of W in-process ranks. Create one, then one
/// communicator per rank (each used by one thread).
class InProcessGroup {
public:
  explicit InProcessGroup(int size);
  std::unique_ptr<Communicator> communicator(int rank);

  int size() const { return size_; }

private:
  friend class InProcessCommunicator;
  /// Blocks until all ranks arrive (or the group is aborted).
  Status arrive();
  void abort(const std::string &why);

  int size_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int waiting_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::string why_;
  // Per rank: the buffer it shares in the current collective (or exchange),
  // and scratch.
  std::vector<const float *> inputs_;
  std::vector<const char *> posted_;
  std::vector<std::vector<float>> scratch_;
};

} // namespace zrt

#endif // ZRT_COMM_COMMUNICATOR_H
