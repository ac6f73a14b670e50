//===- Communicator.h - data-parallel collectives ----------------*- C++ -*-===//
//
// What the executor needs from a data-parallel group: all-reduce,
// reduce-scatter and all-gather on float32, bfloat16 or float16 buffers
// (zcc --comm-dtype), all-gather and all-to-all of int8 ones (ZeRO++'s
// quantized communication), plus a host barrier.
// Implementations: InProcessGroup (W ranks as threads of one process) here;
// NCCL (one process per GPU) in runtime/cuda/Nccl.h.
//
// Results are deterministic and bit-identical on every rank: each element is
// summed over ranks 0, 1, ..., W-1 in that order. 16-bit elements are summed
// in float32 and rounded once (to nearest even) where the implementation
// allows it (in-process ranks, Gloo); NCCL sums 16-bit data in its own ring
// or tree order.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_COMM_COMMUNICATOR_H
#define ZRT_COMM_COMMUNICATOR_H

#include "support/DType.h"
#include "support/NarrowFloat.h"
#include "support/Status.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zrt {

enum class ReduceOp { Sum, Avg };

/// The element type of a collective's buffers (I8: all-gathers and
/// all-to-alls of blockwise quantized tensors, zcc --quantized-weights and
/// --quantized-gradients; no reductions).
enum class CommType { F32, BF16, F16, I8 };
inline int64_t commTypeBytes(CommType t) {
  return t == CommType::F32 ? 4 : t == CommType::I8 ? 1 : 2;
}
inline const char *commTypeName(CommType t) {
  return t == CommType::F32    ? "float32"
         : t == CommType::BF16 ? "bfloat16"
         : t == CommType::F16  ? "float16"
                               : "int8";
}
/// The collective element type of a buffer's dtype (F32, BF16, F16 or I8;
/// int64, gathered only, moves as its bytes: I8; the plan loader refuses
/// others).
inline CommType commTypeOf(DType d) {
  return d == DType::BF16                    ? CommType::BF16
         : d == DType::F16                   ? CommType::F16
         : d == DType::I8 || d == DType::I64 ? CommType::I8
                                             : CommType::F32;
}
/// How many elements of commTypeOf(d) |n| elements of |d| are.
inline int64_t commCount(int64_t n, DType d) {
  return n * (int64_t)dtypeSize(d) / commTypeBytes(commTypeOf(d));
}

/// out[0 .. n) = |in|'s n elements of |type| as float32: what the host
/// communicators reduce 16-bit buffers in.
inline void widenComm(const void *in, float *out, int64_t n, CommType type) {
  if (type == CommType::F32)
    std::copy_n(static_cast<const float *>(in), n, out);
  else if (type == CommType::BF16)
    std::copy_n(static_cast<const BF16 *>(in), n, out);
  else
    std::copy_n(static_cast<const F16 *>(in), n, out);
}
/// Elements [at, at + n) of |out| (of |type|) = |in| rounded to it (to
/// nearest even: once, after the float32 reduction).
inline void narrowComm(const float *in, void *out, int64_t at, int64_t n, CommType type) {
  if (type == CommType::F32)
    std::copy_n(in, n, static_cast<float *>(out) + at);
  else if (type == CommType::BF16)
    std::copy_n(in, n, static_cast<BF16 *>(out) + at);
  else
    std::copy_n(in, n, static_cast<F16 *>(out) + at);
}

/// Collectives on device buffers, enqueued on a stream (|stream| is a
/// cudaStream_t; no CUDA types here): what a communicator between processes
/// with one GPU each (NCCL) offers the CUDA backend. Asynchronous: wait()
/// completes them.
class StreamCollectives {
public:
  virtual ~StreamCollectives() = default;
  virtual Status deviceAllReduce(const void *in, void *out, int64_t n, CommType type, ReduceOp op,
                                 void *stream) = 0;
  virtual Status deviceReduceScatter(const void *in, void *out, int64_t n, CommType type,
                                     ReduceOp op, void *stream) = 0;
  virtual Status deviceAllGather(const void *in, void *out, int64_t n, CommType type,
                                 void *stream) = 0;
  /// |in| and |out| do not overlap.
  virtual Status deviceAllToAll(const void *in, void *out, int64_t n, CommType type,
                                void *stream) = 0;
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
  /// out = reduce over ranks of in (n elements of |type| each; out may be
  /// in).
  virtual Status allReduce(const void *in, void *out, int64_t n, CommType type, ReduceOp op) = 0;
  /// out (n/W elements) = chunk `rank` of the reduction of in (n elements).
  virtual Status reduceScatter(const void *in, void *out, int64_t n, CommType type,
                               ReduceOp op) = 0;
  /// out (n*W elements) = every rank's in (n elements), in rank order.
  virtual Status allGather(const void *in, void *out, int64_t n, CommType type) = 0;
  /// out chunk r (n/W elements) = rank r's in chunk `rank` (in and out of n
  /// elements; out may overlap in).
  virtual Status allToAll(const void *in, void *out, int64_t n, CommType type) = 0;
  /// The float32 forms (the trainer's scalars).
  Status allReduce(const float *in, float *out, int64_t n, ReduceOp op) {
    return allReduce(in, out, n, CommType::F32, op);
  }
  Status reduceScatter(const float *in, float *out, int64_t n, ReduceOp op) {
    return reduceScatter(in, out, n, CommType::F32, op);
  }
  Status allGather(const float *in, float *out, int64_t n) {
    return allGather(in, out, n, CommType::F32);
  }
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
  /// A communicator among |ranks| (ascending ranks of this group, this rank
  /// among them), its rank this rank's index there: the groups of a device
  /// mesh (the ranks of a node, or the same local rank on every node) for
  /// hierarchical collectives. Every member asks for the same set.
  virtual Status subgroup(const std::vector<int> &ranks, std::unique_ptr<Communicator> &out) {
    return Status::error("this communicator has no subgroups");
  }
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
  /// The group of |ranks| (ascending ranks of this group): made by the
  /// first member that asks, shared with the others. Aborting this group
  /// aborts it too.
  InProcessGroup &subgroup(const std::vector<int> &ranks);

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
  std::vector<const void *> inputs_;
  std::vector<const char *> posted_;
  std::vector<std::vector<float>> scratch_;
  std::mutex subgroupMutex_;
  std::map<std::vector<int>, std::unique_ptr<InProcessGroup>> subgroups_;
};

} // namespace zrt

#endif // ZRT_COMM_COMMUNICATOR_H
