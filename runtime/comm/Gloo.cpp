//===- Gloo.cpp - ranks as processes on the CPU: Gloo's collectives -------===//
//
// The CPU backend's communicator when the ranks are processes (zrun
// --nproc-per-node N --backend cpu, or any launcher's environment): Gloo
// (Debian's libgloo-dev, what PyTorch's CPU process groups use) over TCP.
// The ranks meet through a Gloo FileStore in a directory rank 0 creates and
// hands out over zrun's rendezvous (comm/Rendezvous.h): one node, or a
// directory on a filesystem every node shares (ZRT_RENDEZVOUS_DIR).
// Reductions sum with Gloo's ring algorithm; the order is fixed by the world
// size, so a run repeats bit for bit (it differs from the in-process order
// in the last bits). Averages divide the sum by W, as the in-process ones.
// 16-bit reductions (--comm-dtype) widen to float32, reduce, and round once:
// the in-process arithmetic, but float32 bytes on the wire (Gloo has no
// bfloat16 sum; the CPU backend is for development and CI). 16-bit
// all-gathers move 16-bit bytes.
//
//===----------------------------------------------------------------------===//
#include "comm/Communicator.h"
#include "comm/Rendezvous.h"
#include "support/NarrowFloat.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <vector>

namespace zrt {
namespace {

class GlooCommunicator : public Communicator {
public:
  GlooCommunicator(std::shared_ptr<gloo::rendezvous::Context> context, double timeoutSeconds,
                   std::string dir, std::shared_ptr<gloo::transport::Device> device, int worldRank)
      : context_(std::move(context)),
        timeout_(std::chrono::milliseconds((int64_t)(timeoutSeconds * 1000))),
        timeoutSeconds_(timeoutSeconds), dir_(std::move(dir)), device_(std::move(device)),
        worldRank_(worldRank) {}
  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  Status allReduce(const void *in, void *out, int64_t n, CommType type, ReduceOp op) override {
    if (n == 0)
      return Status::ok();
    if (type != CommType::F32) {
      std::vector<float> wide(n);
      widenComm(in, wide.data(), n, type);
      ZRT_RETURN_IF_ERROR(allReduce(wide.data(), wide.data(), n, CommType::F32, op));
      narrowComm(wide.data(), out, 0, n, type);
      return Status::ok();
    }
    const float *src = static_cast<const float *>(in);
    float *dst = static_cast<float *>(out);
    return guard("all_reduce", [&] {
      if (dst != src)
        std::copy(src, src + n, dst);
      gloo::AllreduceOptions opts(context_);
      opts.setOutput(dst, (size_t)n);
      opts.setReduceFunction(
          static_cast<void (*)(void *, const void *, const void *, size_t)>(&gloo::sum<float>));
      opts.setTag(nextTag());
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
      if (op == ReduceOp::Avg) {
        float w = (float)size();
        for (int64_t i = 0; i < n; ++i)
          dst[i] /= w;
      }
    });
  }

  Status reduceScatter(const void *in, void *out, int64_t n, CommType type, ReduceOp op) override {
    // The whole sum, then this rank's slice: twice the traffic of a real
    // reduce-scatter, which Gloo's C++ API has only for its old algorithm
    // classes; the CPU backend is for development and CI, not speed.
    int64_t len = n / size();
    std::vector<float> all(n);
    widenComm(in, all.data(), n, type);
    ZRT_RETURN_IF_ERROR(allReduce(all.data(), all.data(), n, CommType::F32, op));
    narrowComm(all.data() + len * rank(), out, 0, len, type);
    return Status::ok();
  }

  Status allGather(const void *in, void *out, int64_t n, CommType type) override {
    if (n == 0)
      return Status::ok();
    return guard("all_gather", [&] {
      gloo::AllgatherOptions opts(context_);
      if (type == CommType::F32) {
        opts.setInput(const_cast<float *>(static_cast<const float *>(in)), (size_t)n);
        opts.setOutput(static_cast<float *>(out), (size_t)(n * size()));
      } else if (type == CommType::I8) {
        opts.setInput(const_cast<int8_t *>(static_cast<const int8_t *>(in)), (size_t)n);
        opts.setOutput(static_cast<int8_t *>(out), (size_t)(n * size()));
      } else {
        opts.setInput(const_cast<uint16_t *>(static_cast<const uint16_t *>(in)), (size_t)n);
        opts.setOutput(static_cast<uint16_t *>(out), (size_t)(n * size()));
      }
      opts.setTag(nextTag());
      opts.setTimeout(timeout_);
      gloo::allgather(opts);
    });
  }

  Status allToAll(const void *in, void *out, int64_t n, CommType type) override {
    if (n == 0)
      return Status::ok();
    // Gloo's output must not alias its input: the input copied first.
    size_t bytes = (size_t)n * commTypeBytes(type);
    std::vector<char> input(static_cast<const char *>(in), static_cast<const char *>(in) + bytes);
    return guard("all_to_all", [&] {
      gloo::AlltoallOptions opts(context_);
      opts.setInput(reinterpret_cast<uint8_t *>(input.data()), bytes);
      opts.setOutput(static_cast<uint8_t *>(out), bytes);
      opts.setTag(nextTag());
      opts.setTimeout(timeout_);
      gloo::alltoall(opts);
    });
  }

  Status barrier() override {
    return guard("barrier", [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTag(nextTag());
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
  }

  void abort(const std::string &why) override {
    // Gloo cannot interrupt a peer's pending call; the others end at their
    // timeout (--comm-timeout) with an error that names the collective.
    aborted_ = why;
  }

private:
  template <typename F> Status guard(const char *what, F f) {
    if (!aborted_.empty())
      return Status::error(aborted_);
    try {
      f();
    } catch (const std::exception &e) {
      return errorf("rank ", rank(), ": ", what, " failed (Gloo): ", e.what(),
                    " (another rank stopped, or --comm-timeout passed)");
    }
    return Status::ok();
  }
  /// The ranks of |ranks| meet again through the world's store, under a
  /// prefix that names the group (world ranks), in a context of their own.
  Status subgroup(const std::vector<int> &ranks, std::unique_ptr<Communicator> &out) override {
    auto at = std::find(ranks.begin(), ranks.end(), rank());
    if (at == ranks.end() || !std::is_sorted(ranks.begin(), ranks.end()))
      return errorf("rank ", rank(), ": a subgroup's ranks must ascend and include this rank");
    std::string prefix = "group";
    for (int r : ranks)
      prefix += "-" + std::to_string(r);
    int index = (int)(at - ranks.begin());
    try {
      gloo::rendezvous::FileStore store(dir_);
      gloo::rendezvous::PrefixStore prefixed(prefix, store);
      auto context = std::make_shared<gloo::rendezvous::Context>(index, (int)ranks.size());
      context->setTimeout(timeout_);
      context->connectFullMesh(prefixed, device_);
      out = std::make_unique<GlooCommunicator>(std::move(context), timeoutSeconds_, dir_, device_,
                                               worldRank_);
    } catch (const std::exception &e) {
      return errorf("rank ", worldRank_, ": Gloo could not connect the group ", prefix, " through ",
                    dir_, ": ", e.what());
    }
    return Status::ok();
  }

  uint32_t nextTag() { return tag_++ & 0x7fffffff; }

  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::chrono::milliseconds timeout_;
  double timeoutSeconds_;
  std::string dir_; // the world's FileStore: subgroups meet through it too
  std::shared_ptr<gloo::transport::Device> device_;
  int worldRank_;
  uint32_t tag_ = 0;
  std::string aborted_;
};

} // namespace

Status makeGlooCommunicator(const LaunchEnv &env, double timeoutSeconds,
                            std::unique_ptr<Communicator> &out) {
  // The store's directory: rank 0 makes a fresh one and hands its path out.
  std::string dir;
  if (env.rank == 0) {
    const char *base = std::getenv("ZRT_RENDEZVOUS_DIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/zrun-gloo-XXXXXX";
    std::vector<char> path(pattern.begin(), pattern.end());
    path.push_back('\0');
    if (!mkdtemp(path.data()))
      return errorf("rank 0: cannot create a rendezvous directory ", pattern,
                    " (set ZRT_RENDEZVOUS_DIR to a writable directory every rank can read)");
    dir = path.data();
  }
  ZRT_RETURN_IF_ERROR(rendezvous(rendezvousConfig(env, timeoutSeconds), dir));
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = env.world > 1 && env.masterAddr != "127.0.0.1" && env.masterAddr != "localhost"
                        ? ""
                        : "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(dir);
    auto context = std::make_shared<gloo::rendezvous::Context>(env.rank, env.world);
    context->setTimeout(std::chrono::milliseconds((int64_t)(timeoutSeconds * 1000)));
    context->connectFullMesh(store, device);
    out = std::make_unique<GlooCommunicator>(std::move(context), timeoutSeconds, dir, device,
                                             env.rank);
  } catch (const std::exception &e) {
    return errorf("rank ", env.rank, ": Gloo could not connect the ", env.world, " ranks through ",
                  dir, ": ", e.what());
  }
  return Status::ok();
}

} // namespace zrt
