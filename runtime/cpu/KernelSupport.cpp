//===- KernelSupport.cpp - what the CPU kernel families share -------------===//
//
// Operand checks, 16-bit float widening, and the elementwise thread pool
// (cpu/KernelSupport.h).
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

namespace zrt::cpu {

std::string shapeStr(const Shape &s) {
  std::ostringstream os;
  os << "[";
  for (size_t k = 0; k < s.size(); ++k)
    os << (k ? "x" : "") << s[k];
  os << "]";
  return os.str();
}

std::string describe(const TensorRef &t) {
  return std::string(dtypeName(t.dtype)) + shapeStr(t.shape);
}

/// Normalizes a possibly negative gather index |j| into [0, dim).
Status gatherIndex(int64_t &j, int64_t dim) {
  if (j < -dim || j >= dim)
    return errorf("index ", j, " is out of range for a dimension of size ", dim,
                  " (e.g. a token id >= the vocabulary size)");
  if (j < 0)
    j += dim;
  return Status::ok();
}

/// Element strides of |in| seen from |out|'s index space (0 where broadcast).
std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (int64_t k = (int64_t)in.size() - 1; k >= 0; --k) {
    size_t o = out.size() - in.size() + k;
    strides[o] = in[k] == 1 ? 0 : stride;
    stride *= in[k];
  }
  return strides;
}

/// outer x dim x inner decomposition around |axis|.
void around(const Shape &s, int64_t axis, int64_t &outer, int64_t &dim, int64_t &inner) {
  outer = inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= s[d];
  dim = s[axis];
  for (size_t d = axis + 1; d < s.size(); ++d)
    inner *= s[d];
}

/// Element k of a bfloat16 or float16 tensor as float, and the reverse.
float loadNarrow(const TensorRef &t, int64_t k) {
  return t.dtype == DType::BF16 ? float(t.as<BF16>()[k]) : float(t.as<F16>()[k]);
}
void storeNarrow(const TensorRef &t, int64_t k, float v) {
  if (t.dtype == DType::BF16)
    t.as<BF16>()[k] = BF16(v);
  else
    t.as<F16>()[k] = F16(v);
}

Status viaFloat32(const KernelCall &c, Status (*run)(const KernelCall &)) {
  bool any = false;
  for (const auto *list : {&c.in, &c.out})
    for (const TensorRef &t : *list)
      any |= isNarrowFloat(t.dtype);
  if (!any)
    return run(c);
  KernelCall w = c;
  std::vector<std::vector<float>> buffers;
  buffers.reserve(c.in.size() + c.out.size());
  auto widen = [&](TensorRef &t, bool copy) {
    if (!isNarrowFloat(t.dtype))
      return;
    buffers.emplace_back(t.numel());
    if (copy)
      for (int64_t k = 0; k < t.numel(); ++k)
        buffers.back()[k] = loadNarrow(t, k);
    t.dtype = DType::F32;
    t.data = reinterpret_cast<char *>(buffers.back().data());
  };
  for (TensorRef &t : w.in)
    widen(t, true);
  for (TensorRef &t : w.out)
    widen(t, false);
  ZRT_RETURN_IF_ERROR(run(w));
  for (size_t i = 0; i < c.out.size(); ++i)
    if (isNarrowFloat(c.out[i].dtype))
      for (int64_t k = 0, n = c.out[i].numel(); k < n; ++k)
        storeNarrow(c.out[i], k, w.out[i].as<float>()[k]);
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Checks
//===----------------------------------------------------------------------===//

std::string arity(const KernelCall &c, size_t nin, size_t nout) {
  if (c.in.size() != nin || c.out.size() != nout) {
    std::ostringstream os;
    os << "expects " << nin << " inputs and " << nout << " outputs, got " << c.in.size() << " and "
       << c.out.size();
    return os.str();
  }
  return "";
}

std::string checkBinary(const KernelCall &c, std::initializer_list<DType> dtypes, bool boolResult) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  const TensorRef &a = c.in[0], &b = c.in[1], &o = c.out[0];
  if (a.dtype != b.dtype || std::find(dtypes.begin(), dtypes.end(), a.dtype) == dtypes.end())
    return "unsupported operand types " + describe(a) + ", " + describe(b);
  if (o.dtype != (boolResult ? DType::Bool : a.dtype))
    return "wrong result type " + describe(o);
  Shape s;
  if (!broadcastShape(a.shape, b.shape, s) || s != o.shape)
    return "shapes " + describe(a) + " and " + describe(b) + " do not broadcast to " + describe(o);
  return "";
}

std::string checkUnary(const KernelCall &c, DType dtype) {
  if (auto e = arity(c, 1, 1); !e.empty())
    return e;
  if (c.in[0].dtype != dtype || c.out[0].dtype != dtype || c.in[0].shape != c.out[0].shape)
    return "expects " + std::string(dtypeName(dtype)) + " in and out of one shape, got " +
           describe(c.in[0]) + " -> " + describe(c.out[0]);
  return "";
}

/// One float storage type (float32 or bfloat16) in and out, one shape.
std::string checkUnaryFloat(const KernelCall &c) {
  if (auto e = arity(c, 1, 1); !e.empty())
    return e;
  if (!isFloatStorage(c.in[0].dtype) || c.out[0].dtype != c.in[0].dtype ||
      c.in[0].shape != c.out[0].shape)
    return "expects float32 or bfloat16 in and out of one type and shape, got " +
           describe(c.in[0]) + " -> " + describe(c.out[0]);
  return "";
}

std::string checkInts(const KernelCall &c, size_t n) {
  if (c.ints.size() != n)
    return "expects " + std::to_string(n) + " integer attributes, got " +
           std::to_string(c.ints.size());
  return "";
}

namespace {

/// Elementwise work over every core: a pool of hardware_concurrency - 1
/// threads kept for the process (the offloaded update runs once per step on
/// shards of ~1e9 elements, in chunks), which take blocks of kGrain elements
/// from a shared counter together with the caller, so a slow core delays
/// one block, not a fixed share. Callers from several threads (in-process
/// ranks) take turns.
class ElementwisePool {
public:
  static constexpr int64_t kGrain = 1 << 16;

  static ElementwisePool &get() {
    static ElementwisePool pool;
    return pool;
  }

  void run(int64_t n, const std::function<void(int64_t, int64_t)> &fn) {
    std::lock_guard<std::mutex> turn(submit_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &fn;
      size_ = n;
      next_.store(0);
      pending_ = (int)workers_.size();
      ++generation_;
    }
    wake_.notify_all();
    work(fn, n);
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
  }

  ~ElementwisePool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread &t : workers_)
      t.join();
  }

private:
  ElementwisePool() {
    unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned k = 1; k < cores; ++k)
      workers_.emplace_back([this] { loop(); });
  }

  void work(const std::function<void(int64_t, int64_t)> &fn, int64_t n) {
    for (int64_t begin; (begin = next_.fetch_add(kGrain)) < n;)
      fn(begin, std::min(n, begin + kGrain));
  }

  void loop() {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int64_t, int64_t)> *job;
      int64_t n;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_)
          return;
        seen = generation_;
        job = job_;
        n = size_;
      }
      work(*job, n);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0)
        finished_.notify_one();
    }
  }

  std::mutex submit_, mutex_;
  std::condition_variable wake_, finished_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t, int64_t)> *job_ = nullptr;
  int64_t size_ = 0;
  std::atomic<int64_t> next_{0};
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

} // namespace

void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)> &fn) {
  if (n < 4 * ElementwisePool::kGrain) {
    fn(0, n);
    return;
  }
  ElementwisePool::get().run(n, fn);
}

} // namespace zrt::cpu
