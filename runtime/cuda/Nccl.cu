//===- Nccl.cu - NCCL across processes, one GPU each ----------------------===//
#include "cuda/CudaCheck.h"
#include "cuda/Nccl.h"

#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <thread>

namespace zrt {
namespace {

/// NCCL's entry points, resolved from libnccl.so.2 at first use.
struct NcclApi {
  decltype(&ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&ncclCommInitRank) commInitRank = nullptr;
  decltype(&ncclCommSplit) commSplit = nullptr;
  decltype(&ncclCommDestroy) commDestroy = nullptr;
  decltype(&ncclCommAbort) commAbort = nullptr;
  decltype(&ncclCommGetAsyncError) commGetAsyncError = nullptr;
  decltype(&ncclAllReduce) allReduce = nullptr;
  decltype(&ncclReduceScatter) reduceScatter = nullptr;
  decltype(&ncclAllGather) allGather = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) groupStart = nullptr;
  decltype(&ncclGroupEnd) groupEnd = nullptr;
  decltype(&ncclGetErrorString) getErrorString = nullptr;
  std::string error;
};

const NcclApi &api() {
  static NcclApi a;
  static std::once_flag once;
  std::call_once(once, [] {
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (!h)
      h = dlopen("libnccl.so", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      a.error = std::string("cannot load libnccl.so.2 (") + dlerror() +
                "); install NCCL or put it on LD_LIBRARY_PATH";
      return;
    }
    auto sym = [&](auto &f, const char *name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(h, name));
      if (!f && a.error.empty())
        a.error = std::string("libnccl has no ") + name;
    };
    sym(a.getUniqueId, "ncclGetUniqueId");
    sym(a.commInitRank, "ncclCommInitRank");
    sym(a.commSplit, "ncclCommSplit");
    sym(a.commDestroy, "ncclCommDestroy");
    sym(a.commAbort, "ncclCommAbort");
    sym(a.commGetAsyncError, "ncclCommGetAsyncError");
    sym(a.allReduce, "ncclAllReduce");
    sym(a.reduceScatter, "ncclReduceScatter");
    sym(a.allGather, "ncclAllGather");
    sym(a.send, "ncclSend");
    sym(a.recv, "ncclRecv");
    sym(a.groupStart, "ncclGroupStart");
    sym(a.groupEnd, "ncclGroupEnd");
    sym(a.getErrorString, "ncclGetErrorString");
  });
  return a;
}

Status ncclStatus(ncclResult_t r, const char *what, int rank) {
  if (r == ncclSuccess || r == ncclInProgress)
    return Status::ok();
  return errorf("rank ", rank, ": ", what, ": NCCL error ", (int)r, " (",
                api().getErrorString ? api().getErrorString(r) : "?", ")");
}

ncclRedOp_t redOp(ReduceOp op) { return op == ReduceOp::Avg ? ncclAvg : ncclSum; }
ncclDataType_t dataType(CommType t) {
  return t == CommType::F32    ? ncclFloat32
         : t == CommType::BF16 ? ncclBfloat16
         : t == CommType::F16  ? ncclFloat16
                               : ncclInt8;
}

} // namespace

Status NcclCommunicator::create(const LaunchEnv &env, int device, double timeoutSeconds,
                                std::unique_ptr<NcclCommunicator> &out) {
  const NcclApi &a = api();
  if (!a.error.empty())
    return errorf("rank ", env.rank, ": ", a.error);
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator());
  c->rank_ = env.rank;
  c->world_ = env.world;
  c->device_ = device;
  c->timeout_ = timeoutSeconds;
  ZRT_CUDA(cudaSetDevice(device));
  ncclUniqueId id;
  std::string payload;
  if (env.rank == 0) {
    ZRT_RETURN_IF_ERROR(ncclStatus(a.getUniqueId(&id), "ncclGetUniqueId", env.rank));
    payload.assign(id.internal, sizeof id.internal);
  }
  ZRT_RETURN_IF_ERROR(rendezvous(rendezvousConfig(env, timeoutSeconds), payload));
  if (payload.size() != sizeof id.internal)
    return errorf("rank ", env.rank, ": the rendezvous brought ", payload.size(),
                  " bytes, not an NCCL id");
  std::memcpy(id.internal, payload.data(), sizeof id.internal);
  ncclComm_t comm = nullptr;
  ZRT_RETURN_IF_ERROR(
      ncclStatus(a.commInitRank(&comm, env.world, id, env.rank), "ncclCommInitRank", env.rank));
  c->comm_ = comm;
  cudaStream_t stream;
  ZRT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  c->stream_ = stream;
  NcclCommunicator *self = c.get();
  c->watchdog_ = std::thread([self] { self->watch(); });
  out = std::move(c);
  return Status::ok();
}

Status NcclCommunicator::subgroup(const std::vector<int> &ranks,
                                  std::unique_ptr<Communicator> &out) {
  auto at = std::find(ranks.begin(), ranks.end(), rank_);
  if (parent_ || at == ranks.end() || !std::is_sorted(ranks.begin(), ranks.end()))
    return errorf("rank ", rank_,
                  ": a subgroup's ranks must ascend and include this rank, and "
                  "come from the world's communicator");
  ZRT_CUDA(cudaSetDevice(device_));
  // ncclCommSplit is collective over the world: every rank asks for its own
  // group of one partition of the ranks at once. The smallest rank names a
  // group (groups of one partition are disjoint); keys keep the world order.
  ncclComm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(watchMutex_);
    if (!comm_)
      return errorf("rank ", rank_, ": the communicator was aborted: ", abortedWhy_);
  }
  ZRT_RETURN_IF_ERROR(
      ncclStatus(api().commSplit((ncclComm_t)comm_, ranks.front(), rank_, &comm, nullptr),
                 "ncclCommSplit", rank_));
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator());
  c->rank_ = (int)(at - ranks.begin());
  c->world_ = (int)ranks.size();
  c->device_ = device_;
  c->timeout_ = timeout_;
  c->comm_ = comm;
  c->parent_ = this;
  cudaStream_t stream;
  ZRT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  c->stream_ = stream;
  {
    std::lock_guard<std::mutex> lock(watchMutex_);
    children_.push_back(c.get());
  }
  out = std::move(c);
  return Status::ok();
}

void NcclCommunicator::abortChildren(const std::string &why) {
  for (NcclCommunicator *child : children_)
    child->abort(why);
}

void NcclCommunicator::begin(const std::string &what) {
  std::lock_guard<std::mutex> lock(watchMutex_);
  busy_ = true;
  busyWhat_ = what;
  busySince_ = std::chrono::steady_clock::now();
}

void NcclCommunicator::end() {
  std::lock_guard<std::mutex> lock(watchMutex_);
  busy_ = false;
}

void NcclCommunicator::watch() {
  std::unique_lock<std::mutex> lock(watchMutex_);
  auto limit = std::chrono::milliseconds((int64_t)(timeout_ * 1000));
  while (!stopWatch_) {
    watchCv_.wait_for(lock, std::chrono::milliseconds(500));
    if (stopWatch_ || !busy_ || std::chrono::steady_clock::now() - busySince_ < limit)
      continue;
    std::string what = busyWhat_;
    auto since = busySince_;
    lock.unlock();
    std::fprintf(stderr,
                 "zrun: error: rank %d: %s did not complete within %g s (a peer died or "
                 "hangs); aborting NCCL\n",
                 rank_, what.c_str(), timeout_);
    std::fflush(stderr);
    lock.lock();
    abortedWhy_ = what + " did not complete within " + std::to_string((int)timeout_) +
                  " s (a peer died or hangs)";
    aborted_ = true;
    void *comm = comm_;
    comm_ = nullptr;
    abortChildren(abortedWhy_);
    lock.unlock();
    if (comm)
      api().commAbort((ncclComm_t)comm);
    // If the abort did not free the rank within 10 s, end the process.
    std::this_thread::sleep_for(std::chrono::seconds(10));
    lock.lock();
    if (busy_ && busySince_ == since) {
      std::fprintf(stderr, "zrun: error: rank %d: still blocked in %s; exiting\n", rank_,
                   what.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
  }
}

NcclCommunicator::~NcclCommunicator() {
  if (parent_) {
    std::lock_guard<std::mutex> lock(parent_->watchMutex_);
    auto &siblings = parent_->children_;
    siblings.erase(std::remove(siblings.begin(), siblings.end(), this), siblings.end());
  }
  {
    std::lock_guard<std::mutex> lock(watchMutex_);
    stopWatch_ = true;
  }
  watchCv_.notify_all();
  if (watchdog_.joinable())
    watchdog_.join();
  cudaSetDevice(device_);
  if (stream_)
    cudaStreamSynchronize((cudaStream_t)stream_);
  if (comm_)
    api().commDestroy((ncclComm_t)comm_);
  if (scratch_)
    cudaFree(scratch_);
  if (stream_)
    cudaStreamDestroy((cudaStream_t)stream_);
}

void NcclCommunicator::abort(const std::string &why) {
  std::lock_guard<std::mutex> lock(watchMutex_);
  abortChildren(why);
  if (comm_) {
    abortedWhy_ = why;
    aborted_ = true;
    api().commAbort((ncclComm_t)comm_);
    comm_ = nullptr;
  }
}

Status NcclCommunicator::wait(void *stream, const char *what) {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds((int64_t)(timeout_ * 1000));
  while (true) {
    cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
    if (aborted_) // the watchdog freed the stream: its results are not to be used
      return errorf("rank ", rank_, ": ", what, ": NCCL was aborted: ", abortedWhy_);
    if (e == cudaSuccess)
      return Status::ok();
    if (e != cudaErrorNotReady)
      return cudaStatus(e, what, __FILE__, __LINE__);
    if (!comm_)
      return errorf("rank ", rank_, ": ", what, ": the communicator was aborted");
    ncclResult_t async = ncclSuccess;
    api().commGetAsyncError((ncclComm_t)comm_, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      Status s = ncclStatus(async, what, rank_);
      abort(s.message());
      return s;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      abort(std::string(what) + " timed out");
      return errorf("rank ", rank_, ": ", what, " did not complete within ", timeout_,
                    " s (a peer died or hangs); the communicator was aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

Status NcclCommunicator::deviceAllReduce(const void *in, void *out, int64_t n, CommType type,
                                         ReduceOp op, void *stream) {
  if (!comm_)
    return errorf("rank ", rank_, ": all-reduce on an aborted communicator");
  return ncclStatus(api().allReduce(in, out, (size_t)n, dataType(type), redOp(op),
                                    (ncclComm_t)comm_, (cudaStream_t)stream),
                    "ncclAllReduce", rank_);
}

Status NcclCommunicator::deviceReduceScatter(const void *in, void *out, int64_t n, CommType type,
                                             ReduceOp op, void *stream) {
  if (!comm_)
    return errorf("rank ", rank_, ": reduce-scatter on an aborted communicator");
  return ncclStatus(api().reduceScatter(in, out, (size_t)(n / world_), dataType(type), redOp(op),
                                        (ncclComm_t)comm_, (cudaStream_t)stream),
                    "ncclReduceScatter", rank_);
}

Status NcclCommunicator::deviceAllGather(const void *in, void *out, int64_t n, CommType type,
                                         void *stream) {
  if (!comm_)
    return errorf("rank ", rank_, ": all-gather on an aborted communicator");
  return ncclStatus(
      api().allGather(in, out, (size_t)n, dataType(type), (ncclComm_t)comm_, (cudaStream_t)stream),
      "ncclAllGather", rank_);
}

Status NcclCommunicator::deviceAllToAll(const void *in, void *out, int64_t n, CommType type,
                                        void *stream) {
  if (!comm_)
    return errorf("rank ", rank_, ": all-to-all on an aborted communicator");
  const NcclApi &a = api();
  size_t chunk = (size_t)(n / world_), bytes = chunk * commTypeBytes(type);
  ZRT_RETURN_IF_ERROR(ncclStatus(a.groupStart(), "ncclGroupStart", rank_));
  Status st = Status::ok();
  for (int peer = 0; peer < world_ && st; ++peer) {
    st = ncclStatus(a.send(static_cast<const char *>(in) + peer * bytes, chunk, dataType(type),
                           peer, (ncclComm_t)comm_, (cudaStream_t)stream),
                    "ncclSend", rank_);
    if (st)
      st = ncclStatus(a.recv(static_cast<char *>(out) + peer * bytes, chunk, dataType(type), peer,
                             (ncclComm_t)comm_, (cudaStream_t)stream),
                      "ncclRecv", rank_);
  }
  Status end = ncclStatus(a.groupEnd(), "ncclGroupEnd (all-to-all)", rank_);
  return st ? end : st;
}

// Host-side calls: staged through a device buffer on the communicator's own
// stream (small: the trainer's scalars).
Status NcclCommunicator::allReduce(const void *in, void *out, int64_t n, CommType type,
                                   ReduceOp op) {
  if (type != CommType::F32)
    return errorf("rank ", rank_,
                  ": a host all-reduce over NCCL moves float32 (the trainer's "
                  "scalars), not ",
                  commTypeName(type));
  ZRT_CUDA(cudaSetDevice(device_));
  if (scratchFloats_ < n) {
    if (scratch_)
      ZRT_CUDA(cudaFree(scratch_));
    ZRT_CUDA(cudaMalloc(&scratch_, n * sizeof(float)));
    scratchFloats_ = n;
  }
  cudaStream_t s = (cudaStream_t)stream_;
  begin("a host all-reduce");
  Status st =
      cudaStatus(cudaMemcpyAsync(scratch_, in, n * sizeof(float), cudaMemcpyHostToDevice, s),
                 "copy", __FILE__, __LINE__);
  if (st)
    st = deviceAllReduce(scratch_, scratch_, n, CommType::F32, op, s);
  if (st)
    st = cudaStatus(cudaMemcpyAsync(out, scratch_, n * sizeof(float), cudaMemcpyDeviceToHost, s),
                    "copy", __FILE__, __LINE__);
  if (st)
    st = wait(s, "host all-reduce");
  end();
  return st;
}

Status NcclCommunicator::reduceScatter(const void *, void *, int64_t, CommType, ReduceOp) {
  return errorf("rank ", rank_, ": host reduce-scatter over NCCL is not used");
}

Status NcclCommunicator::allGather(const void *, void *, int64_t, CommType) {
  return errorf("rank ", rank_, ": host all-gather over NCCL is not used");
}

Status NcclCommunicator::allToAll(const void *, void *, int64_t, CommType) {
  return errorf("rank ", rank_, ": host all-to-all over NCCL is not used");
}

Status NcclCommunicator::barrier() {
  float x = 0;
  return allReduce(&x, &x, 1, ReduceOp::Sum);
}

} // namespace zrt
