//===- Kernels.cpp - the CPU kernel library -------------------------------===//
//
// Straightforward fp32 kernels that favour clarity and exactness over speed:
// reductions accumulate in double, softmax and cross-entropy subtract the
// maximum, GEMMs go to OpenBLAS (multithreaded). Broadcasting is done with
// per-operand strides that are 0 along broadcast dimensions.
//
//===----------------------------------------------------------------------===//
#include "cpu/Kernels.h"
#include "support/Shape.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cstring>
#include <functional>
#include <sstream>
#include <type_traits>

using namespace zrt;

namespace {

using Shape = std::vector<int64_t>;

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

bool broadcastShape(const Shape &a, const Shape &b, Shape &out) {
  return zrt::broadcastShapes(a, b, out);
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

/// Calls fn(outIndex, offsets...) for every element of |out|, with the flat
/// offsets of each broadcast operand.
template <size_t N, typename Fn>
void forEachBroadcast(const Shape &out, const std::array<Shape, N> &ins, Fn fn) {
  int64_t n = 1;
  for (int64_t d : out)
    n *= d;
  std::array<std::vector<int64_t>, N> strides;
  bool same = true;
  for (size_t i = 0; i < N; ++i) {
    strides[i] = broadcastStrides(ins[i], out);
    same &= ins[i] == out;
  }
  std::array<int64_t, N> off{};
  if (same) { // fast path: no broadcasting
    for (int64_t k = 0; k < n; ++k) {
      off.fill(k);
      fn(k, off);
    }
    return;
  }
  std::vector<int64_t> coord(out.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    fn(k, off);
    for (int64_t d = (int64_t)out.size() - 1; d >= 0; --d) {
      for (size_t i = 0; i < N; ++i)
        off[i] += strides[i][d];
      if (++coord[d] < out[d])
        break;
      for (size_t i = 0; i < N; ++i)
        off[i] -= strides[i][d] * coord[d];
      coord[d] = 0;
    }
  }
}

int64_t numelOf(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

//===----------------------------------------------------------------------===//
// bfloat16 storage, float32 math
//===----------------------------------------------------------------------===//

/// A bfloat16 in memory. Kernels compute in float32 and round results to
/// nearest even on store, as GPU bf16 kernels do.
struct BF16 {
  uint16_t bits;
  BF16() = default;
  BF16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) // NaN: keep it a quiet NaN
      bits = (uint16_t)((u >> 16) | 0x40);
    else
      bits = (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
  }
  operator float() const {
    uint32_t u = (uint32_t)bits << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

/// An IEEE binary16 in memory; float32 math, round to nearest even on store.
struct F16 {
  uint16_t bits;
  F16() = default;
  F16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
    if (ax > 0x7f800000) {        // NaN
      bits = (uint16_t)(sign | 0x7e00);
    } else if (ax >= 0x477ff000) { // >= 65520 rounds to infinity
      bits = (uint16_t)(sign | 0x7c00);
    } else if (ax < 0x38800000) {  // below 2^-14: subnormal or zero
      uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
      int shift = 126 - (int)e;
      if (shift > 24) {
        bits = (uint16_t)sign;
      } else {
        uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
          ++h;
        bits = (uint16_t)(sign | h);
      }
    } else {
      uint32_t h = (((ax >> 23) - 112) << 10) | ((ax & 0x7fffff) >> 13), rem = ax & 0x1fff;
      if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        ++h;
      bits = (uint16_t)(sign | h);
    }
  }
  operator float() const {
    uint32_t sign = (uint32_t)(bits & 0x8000) << 16, e = (bits >> 10) & 0x1f, m = bits & 0x3ff;
    uint32_t x;
    if (e == 0) {
      float v = (float)m * 5.9604644775390625e-8f; // m * 2^-24
      return sign ? -v : v;
    }
    x = e == 31 ? sign | 0x7f800000 | (m << 13) : sign | ((e + 112) << 23) | (m << 13);
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
};

bool isFloatStorage(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }
bool isNarrowFloat(DType d) { return d == DType::BF16 || d == DType::F16; }

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

/// Calls fn(T{}) with T = float, BF16 or F16 for |dtype| (a float storage type).
template <typename Fn> Status dispatchFloat(DType dtype, Fn fn) {
  if (dtype == DType::BF16)
    return fn(BF16{});
  if (dtype == DType::F16)
    return fn(F16{});
  return fn(float{});
}

/// Runs a float32 kernel on a call whose float operands may be bfloat16:
/// bfloat16 inputs are widened to float32 copies, bfloat16 outputs computed
/// in float32 and rounded back. The arithmetic is the float32 kernel's.
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
    os << "expects " << nin << " inputs and " << nout << " outputs, got " << c.in.size()
       << " and " << c.out.size();
    return os.str();
  }
  return "";
}

std::string checkBinary(const KernelCall &c, std::initializer_list<DType> dtypes,
                        bool boolResult) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  const TensorRef &a = c.in[0], &b = c.in[1], &o = c.out[0];
  if (a.dtype != b.dtype || std::find(dtypes.begin(), dtypes.end(), a.dtype) == dtypes.end())
    return "unsupported operand types " + describe(a) + ", " + describe(b);
  if (o.dtype != (boolResult ? DType::Bool : a.dtype))
    return "wrong result type " + describe(o);
  Shape s;
  if (!broadcastShape(a.shape, b.shape, s) || s != o.shape)
    return "shapes " + describe(a) + " and " + describe(b) + " do not broadcast to " +
           describe(o);
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

bool validAxis(int64_t axis, size_t rank) { return axis >= 0 && axis < (int64_t)rank; }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

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

/// Runs fn(begin, end) over [0, n) in blocks on every core (on the caller
/// alone below 256K elements). For elementwise work only: which thread runs
/// which block varies.
void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)> &fn) {
  if (n < 4 * ElementwisePool::kGrain) {
    fn(0, n);
    return;
  }
  ElementwisePool::get().run(n, fn);
}

template <typename T, typename R, typename Fn> void binaryLoop(const KernelCall &c, Fn fn) {
  const T *a = c.in[0].as<T>(), *b = c.in[1].as<T>();
  R *o = c.out[0].as<R>();
  // Operands of the result's shape or single elements (the offloaded
  // update's clip of a whole gradient shard): flat, over every core.
  int64_t n = c.out[0].numel(), na = c.in[0].numel(), nb = c.in[1].numel();
  if ((na == n || na == 1) && (nb == n || nb == 1)) {
    int64_t sa = na == n, sb = nb == n;
    parallelFor(n, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k)
        o[k] = fn(a[k * sa], b[k * sb]);
    });
    return;
  }
  forEachBroadcast<2>(c.out[0].shape, {c.in[0].shape, c.in[1].shape},
                      [&](int64_t k, const std::array<int64_t, 2> &off) {
                        o[k] = fn(a[off[0]], b[off[1]]);
                      });
}

#define ZRT_ARITH(NAME, EXPR)                                                              \
  std::string check_##NAME(const KernelCall &c) {                                          \
    return checkBinary(c, {DType::F32, DType::BF16, DType::F16, DType::I64}, false);       \
  }                                                                                        \
  Status run_##NAME(const KernelCall &c) {                                                 \
    if (c.in[0].dtype == DType::I64) {                                                     \
      binaryLoop<int64_t, int64_t>(c, [](int64_t x, int64_t y) { return EXPR; });          \
      return Status::ok();                                                                 \
    }                                                                                      \
    return dispatchFloat(c.in[0].dtype, [&](auto tag) {                                    \
      using T = decltype(tag);                                                             \
      binaryLoop<T, T>(c, [](float x, float y) -> float { return EXPR; });                 \
      return Status::ok();                                                                 \
    });                                                                                    \
  }
ZRT_ARITH(add, x + y)
ZRT_ARITH(sub, x - y)
ZRT_ARITH(mul, x * y)
ZRT_ARITH(max, std::max(x, y))
ZRT_ARITH(min, std::min(x, y))
#undef ZRT_ARITH

std::string check_div(const KernelCall &c) {
  return checkBinary(c, {DType::F32, DType::BF16, DType::F16}, false);
}
Status run_div(const KernelCall &c) {
  return dispatchFloat(c.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    binaryLoop<T, T>(c, [](float x, float y) -> float { return x / y; });
    return Status::ok();
  });
}
std::string check_pow(const KernelCall &c) {
  return checkBinary(c, {DType::F32, DType::BF16, DType::F16}, false);
}
Status run_pow(const KernelCall &c) {
  return dispatchFloat(c.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    binaryLoop<T, T>(c, [](float x, float y) -> float { return std::pow(x, y); });
    return Status::ok();
  });
}
std::string check_logic(const KernelCall &c) { return checkBinary(c, {DType::Bool}, false); }
Status run_and(const KernelCall &c) {
  binaryLoop<uint8_t, uint8_t>(c, [](uint8_t x, uint8_t y) -> uint8_t { return x && y; });
  return Status::ok();
}
Status run_or(const KernelCall &c) {
  binaryLoop<uint8_t, uint8_t>(c, [](uint8_t x, uint8_t y) -> uint8_t { return x || y; });
  return Status::ok();
}

std::string check_cmp(const KernelCall &c) {
  if (auto e = checkInts(c, 1); !e.empty())
    return e;
  if (c.ints[0] < 0 || c.ints[0] > 5)
    return "unknown predicate " + std::to_string(c.ints[0]);
  return checkBinary(c, {DType::F32, DType::BF16, DType::F16, DType::I64}, true);
}
template <typename T> void cmpLoop(const KernelCall &c) {
  int64_t p = c.ints[0];
  // bfloat16 compares as float; int64 exactly.
  using V = std::conditional_t<std::is_same_v<T, BF16> || std::is_same_v<T, F16>, float, T>;
  binaryLoop<T, uint8_t>(c, [p](V x, V y) -> uint8_t {
    switch (p) {
    case 0: return x == y;
    case 1: return x != y;
    case 2: return x < y;
    case 3: return x <= y;
    case 4: return x > y;
    default: return x >= y;
    }
  });
}
Status run_cmp(const KernelCall &c) {
  if (c.in[0].dtype == DType::F32)
    cmpLoop<float>(c);
  else if (c.in[0].dtype == DType::BF16)
    cmpLoop<BF16>(c);
  else if (c.in[0].dtype == DType::F16)
    cmpLoop<F16>(c);
  else
    cmpLoop<int64_t>(c);
  return Status::ok();
}

std::string check_where(const KernelCall &c) {
  if (auto e = arity(c, 3, 1); !e.empty())
    return e;
  const TensorRef &cond = c.in[0], &a = c.in[1], &b = c.in[2], &o = c.out[0];
  if (cond.dtype != DType::Bool || a.dtype != b.dtype || o.dtype != a.dtype ||
      dtypeSize(a.dtype) == 0)
    return "expects a bool condition and two values of the result type";
  Shape s1, s;
  if (!broadcastShape(a.shape, b.shape, s1) || !broadcastShape(cond.shape, s1, s) ||
      s != o.shape)
    return "shapes do not broadcast to " + describe(o);
  return "";
}
Status run_where(const KernelCall &c) {
  const uint8_t *cond = c.in[0].as<uint8_t>();
  size_t es = dtypeSize(c.out[0].dtype);
  const char *a = c.in[1].data, *b = c.in[2].data;
  char *o = c.out[0].data;
  forEachBroadcast<3>(c.out[0].shape, {c.in[0].shape, c.in[1].shape, c.in[2].shape},
                      [&](int64_t k, const std::array<int64_t, 3> &off) {
                        const char *src = cond[off[0]] ? a + off[1] * es : b + off[2] * es;
                        std::memmove(o + k * es, src, es);
                      });
  return Status::ok();
}

template <typename Fn> Status unaryF32(const KernelCall &c, Fn fn) {
  return dispatchFloat(c.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *x = c.in[0].as<T>();
    T *y = c.out[0].as<T>();
    for (int64_t k = 0, n = c.out[0].numel(); k < n; ++k)
      y[k] = T(fn(float(x[k])));
    return Status::ok();
  });
}

std::string check_f32(const KernelCall &c) { return checkUnaryFloat(c); }
#define ZRT_UNARY(NAME, EXPR)                                                              \
  Status run_##NAME(const KernelCall &c) {                                                 \
    return unaryF32(c, [](float x) -> float { return EXPR; });                             \
  }
ZRT_UNARY(neg, -x)
ZRT_UNARY(abs, std::fabs(x))
ZRT_UNARY(exp, std::exp(x))
ZRT_UNARY(log, std::log(x))
ZRT_UNARY(sqrt, std::sqrt(x))
ZRT_UNARY(rsqrt, 1.0f / std::sqrt(x))
ZRT_UNARY(reciprocal, 1.0f / x)
ZRT_UNARY(tanh, std::tanh(x))
ZRT_UNARY(erf, std::erf(x))
ZRT_UNARY(sigmoid, 1.0f / (1.0f + std::exp(-x)))
ZRT_UNARY(relu, x < 0 ? 0.0f : x) // NaN stays NaN, as in PyTorch
ZRT_UNARY(silu, x / (1.0f + std::exp(-x)))
ZRT_UNARY(cos, std::cos(x))
ZRT_UNARY(sin, std::sin(x))
#undef ZRT_UNARY

std::string check_not(const KernelCall &c) { return checkUnary(c, DType::Bool); }
Status run_not(const KernelCall &c) {
  const uint8_t *x = c.in[0].as<uint8_t>();
  uint8_t *y = c.out[0].as<uint8_t>();
  for (int64_t k = 0, n = c.out[0].numel(); k < n; ++k)
    y[k] = !x[k];
  return Status::ok();
}

std::string check_gelu(const KernelCall &c) {
  if (auto e = checkInts(c, 1); !e.empty())
    return e;
  if (c.ints[0] != 0 && c.ints[0] != 1)
    return "approximation must be 0 (exact) or 1 (tanh)";
  return checkUnaryFloat(c);
}
Status run_gelu(const KernelCall &c) {
  if (c.ints[0] == 1) // GPT-2's gelu_new, PyTorch's approximate='tanh'
    return unaryF32(c, [](float x) {
      const float k = 0.7978845608028654f; // sqrt(2/pi)
      return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
    });
  return unaryF32(c, [](float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); });
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

bool castable(DType d) {
  return d == DType::F32 || isNarrowFloat(d) || d == DType::F64 || d == DType::I64 ||
         d == DType::I32 || d == DType::Bool;
}
std::string check_cast(const KernelCall &c) {
  if (auto e = arity(c, 1, 1); !e.empty())
    return e;
  if (c.in[0].shape != c.out[0].shape || !castable(c.in[0].dtype) || !castable(c.out[0].dtype))
    return "cannot cast " + describe(c.in[0]) + " to " + describe(c.out[0]);
  return "";
}
double loadAsDouble(const TensorRef &t, int64_t k) {
  switch (t.dtype) {
  case DType::F32: return t.as<float>()[k];
  case DType::BF16: case DType::F16: return loadNarrow(t, k);
  case DType::F64: return t.as<double>()[k];
  case DType::I64: return (double)t.as<int64_t>()[k];
  case DType::I32: return t.as<int32_t>()[k];
  case DType::Bool: return t.as<uint8_t>()[k];
  default: return 0;
  }
}
Status run_cast(const KernelCall &c) {
  const TensorRef &x = c.in[0], &y = c.out[0];
  for (int64_t k = 0, n = y.numel(); k < n; ++k) {
    if (x.dtype == DType::I64 && y.dtype == DType::I64) {
      y.as<int64_t>()[k] = x.as<int64_t>()[k];
      continue;
    }
    double v = loadAsDouble(x, k);
    switch (y.dtype) {
    case DType::F32: y.as<float>()[k] = (float)v; break;
    case DType::BF16: case DType::F16: storeNarrow(y, k, (float)v); break;
    case DType::F64: y.as<double>()[k] = v; break;
    case DType::I64: y.as<int64_t>()[k] = x.dtype == DType::I32 ? x.as<int32_t>()[k] : (int64_t)v; break;
    case DType::I32: y.as<int32_t>()[k] = (int32_t)v; break;
    case DType::Bool: y.as<uint8_t>()[k] = v != 0; break;
    default: break;
    }
  }
  return Status::ok();
}

//--- elementwise: a fused tree of exactly rounded arithmetic -------------===//
// ints = [inputs, steps, then (opcode, a, b, dtype) per step]: opcode 0 add,
// 1 sub, 2 mul, 3 div, 4 neg, 5 cast; a and b index the inputs (broadcast to
// the output's shape) and then earlier steps (-1: none); dtype is the plan's
// type code (1 float32, 3 float16, 4 bfloat16) the step rounds to.

DType planFloatType(int64_t code) {
  return code == 4 ? DType::BF16 : code == 3 ? DType::F16 : DType::F32;
}

std::string check_elementwise(const KernelCall &c) {
  if (c.ints.size() < 2 || c.out.size() != 1 || (int64_t)c.in.size() != c.ints[0] ||
      c.ints[1] < 1 || (int64_t)c.ints.size() != 2 + 4 * c.ints[1])
    return "expects [inputs, steps, (opcode, a, b, dtype) per step] over its inputs and one output";
  int64_t inputs = c.ints[0];
  for (int64_t s = 0; s < c.ints[1]; ++s) {
    int64_t op = c.ints[2 + 4 * s], a = c.ints[3 + 4 * s], b = c.ints[4 + 4 * s],
            t = c.ints[5 + 4 * s];
    bool unary = op == 4 || op == 5;
    if (op < 0 || op > 5 || a < 0 || a >= inputs + s || (unary ? b != -1 : b < 0 || b >= inputs + s) ||
        (t != 1 && t != 3 && t != 4))
      return "step " + std::to_string(s) + " is not an opcode 0-5 over earlier values";
  }
  const TensorRef &y = c.out[0];
  if (y.dtype != planFloatType(c.ints.back()))
    return "output " + describe(y) + " is not of the last step's type";
  for (const TensorRef &x : c.in) {
    Shape s;
    if (!isFloatStorage(x.dtype) || !broadcastShape(x.shape, y.shape, s) || s != y.shape)
      return "input " + describe(x) + " does not broadcast to " + describe(y);
  }
  return "";
}

/// Each output element: the inputs read at their broadcast offsets as float,
/// each step in float rounded to its type, as the separate kernels do.
Status run_elementwise(const KernelCall &c) {
  const TensorRef &y = c.out[0];
  int64_t inputs = c.ints[0], steps = c.ints[1], rank = (int64_t)y.shape.size();
  // Per input, the stride of each output dimension (0 where it broadcasts).
  std::vector<std::vector<int64_t>> strides(inputs, std::vector<int64_t>(rank, 0));
  for (int64_t k = 0; k < inputs; ++k) {
    const Shape &s = c.in[k].shape;
    int64_t lead = rank - (int64_t)s.size(), stride = 1;
    for (int64_t d = (int64_t)s.size() - 1; d >= 0; --d) {
      strides[k][d + lead] = s[d] == 1 ? 0 : stride;
      stride *= s[d];
    }
  }
  auto load = [](const TensorRef &t, int64_t at) {
    return t.dtype == DType::F32 ? t.as<float>()[at] : loadNarrow(t, at);
  };
  auto round = [](float v, DType t) {
    return t == DType::BF16 ? float(BF16(v)) : t == DType::F16 ? float(F16(v)) : v;
  };
  parallelFor(y.numel(), [&](int64_t begin, int64_t end) {
    std::vector<float> v(inputs + steps);
    std::vector<int64_t> coord(rank);
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t d = rank - 1, r = i; d >= 0; --d) {
        coord[d] = r % y.shape[d];
        r /= y.shape[d];
      }
      for (int64_t k = 0; k < inputs; ++k) {
        int64_t at = 0;
        for (int64_t d = 0; d < rank; ++d)
          at += coord[d] * strides[k][d];
        v[k] = load(c.in[k], at);
      }
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t *step = &c.ints[2 + 4 * s];
        float a = v[step[1]], b = step[2] >= 0 ? v[step[2]] : 0.0f, r;
        switch (step[0]) {
        case 0: r = a + b; break;
        case 1: r = a - b; break;
        case 2: r = a * b; break;
        case 3: r = a / b; break;
        case 4: r = -a; break;
        default: r = a; break;
        }
        v[inputs + s] = round(r, planFloatType(step[3]));
      }
      float r = v[inputs + steps - 1];
      if (y.dtype == DType::F32)
        y.as<float>()[i] = r;
      else
        storeNarrow(y, i, r);
    }
  });
  return Status::ok();
}

std::string check_cast_many(const KernelCall &c) {
  if (c.in.empty() || c.in.size() != c.out.size())
    return "expects as many outputs as inputs, at least one";
  for (size_t i = 0; i < c.in.size(); ++i)
    if (c.in[i].shape != c.out[i].shape || !isFloatStorage(c.in[i].dtype) ||
        !isFloatStorage(c.out[i].dtype) || c.in[i].dtype != c.in[0].dtype ||
        c.out[i].dtype != c.out[0].dtype)
      return "pair " + std::to_string(i) + ": cannot cast " + describe(c.in[i]) + " to " +
             describe(c.out[i]) + " with the others";
  return "";
}
/// Each pair as the cast kernel converts it: the same bits.
Status run_cast_many(const KernelCall &c) {
  for (size_t i = 0; i < c.in.size(); ++i) {
    KernelCall one;
    one.in = {c.in[i]};
    one.out = {c.out[i]};
    ZRT_RETURN_IF_ERROR(run_cast(one));
  }
  return Status::ok();
}

std::string check_cast_concat(const KernelCall &c) {
  if (c.in.empty() || c.out.size() != 1)
    return "expects at least one input and one output";
  const TensorRef &y = c.out[0];
  if (y.shape.size() != 1 || !isFloatStorage(y.dtype))
    return "output " + describe(y) + " should be a 1-D float tensor";
  int64_t total = 0;
  for (const TensorRef &x : c.in) {
    if (!isFloatStorage(x.dtype))
      return "input " + describe(x) + " is not a float tensor";
    total += x.numel();
  }
  if (total != y.shape[0])
    return "the inputs hold " + std::to_string(total) + " elements, the output " +
           std::to_string(y.shape[0]);
  return "";
}
/// Piece i cast into its slice of the output, as the cast kernel does.
Status run_cast_concat(const KernelCall &c) {
  const TensorRef &y = c.out[0];
  int64_t at = 0;
  for (const TensorRef &x : c.in) {
    KernelCall one;
    one.in = {x};
    one.in[0].shape = {x.numel()};
    TensorRef slice = y;
    slice.shape = {x.numel()};
    slice.data = y.data + at * (int64_t)dtypeSize(y.dtype);
    one.out = {slice};
    ZRT_RETURN_IF_ERROR(run_cast(one));
    at += x.numel();
  }
  return Status::ok();
}

std::string check_expand(const KernelCall &c) {
  if (auto e = arity(c, 1, 1); !e.empty())
    return e;
  Shape s;
  if (c.in[0].dtype != c.out[0].dtype || !broadcastShape(c.in[0].shape, c.out[0].shape, s) ||
      s != c.out[0].shape)
    return "cannot broadcast " + describe(c.in[0]) + " to " + describe(c.out[0]);
  return "";
}
Status run_expand(const KernelCall &c) {
  size_t es = dtypeSize(c.out[0].dtype);
  const char *x = c.in[0].data;
  char *y = c.out[0].data;
  forEachBroadcast<1>(c.out[0].shape, {c.in[0].shape},
                      [&](int64_t k, const std::array<int64_t, 1> &off) {
                        std::memcpy(y + k * es, x + off[0] * es, es);
                      });
  return Status::ok();
}

std::string check_transpose(const KernelCall &c) {
  if (auto e = arity(c, 1, 1); !e.empty())
    return e;
  const Shape &in = c.in[0].shape;
  if (c.ints.size() != in.size() || c.in[0].dtype != c.out[0].dtype)
    return "permutation and operand ranks or types differ";
  std::vector<bool> seen(in.size(), false);
  Shape expected;
  for (int64_t p : c.ints) {
    if (!validAxis(p, in.size()) || seen[p])
      return "not a permutation";
    seen[p] = true;
    expected.push_back(in[p]);
  }
  if (expected != c.out[0].shape)
    return "result " + describe(c.out[0]) + " is not the permuted input";
  return "";
}
Status run_transpose(const KernelCall &c) {
  const Shape &in = c.in[0].shape, &out = c.out[0].shape;
  size_t es = dtypeSize(c.out[0].dtype);
  std::vector<int64_t> inStrides(in.size(), 1), strides(out.size());
  for (int64_t d = (int64_t)in.size() - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * in[d + 1];
  for (size_t d = 0; d < out.size(); ++d)
    strides[d] = inStrides[c.ints[d]];
  std::vector<int64_t> coord(out.size(), 0);
  const char *x = c.in[0].data;
  char *y = c.out[0].data;
  int64_t off = 0;
  for (int64_t k = 0, n = numelOf(out); k < n; ++k) {
    std::memcpy(y + k * es, x + off * es, es);
    for (int64_t d = (int64_t)out.size() - 1; d >= 0; --d) {
      off += strides[d];
      if (++coord[d] < out[d])
        break;
      off -= strides[d] * coord[d];
      coord[d] = 0;
    }
  }
  return Status::ok();
}

std::string check_slice(const KernelCall &c) {
  if (auto e = arity(c, 1, 1); !e.empty())
    return e;
  const Shape &in = c.in[0].shape, &out = c.out[0].shape;
  if (c.ints.size() != 2 * in.size() || out.size() != in.size() ||
      c.in[0].dtype != c.out[0].dtype)
    return "expects start and stride per dimension";
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t start = c.ints[d], stride = c.ints[in.size() + d];
    if (stride < 1 || start < 0 || (out[d] > 0 && start + (out[d] - 1) * stride >= in[d]) ||
        start > in[d])
      return "slice of dimension " + std::to_string(d) + " is out of bounds";
  }
  return "";
}
Status run_slice(const KernelCall &c) {
  const Shape &in = c.in[0].shape, &out = c.out[0].shape;
  size_t es = dtypeSize(c.out[0].dtype), rank = in.size();
  std::vector<int64_t> inStrides(rank, 1);
  for (int64_t d = (int64_t)rank - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * in[d + 1];
  int64_t base = 0;
  std::vector<int64_t> step(rank);
  for (size_t d = 0; d < rank; ++d) {
    base += c.ints[d] * inStrides[d];
    step[d] = c.ints[rank + d] * inStrides[d];
  }
  std::vector<int64_t> coord(rank, 0);
  int64_t off = base;
  for (int64_t k = 0, n = numelOf(out); k < n; ++k) {
    std::memcpy(c.out[0].data + k * es, c.in[0].data + off * es, es);
    for (int64_t d = (int64_t)rank - 1; d >= 0; --d) {
      off += step[d];
      if (++coord[d] < out[d])
        break;
      off -= step[d] * coord[d];
      coord[d] = 0;
    }
  }
  return Status::ok();
}

/// Shared by concat and split: |parts| stacked along |axis| form |whole|.
std::string checkStacked(const std::vector<TensorRef> &parts, const TensorRef &whole,
                         const std::vector<int64_t> &ints) {
  if (ints.size() != 1 || !validAxis(ints[0], whole.shape.size()))
    return "expects a valid axis";
  int64_t axis = ints[0], total = 0;
  for (const TensorRef &p : parts) {
    if (p.dtype != whole.dtype || p.shape.size() != whole.shape.size())
      return "pieces differ in type or rank from " + describe(whole);
    for (size_t d = 0; d < p.shape.size(); ++d)
      if ((int64_t)d != axis && p.shape[d] != whole.shape[d])
        return "piece " + describe(p) + " does not fit " + describe(whole);
    total += p.shape[axis];
  }
  if (total != whole.shape[axis])
    return "pieces do not add up along the axis";
  return "";
}
/// Copies between the stacked pieces and the whole, in either direction.
void copyStacked(const std::vector<TensorRef> &parts, const TensorRef &whole, int64_t axis,
                 bool toWhole) {
  size_t es = dtypeSize(whole.dtype);
  int64_t outer = 1, inner = es;
  for (int64_t d = 0; d < axis; ++d)
    outer *= whole.shape[d];
  for (size_t d = axis + 1; d < whole.shape.size(); ++d)
    inner *= whole.shape[d];
  int64_t wholeRow = whole.shape[axis] * inner;
  int64_t at = 0;
  for (const TensorRef &p : parts) {
    int64_t row = p.shape[axis] * inner;
    for (int64_t o = 0; o < outer; ++o) {
      char *w = whole.data + o * wholeRow + at;
      char *q = p.data + o * row;
      if (toWhole)
        std::memcpy(w, q, row);
      else
        std::memcpy(q, w, row);
    }
    at += row;
  }
}
std::string check_concat(const KernelCall &c) {
  if (c.in.empty() || c.out.size() != 1)
    return "expects inputs and one output";
  return checkStacked(c.in, c.out[0], c.ints);
}
Status run_concat(const KernelCall &c) {
  copyStacked(c.in, c.out[0], c.ints[0], true);
  return Status::ok();
}
std::string check_split(const KernelCall &c) {
  if (c.in.size() != 1 || c.out.empty())
    return "expects one input and outputs";
  return checkStacked(c.out, c.in[0], c.ints);
}
Status run_split(const KernelCall &c) {
  copyStacked(c.out, c.in[0], c.ints[0], false);
  return Status::ok();
}

std::string check_gather(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  const TensorRef &x = c.in[0], &idx = c.in[1], &y = c.out[0];
  if (c.ints.size() != 1 || !validAxis(c.ints[0], x.shape.size()))
    return "expects a valid axis";
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    return "indices must be int64 or int32, got " + describe(idx);
  int64_t axis = c.ints[0];
  Shape expected(x.shape.begin(), x.shape.begin() + axis);
  expected.insert(expected.end(), idx.shape.begin(), idx.shape.end());
  expected.insert(expected.end(), x.shape.begin() + axis + 1, x.shape.end());
  if (y.dtype != x.dtype || y.shape != expected)
    return "result " + describe(y) + " should be " + shapeStr(expected);
  return "";
}
Status run_gather(const KernelCall &c) {
  const TensorRef &x = c.in[0], &idx = c.in[1], &y = c.out[0];
  int64_t axis = c.ints[0], dim = x.shape[axis];
  size_t es = dtypeSize(x.dtype);
  int64_t outer = 1, inner = es;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  int64_t n = idx.numel();
  char *out = y.data;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k) {
      int64_t j = idx.dtype == DType::I64 ? idx.as<int64_t>()[k] : idx.as<int32_t>()[k];
      ZRT_RETURN_IF_ERROR(gatherIndex(j, dim));
      std::memcpy(out, x.data + (o * dim + j) * inner, inner);
      out += inner;
    }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Matmul and reductions
//===----------------------------------------------------------------------===//

std::string check_matmul(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  if (auto e = checkInts(c, 2); !e.empty())
    return e;
  const TensorRef &a = c.in[0], &b = c.in[1], &o = c.out[0];
  if (!isFloatStorage(a.dtype) || b.dtype != a.dtype || o.dtype != a.dtype)
    return "expects float32 or bfloat16 operands and result of one type";
  if (a.shape.size() < 2 || b.shape.size() < 2)
    return "operands need rank >= 2";
  bool ta = c.ints[0], tb = c.ints[1];
  size_t ra = a.shape.size(), rb = b.shape.size();
  int64_t m = a.shape[ra - (ta ? 1 : 2)], k = a.shape[ra - (ta ? 2 : 1)];
  int64_t k2 = b.shape[rb - (tb ? 1 : 2)], n = b.shape[rb - (tb ? 2 : 1)];
  Shape batch;
  if (k != k2 || !broadcastShape(Shape(a.shape.begin(), a.shape.end() - 2),
                                 Shape(b.shape.begin(), b.shape.end() - 2), batch))
    return "operands " + describe(a) + " and " + describe(b) + " do not multiply";
  batch.push_back(m);
  batch.push_back(n);
  if (o.shape != batch)
    return "result " + describe(o) + " should be " + shapeStr(batch);
  return "";
}
Status run_matmul(const KernelCall &c) {
  const TensorRef &a = c.in[0], &b = c.in[1], &o = c.out[0];
  bool ta = c.ints[0], tb = c.ints[1];
  size_t ra = a.shape.size(), rb = b.shape.size(), ro = o.shape.size();
  int64_t m = o.shape[ro - 2], n = o.shape[ro - 1], k = a.shape[ra - (ta ? 2 : 1)];
  Shape batch(o.shape.begin(), o.shape.end() - 2);
  Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  int64_t aMat = a.shape[ra - 2] * a.shape[ra - 1], bMat = b.shape[rb - 2] * b.shape[rb - 1];
  int lda = (int)a.shape[ra - 1], ldb = (int)b.shape[rb - 1];
  // bfloat16 / float16: widen the operands, multiply in float32, round.
  std::vector<float> wa, wb, wo;
  auto widen = [](const TensorRef &t, std::vector<float> &w) {
    w.resize(t.numel());
    for (int64_t k = 0; k < (int64_t)w.size(); ++k)
      w[k] = loadNarrow(t, k);
    return w.data();
  };
  bool bf16 = isNarrowFloat(a.dtype);
  const float *pa = bf16 ? widen(a, wa) : a.as<float>(), *pb = bf16 ? widen(b, wb) : b.as<float>();
  if (bf16)
    wo.resize(o.numel());
  float *po = bf16 ? wo.data() : o.as<float>();
  forEachBroadcast<2>(batch, {ba, bb}, [&](int64_t i, const std::array<int64_t, 2> &off) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, 1.0f, pa + off[0] * aMat, lda, pb + off[1] * bMat, ldb,
                0.0f, po + i * m * n, (int)n);
  });
  for (int64_t k = 0; k < (int64_t)wo.size(); ++k)
    storeNarrow(o, k, wo[k]);
  return Status::ok();
}

std::string check_matmul_bias(const KernelCall &c) {
  if (c.in.size() != 3)
    return "expects lhs, rhs and bias";
  KernelCall product = c;
  product.in.pop_back();
  if (auto e = check_matmul(product); !e.empty())
    return e;
  const TensorRef &bias = c.in[2], &o = c.out[0];
  if (bias.dtype != o.dtype || bias.shape != Shape{o.shape.back()})
    return "bias " + describe(bias) + " should be one value per column of " + describe(o);
  return "";
}
/// The GEMM, then the bias added as the separate add kernel does (in float,
/// rounded to the storage type): the same bits as the unfused pair.
Status run_matmul_bias(const KernelCall &c) {
  KernelCall product = c;
  product.in.pop_back();
  ZRT_RETURN_IF_ERROR(run_matmul(product));
  KernelCall add;
  add.in = {c.out[0], c.in[2]};
  add.out = {c.out[0]};
  return run_add(add);
}

std::string check_matmul_bias_gelu(const KernelCall &c) {
  if (c.in.size() != 3 || c.out.size() != 2 || c.ints.size() != 2)
    return "expects lhs, rhs and bias, the result and the pre-activation, [transposes]";
  KernelCall product = c;
  product.out.pop_back();
  if (auto e = check_matmul_bias(product); !e.empty())
    return e;
  if (c.out[1].shape != c.out[0].shape || c.out[1].dtype != c.out[0].dtype)
    return "pre-activation " + describe(c.out[1]) + " should be like " + describe(c.out[0]);
  return "";
}
/// pre = matmul_bias, then the tanh-GELU of it: the unfused kernels' bits
/// (the GPU's epilogue applies the GELU before rounding pre).
Status run_matmul_bias_gelu(const KernelCall &c) {
  KernelCall product = c;
  product.out = {c.out[1]};
  ZRT_RETURN_IF_ERROR(run_matmul_bias(product));
  KernelCall gelu;
  gelu.in = {c.out[1]};
  gelu.out = {c.out[0]};
  gelu.ints = {1};
  return findKernel("gelu")->run(gelu);
}

std::string check_matmul_gelu_grad(const KernelCall &c) {
  if (c.in.size() != 3 || c.out.size() != 1 || c.ints.size() != 2)
    return "expects lhs, rhs and the pre-activation, one result, [transposes]";
  KernelCall product = c;
  product.in.pop_back();
  if (auto e = check_matmul(product); !e.empty())
    return e;
  if (c.in[2].shape != c.out[0].shape || c.in[2].dtype != c.out[0].dtype)
    return "pre-activation " + describe(c.in[2]) + " should be like " + describe(c.out[0]);
  return "";
}
/// The product, then gelu_grad(pre, product) in place: the unfused bits.
Status run_matmul_gelu_grad(const KernelCall &c) {
  KernelCall product = c;
  product.in.pop_back();
  ZRT_RETURN_IF_ERROR(run_matmul(product));
  KernelCall grad;
  grad.in = {c.in[2], c.out[0]};
  grad.out = {c.out[0]};
  grad.ints = {1};
  return findKernel("gelu_grad")->run(grad);
}

std::string check_reduce(const KernelCall &c) {
  if (auto e = arity(c, 1, 1); !e.empty())
    return e;
  const TensorRef &x = c.in[0], &y = c.out[0];
  if (c.ints.size() < 2 || c.ints[0] < 0 || c.ints[0] > 4)
    return "expects [kind, keepdims, axes...]";
  if (!isFloatStorage(x.dtype) || y.dtype != x.dtype)
    return "expects float32 or bfloat16 in and out of one type";
  std::vector<bool> reduced(x.shape.size(), false);
  for (size_t i = 2; i < c.ints.size(); ++i) {
    if (!validAxis(c.ints[i], x.shape.size()) || reduced[c.ints[i]])
      return "invalid axes";
    reduced[c.ints[i]] = true;
  }
  Shape expected;
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (!reduced[d])
      expected.push_back(x.shape[d]);
    else if (c.ints[1])
      expected.push_back(1);
  if (y.shape != expected)
    return "result " + describe(y) + " should be " + shapeStr(expected);
  return "";
}
Status run_reduce(const KernelCall &c) {
  const TensorRef &x = c.in[0], &y = c.out[0];
  int64_t kind = c.ints[0];
  // Map each input element to its output element (reduced dims stride 0).
  std::vector<bool> reduced(x.shape.size(), false);
  for (size_t i = 2; i < c.ints.size(); ++i)
    reduced[c.ints[i]] = true;
  Shape kept;
  for (size_t d = 0; d < x.shape.size(); ++d)
    kept.push_back(reduced[d] ? 1 : x.shape[d]);
  int64_t n = y.numel(), count = x.numel() / std::max<int64_t>(n, 1);
  std::vector<double> acc(n, kind == 2 ? -INFINITY : kind == 3 ? INFINITY : kind == 4 ? 1.0 : 0.0);
  // Iterate the input in the index space of x, with kept's strides.
  forEachBroadcast<1>(x.shape, {kept}, [&](int64_t k, const std::array<int64_t, 1> &off) {
    double v = isNarrowFloat(x.dtype) ? loadNarrow(x, k) : x.as<float>()[k];
    double &a = acc[off[0]];
    switch (kind) {
    case 0: case 1: a += v; break;
    case 2: a = std::max(a, v); break;
    case 3: a = std::min(a, v); break;
    default: a *= v; break;
    }
  });
  for (int64_t k = 0; k < n; ++k) {
    float v = (float)(kind == 1 ? acc[k] / count : acc[k]);
    if (isNarrowFloat(y.dtype))
      storeNarrow(y, k, v);
    else
      y.as<float>()[k] = v;
  }
  return Status::ok();
}

std::string check_matmul_bgrad(const KernelCall &c) {
  if (auto e = arity(c, 2, 2); !e.empty())
    return e;
  const TensorRef &x = c.in[0], &dy = c.in[1], &w = c.out[0], &b = c.out[1];
  if (x.shape.size() != 2 || dy.shape.size() != 2 || x.shape[0] != dy.shape[0])
    return "expects x [R, K] and dy [R, N], got " + describe(x) + " and " + describe(dy);
  if (!isFloatStorage(x.dtype) || dy.dtype != x.dtype || w.dtype != x.dtype || b.dtype != x.dtype)
    return "expects one float type for x, dy and both gradients";
  int64_t k = x.shape[1], n = dy.shape[1];
  if (w.shape != Shape{k, n})
    return "weight gradient " + describe(w) + " should be " + shapeStr({k, n});
  if (b.shape != Shape{n} && b.shape != Shape{1, n})
    return "bias gradient " + describe(b) + " should be [" + std::to_string(n) + "] or [1, " +
           std::to_string(n) + "]";
  return "";
}
/// x^T dy and the column sums of dy: the matmul and reduce kernels the
/// unfused pair ran, so the same bits.
Status run_matmul_bgrad(const KernelCall &c) {
  KernelCall product;
  product.in = {c.in[0], c.in[1]};
  product.out = {c.out[0]};
  product.ints = {1, 0};
  ZRT_RETURN_IF_ERROR(run_matmul(product));
  KernelCall sum;
  sum.in = {c.in[1]};
  sum.out = {c.out[1]};
  sum.ints = {0, c.out[1].shape.size() == 2 ? 1 : 0, 0};
  return run_reduce(sum);
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

std::string check_softmax(const KernelCall &c) {
  if (auto e = checkUnaryFloat(c); !e.empty())
    return e;
  if (c.ints.size() != 1 || !validAxis(c.ints[0], c.in[0].shape.size()))
    return "expects a valid axis";
  return "";
}
template <typename T> Status softmaxImpl(const KernelCall &c, bool log) {
  int64_t outer, dim, inner;
  around(c.in[0].shape, c.ints[0], outer, dim, inner);
  const T *x = c.in[0].as<T>();
  T *y = c.out[0].as<T>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const T *xr = x + o * dim * inner + i;
      T *yr = y + o * dim * inner + i;
      float mx = -INFINITY;
      for (int64_t j = 0; j < dim; ++j)
        mx = std::max(mx, float(xr[j * inner]));
      double sum = 0;
      for (int64_t j = 0; j < dim; ++j)
        sum += std::exp((double)float(xr[j * inner]) - mx);
      double lse = std::log(sum);
      for (int64_t j = 0; j < dim; ++j) {
        double z = (double)float(xr[j * inner]) - mx;
        yr[j * inner] = T((float)(log ? z - lse : std::exp(z) / sum));
      }
    }
  return Status::ok();
}
Status run_softmax(const KernelCall &c) {
  return dispatchFloat(c.in[0].dtype,
                       [&](auto tag) { return softmaxImpl<decltype(tag)>(c, false); });
}
/// zero.attention's operands: q [B, Sq, H, D], k and v [B, Sk, H, D], bias
/// [B or 1, H or 1, Sq, Sk]; or, packed (zero.attention_packed), q, k, v the
/// three parts of qkv [B, S, 3, H, D] and dq, dk, dv those of dqkv.
///   attention       (q, k, v, bias) -> (out, lse)             ints [nan_to_zero]
///                   (qkv, bias) -> (out, lse)                 ints [nan_to_zero, 1]
///   attention_grad  (q, k, v, bias, out, lse, dout) -> (dq, dk, dv)
///                   (qkv, bias, out, lse, dout) -> (dqkv)     ints [1]
/// Position i of head h starts at (b S + i) * stride + h D, with the stride
/// of q/k/v (|in|), of out and dout (|out|) and of dq/dk/dv (|grad|).
struct AttentionShape {
  bool packed = false;
  int64_t b, sq, sk, h, d, biasB, biasH, in, out, grad;
  int64_t qAt(int64_t bi, int64_t i, int64_t hi) const { return (bi * sq + i) * in + hi * d; }
  int64_t kAt(int64_t bi, int64_t j, int64_t hi) const { return (bi * sk + j) * in + hi * d; }
  int64_t oAt(int64_t bi, int64_t i, int64_t hi) const { return (bi * sq + i) * out + hi * d; }
  int64_t dqAt(int64_t bi, int64_t i, int64_t hi) const { return (bi * sq + i) * grad + hi * d; }
  int64_t dkAt(int64_t bi, int64_t j, int64_t hi) const { return (bi * sk + j) * grad + hi * d; }
  int64_t biasRow(int64_t bi, int64_t hi, int64_t i) const {
    return (((biasB == 1 ? 0 : bi) * biasH + (biasH == 1 ? 0 : hi)) * sq + i) * sk;
  }
  int64_t lseAt(int64_t bi, int64_t hi, int64_t i) const { return (bi * h + hi) * sq + i; }
  /// Offsets of k and v (and dk, dv) from q's (dq's) data, in elements.
  int64_t kOffset() const { return packed ? h * d : 0; }
  int64_t vOffset() const { return packed ? 2 * h * d : 0; }
  /// The index of the bias among the inputs; the forward result's follow.
  int biasIndex() const { return packed ? 1 : 3; }
  /// q, k, v and the mask of a (float32) call.
  std::array<const float *, 4> inputs(const KernelCall &c) const {
    const float *q = c.in[0].as<float>();
    return {q, packed ? q + kOffset() : c.in[1].as<float>(),
            packed ? q + vOffset() : c.in[2].as<float>(), c.in[biasIndex()].as<float>()};
  }
};
static std::string attentionShape(const KernelCall &c, bool backward, AttentionShape &a) {
  size_t flag = backward ? 0 : 1;
  a.packed = c.ints.size() > flag && c.ints[flag] != 0;
  size_t inputs = (a.packed ? 2 : 4) + (backward ? 3 : 0);
  if (c.in.size() != inputs || c.out.size() != (backward ? (a.packed ? 1u : 3u) : 2u))
    return "expects " + std::to_string(inputs) + " inputs and " +
           std::to_string(backward ? (a.packed ? 1 : 3) : 2) + " results";
  const TensorRef &q = c.in[0], &bias = c.in[a.biasIndex()];
  bool typesAgree = isFloatStorage(q.dtype) && bias.dtype == q.dtype;
  if (!a.packed)
    typesAgree &= c.in[1].dtype == q.dtype && c.in[2].dtype == q.dtype;
  if (!typesAgree || q.shape.size() != (a.packed ? 5u : 4u) || bias.shape.size() != 4)
    return a.packed ? "expects qkv [B, S, 3, H, D] and bias [B|1, H|1, S, S] of one float type"
                    : "expects q [B, Sq, H, D], k and v [B, Sk, H, D] and bias [B|1, H|1, Sq, "
                      "Sk] of one float type";
  if (a.packed) {
    if (q.shape[2] != 3)
      return "expects qkv [B, S, 3, H, D]";
    a.b = q.shape[0], a.sq = a.sk = q.shape[1], a.h = q.shape[3], a.d = q.shape[4];
    a.in = a.grad = 3 * a.h * a.d;
  } else {
    const TensorRef &k = c.in[1], &v = c.in[2];
    a.b = q.shape[0], a.sq = q.shape[1], a.sk = k.shape.size() == 4 ? k.shape[1] : -1,
    a.h = q.shape[2], a.d = q.shape[3];
    if (k.shape != Shape{a.b, a.sk, a.h, a.d} || v.shape != k.shape)
      return "q " + shapeStr(q.shape) + " and k/v " + shapeStr(k.shape) + " do not agree";
    a.in = a.grad = a.h * a.d;
  }
  a.out = a.h * a.d;
  a.biasB = bias.shape[0], a.biasH = bias.shape[1];
  if ((a.biasB != 1 && a.biasB != a.b) || (a.biasH != 1 && a.biasH != a.h) ||
      bias.shape[2] != a.sq || bias.shape[3] != a.sk)
    return "bias " + shapeStr(bias.shape) + " does not agree with the attention's shape";
  if (c.floats.size() != 1)
    return "expects a scale";
  Shape outShape{a.b, a.sq, a.h, a.d}, lseShape{a.b, a.h, a.sq};
  const TensorRef &result = backward ? c.in[a.biasIndex() + 1] : c.out[0];
  const TensorRef &lse = backward ? c.in[a.biasIndex() + 2] : c.out[1];
  if (result.shape != outShape || result.dtype != q.dtype || lse.dtype != DType::F32 ||
      lse.shape != lseShape)
    return "expects a result " + shapeStr(outShape) + " of q's type and a float32 lse " +
           shapeStr(lseShape);
  if (backward) {
    const TensorRef &g = c.in[a.biasIndex() + 3];
    if (g.shape != outShape || g.dtype != q.dtype)
      return "expects a result gradient of the result's type and shape";
    for (size_t i = 0; i < c.out.size(); ++i)
      if (c.out[i].shape != c.in[i].shape || c.out[i].dtype != c.in[i].dtype)
        return "expects gradients of the inputs' types and shapes";
  }
  return "";
}
std::string check_attention(const KernelCall &c) {
  if (c.ints.empty() || c.ints.size() > 2)
    return "expects [nan_to_zero] or [nan_to_zero, packed]";
  AttentionShape a;
  return attentionShape(c, false, a);
}
/// The reference flash attention: per row, the scaled, biased scores, their
/// log-sum-exp and the probability-weighted sum of v (double accumulation).
/// A row whose scores are all -inf gets 0 (nan_to_zero) or NaN, lse +inf.
Status run_attention(const KernelCall &c) {
  AttentionShape a;
  attentionShape(c, false, a);
  auto [q, k, v, bias] = a.inputs(c);
  float *out = c.out[0].as<float>(), *lse = c.out[1].as<float>();
  double scale = c.floats[0];
  bool nanToZero = c.ints[0] != 0;
  std::vector<double> s(a.sk), o(a.d);
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t h = 0; h < a.h; ++h)
      for (int64_t i = 0; i < a.sq; ++i) {
        const float *qi = q + a.qAt(b, i, h), *bi = bias + a.biasRow(b, h, i);
        double m = -INFINITY;
        for (int64_t j = 0; j < a.sk; ++j) {
          const float *kj = k + a.kAt(b, j, h);
          double dot = 0;
          for (int64_t d = 0; d < a.d; ++d)
            dot += (double)qi[d] * kj[d];
          s[j] = dot * scale + bi[j];
          m = std::max(m, s[j]);
        }
        float *oi = out + a.oAt(b, i, h);
        if (m == -INFINITY) {
          std::fill(oi, oi + a.d, nanToZero ? 0.0f : NAN);
          lse[a.lseAt(b, h, i)] = INFINITY;
          continue;
        }
        double l = 0;
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t j = 0; j < a.sk; ++j) {
          double p = std::exp(s[j] - m);
          l += p;
          const float *vj = v + a.kAt(b, j, h);
          for (int64_t d = 0; d < a.d; ++d)
            o[d] += p * vj[d];
        }
        for (int64_t d = 0; d < a.d; ++d)
          oi[d] = (float)(o[d] / l);
        lse[a.lseAt(b, h, i)] = (float)(m + std::log(l));
      }
  return Status::ok();
}
std::string check_attention_grad(const KernelCall &c) {
  if (c.ints.size() > 1)
    return "expects [] or [packed]";
  AttentionShape a;
  return attentionShape(c, true, a);
}
/// The reference backward: probabilities recomputed from lse; dS = P (dP - rowsum(dO * O)).
Status run_attention_grad(const KernelCall &c) {
  AttentionShape a;
  attentionShape(c, true, a);
  int at = a.biasIndex();
  auto [q, k, v, bias] = a.inputs(c);
  const float *out = c.in[at + 1].as<float>(), *lse = c.in[at + 2].as<float>(),
              *g = c.in[at + 3].as<float>();
  double scale = c.floats[0];
  // Accumulators in the gradients' layout (dqkv packed: one array).
  std::vector<double> dq(c.out[0].numel()), dkOwn, dvOwn;
  if (!a.packed) {
    dkOwn.resize(c.out[1].numel());
    dvOwn.resize(c.out[2].numel());
  }
  double *dk = a.packed ? dq.data() + a.kOffset() : dkOwn.data();
  double *dv = a.packed ? dq.data() + a.vOffset() : dvOwn.data();
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t h = 0; h < a.h; ++h)
      for (int64_t i = 0; i < a.sq; ++i) {
        double rowLse = lse[a.lseAt(b, h, i)];
        if (rowLse == INFINITY)
          continue; // an all -inf row: its probabilities are 0
        const float *qi = q + a.qAt(b, i, h), *gi = g + a.oAt(b, i, h),
                    *oi = out + a.oAt(b, i, h), *bi = bias + a.biasRow(b, h, i);
        double rowD = 0;
        for (int64_t d = 0; d < a.d; ++d)
          rowD += (double)gi[d] * oi[d];
        double *dqi = dq.data() + a.dqAt(b, i, h);
        for (int64_t j = 0; j < a.sk; ++j) {
          const float *kj = k + a.kAt(b, j, h), *vj = v + a.kAt(b, j, h);
          double dot = 0, dp = 0;
          for (int64_t d = 0; d < a.d; ++d) {
            dot += (double)qi[d] * kj[d];
            dp += (double)gi[d] * vj[d];
          }
          double p = std::exp(dot * scale + bi[j] - rowLse);
          if (p == 0)
            continue;
          double ds = p * (dp - rowD) * scale;
          double *dkj = dk + a.dkAt(b, j, h), *dvj = dv + a.dkAt(b, j, h);
          for (int64_t d = 0; d < a.d; ++d) {
            dqi[d] += ds * kj[d];
            dkj[d] += ds * qi[d];
            dvj[d] += p * gi[d];
          }
        }
      }
  std::vector<std::vector<double> *> acc{&dq};
  if (!a.packed)
    acc.insert(acc.end(), {&dkOwn, &dvOwn});
  for (size_t i = 0; i < acc.size(); ++i) {
    float *o = c.out[i].as<float>();
    for (size_t e = 0; e < acc[i]->size(); ++e)
      o[e] = (float)(*acc[i])[e];
  }
  return Status::ok();
}

std::string check_bias_softmax(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  const TensorRef &x = c.in[0], &bias = c.in[1], &y = c.out[0];
  if (!isFloatStorage(x.dtype) || bias.dtype != x.dtype || y.dtype != x.dtype ||
      y.shape != x.shape || x.shape.empty())
    return "expects float input, bias and result of one type, result of the input's shape";
  Shape s;
  if (!broadcastShape(x.shape, bias.shape, s) || s != x.shape)
    return "bias " + describe(bias) + " does not broadcast to " + describe(x);
  if (c.ints.size() != 1)
    return "expects ints [nan_to_zero]";
  return "";
}
/// Element offsets into a bias broadcast to |shape|: of each row (all but
/// the last dimension), and the stride along the row (0 or 1).
void biasRows(const Shape &shape, const Shape &bias, std::vector<int64_t> &rowOffset,
              int64_t &step) {
  size_t rank = shape.size(), lead = rank - bias.size();
  std::vector<int64_t> stride(rank, 0);
  for (int64_t d = (int64_t)rank - 1, s = 1; d >= (int64_t)lead; --d) {
    int64_t size = bias[d - lead];
    stride[d] = size == 1 ? 0 : s;
    s *= size;
  }
  step = stride[rank - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d)
    rows *= shape[d];
  rowOffset.assign(rows, 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = (int64_t)rank - 2, rest = r; d >= 0; --d) {
      rowOffset[r] += (rest % shape[d]) * stride[d];
      rest /= shape[d];
    }
}
template <typename T> Status biasSoftmaxImpl(const KernelCall &c) {
  const Shape &shape = c.in[0].shape;
  int64_t dim = shape.back(), step;
  std::vector<int64_t> rowOffset;
  biasRows(shape, c.in[1].shape, rowOffset, step);
  const T *x = c.in[0].as<T>(), *bias = c.in[1].as<T>();
  T *y = c.out[0].as<T>();
  bool nanToZero = c.ints[0] != 0;
  std::vector<float> z(dim);
  for (size_t r = 0; r < rowOffset.size(); ++r) {
    const T *xr = x + r * dim, *br = bias + rowOffset[r];
    T *yr = y + r * dim;
    float mx = -INFINITY;
    for (int64_t j = 0; j < dim; ++j) {
      z[j] = float(xr[j]) + float(br[j * step]);
      mx = std::max(mx, z[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < dim; ++j)
      sum += std::exp((double)z[j] - mx);
    for (int64_t j = 0; j < dim; ++j) {
      float p = (float)(std::exp((double)z[j] - mx) / sum);
      yr[j] = T(nanToZero && std::isnan(p) ? 0.0f : p);
    }
  }
  return Status::ok();
}
Status run_bias_softmax(const KernelCall &c) {
  return dispatchFloat(c.in[0].dtype, [&](auto tag) { return biasSoftmaxImpl<decltype(tag)>(c); });
}
Status run_log_softmax(const KernelCall &c) {
  return dispatchFloat(c.in[0].dtype,
                       [&](auto tag) { return softmaxImpl<decltype(tag)>(c, true); });
}

std::string checkNorm(const KernelCall &c, bool allowBias) {
  size_t nin = c.in.size();
  if (nin < 2 || nin > (allowBias ? 3u : 2u) || c.out.size() != 1)
    return "wrong number of operands";
  const TensorRef &x = c.in[0];
  if (c.ints.size() != 1 || !validAxis(c.ints[0], x.shape.size()) || c.floats.size() != 1 ||
      !(c.floats[0] >= 0))
    return "expects [axis] and [epsilon >= 0]";
  if (!isFloatStorage(x.dtype) || c.out[0].dtype != x.dtype || c.out[0].shape != x.shape)
    return "expects float32 or bfloat16 in and out of one type and shape";
  Shape normShape(x.shape.begin() + c.ints[0], x.shape.end());
  for (size_t i = 1; i < nin; ++i)
    if (c.in[i].dtype != x.dtype || c.in[i].shape != normShape)
      return "scale/bias " + describe(c.in[i]) + " should be " + dtypeName(x.dtype) +
             shapeStr(normShape);
  return "";
}
std::string check_layer_norm(const KernelCall &c) { return checkNorm(c, true); }
std::string check_rms_norm(const KernelCall &c) { return checkNorm(c, false); }
Status normImpl(const KernelCall &c, bool rms) {
  const TensorRef &x = c.in[0];
  int64_t axis = c.ints[0], rows = 1, cols = 1;
  for (int64_t d = 0; d < axis; ++d)
    rows *= x.shape[d];
  for (size_t d = axis; d < x.shape.size(); ++d)
    cols *= x.shape[d];
  double eps = c.floats[0];
  const float *px = x.as<float>(), *w = c.in[1].as<float>();
  const float *bias = c.in.size() > 2 ? c.in[2].as<float>() : nullptr;
  float *py = c.out[0].as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = px + r * cols;
    float *yr = py + r * cols;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < cols; ++j)
        mean += xr[j];
      mean /= cols;
    }
    for (int64_t j = 0; j < cols; ++j)
      var += (xr[j] - mean) * (xr[j] - mean);
    var /= cols;
    double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < cols; ++j) {
      double v = (xr[j] - mean) * rstd * w[j];
      yr[j] = (float)(bias ? v + bias[j] : v);
    }
  }
  return Status::ok();
}
Status run_layer_norm(const KernelCall &c) { return normImpl(c, false); }
Status run_rms_norm(const KernelCall &c) { return normImpl(c, true); }

/// The parts of a stable log-sum-exp over one row of logits: its maximum and
/// the sum of exp(x - max). cross_entropy and its gradient share it so both
/// see the same numbers.
struct RowLse {
  float max;
  double sum;
};
static RowLse rowLse(const float *xr, int64_t classes) {
  RowLse r{-INFINITY, 0};
  for (int64_t j = 0; j < classes; ++j)
    r.max = std::max(r.max, xr[j]);
  for (int64_t j = 0; j < classes; ++j)
    r.sum += std::exp((double)xr[j] - r.max);
  return r;
}
static Status labelOutOfRange(int64_t label, int64_t position, int64_t classes, int64_t ignore) {
  return errorf("label ", label, " at position ", position, " is out of range for ", classes,
                " classes (use ", ignore, " to ignore a position)");
}

/// cross_entropy(_grad)'s ints: [ignore_index] or [ignore_index, classes]
/// (logits whose last dimension is padded beyond |classes|).
static std::string checkCrossEntropyInts(const KernelCall &c) {
  if (c.ints.size() != 1 && c.ints.size() != 2)
    return "expects 1 or 2 integer attributes (ignore_index, classes), got " +
           std::to_string(c.ints.size());
  if (c.ints.size() == 2 && (c.in[0].shape.empty() || c.ints[1] < 1 ||
                             c.ints[1] > c.in[0].shape.back()))
    return "classes " + std::to_string(c.ints[1]) + " is not in [1, the logits' last dimension]";
  return "";
}
static int64_t crossEntropyClasses(const KernelCall &c) {
  return c.ints.size() > 1 ? c.ints[1] : c.in[0].shape.back();
}

std::string check_cross_entropy(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  const TensorRef &logits = c.in[0], &labels = c.in[1], &loss = c.out[0];
  if (!isFloatStorage(logits.dtype) || labels.dtype != DType::I64 || loss.dtype != DType::F32 ||
      !loss.shape.empty() || logits.shape.empty() ||
      labels.shape != Shape(logits.shape.begin(), logits.shape.end() - 1))
    return "expects float32 logits [N..., C], int64 labels [N...] and a float32 scalar";
  return checkCrossEntropyInts(c);
}
Status run_cross_entropy(const KernelCall &c) {
  const TensorRef &logits = c.in[0], &labels = c.in[1];
  int64_t stride = logits.shape.back(), classes = crossEntropyClasses(c), rows = labels.numel(),
          ignore = c.ints[0];
  const float *x = logits.as<float>();
  const int64_t *y = labels.as<int64_t>();
  double total = 0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (y[r] == ignore)
      continue;
    if (y[r] < 0 || y[r] >= classes)
      return labelOutOfRange(y[r], r, classes, ignore);
    const float *xr = x + r * stride;
    RowLse lse = rowLse(xr, classes);
    total += std::log(lse.sum) + lse.max - xr[y[r]];
    ++count;
  }
  // PyTorch: the mean over no positions is NaN.
  *c.out[0].as<float>() = count ? (float)(total / count) : NAN;
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Backward kernels and the optimizer
//===----------------------------------------------------------------------===//

std::string check_gelu_grad(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  if (auto e = checkInts(c, 1); !e.empty())
    return e;
  for (const TensorRef *t : {&c.in[0], &c.in[1], &c.out[0]})
    if (t->dtype != c.out[0].dtype || !isFloatStorage(t->dtype) || t->shape != c.out[0].shape)
      return "expects float32 or bfloat16 x, dy and dx of one type and shape";
  return "";
}
Status run_gelu_grad(const KernelCall &c) {
  const float *x = c.in[0].as<float>(), *g = c.in[1].as<float>();
  float *dx = c.out[0].as<float>();
  for (int64_t k = 0, n = c.out[0].numel(); k < n; ++k) {
    double v = x[k], d;
    if (c.ints[0] == 1) {
      const double a = 0.7978845608028654, b = 0.044715;
      double inner = a * (v + b * v * v * v), t = std::tanh(inner);
      d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * a * (1 + 3 * b * v * v);
    } else {
      d = 0.5 * (1 + std::erf(v * 0.70710678118654752)) +
          v * 0.3989422804014327 * std::exp(-0.5 * v * v);
    }
    dx[k] = (float)(g[k] * d);
  }
  return Status::ok();
}

std::string check_softmax_grad(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  for (const TensorRef *t : {&c.in[0], &c.in[1], &c.out[0]})
    if (t->dtype != c.out[0].dtype || !isFloatStorage(t->dtype) || t->shape != c.out[0].shape)
      return "expects float32 or bfloat16 y, dy and dx of one type and shape";
  if (c.ints.size() != 1 || !validAxis(c.ints[0], c.out[0].shape.size()))
    return "expects a valid axis";
  return "";
}
Status softmaxGradImpl(const KernelCall &c, bool log) {
  int64_t outer, dim, inner;
  around(c.out[0].shape, c.ints[0], outer, dim, inner);
  const float *y = c.in[0].as<float>(), *g = c.in[1].as<float>();
  float *dx = c.out[0].as<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * dim * inner + i;
      double dot = 0;
      for (int64_t j = 0; j < dim; ++j)
        dot += log ? (double)g[base + j * inner]
                   : (double)g[base + j * inner] * y[base + j * inner];
      for (int64_t j = 0; j < dim; ++j) {
        int64_t k = base + j * inner;
        dx[k] = (float)(log ? g[k] - std::exp((double)y[k]) * dot : y[k] * (g[k] - dot));
      }
    }
  return Status::ok();
}
Status run_softmax_grad(const KernelCall &c) { return softmaxGradImpl(c, false); }
Status run_log_softmax_grad(const KernelCall &c) { return softmaxGradImpl(c, true); }

std::string checkNormGrad(const KernelCall &c, size_t outs) {
  if (auto e = arity(c, 3, outs); !e.empty())
    return e;
  const TensorRef &x = c.in[0];
  if (c.ints.size() != 1 || !validAxis(c.ints[0], x.shape.size()) || c.floats.size() != 1)
    return "expects [axis] and [epsilon]";
  Shape normShape(x.shape.begin() + c.ints[0], x.shape.end());
  for (const TensorRef *t : {&c.in[1], &c.in[2], &c.out[0]})
    if (t->dtype != x.dtype)
      return "expects x, scale, dy and dx of one type";
  if (!isFloatStorage(x.dtype) || c.in[2].shape != x.shape || c.out[0].shape != x.shape ||
      c.in[1].shape != normShape)
    return "expects float32 or bfloat16 x, scale of the normalized shape, dy and dx";
  for (size_t k = 1; k < outs; ++k)
    if (c.out[k].shape != normShape || c.out[k].dtype != x.dtype)
      return "parameter gradients must have the normalized shape and x's type";
  return "";
}
std::string check_layer_norm_grad(const KernelCall &c) { return checkNormGrad(c, 3); }
std::string check_rms_norm_grad(const KernelCall &c) { return checkNormGrad(c, 2); }
Status normGradImpl(const KernelCall &c, bool rms) {
  const TensorRef &x = c.in[0];
  int64_t axis = c.ints[0], rows = 1, cols = 1;
  for (int64_t d = 0; d < axis; ++d)
    rows *= x.shape[d];
  for (size_t d = axis; d < x.shape.size(); ++d)
    cols *= x.shape[d];
  double eps = c.floats[0];
  const float *px = x.as<float>(), *w = c.in[1].as<float>(), *pg = c.in[2].as<float>();
  float *dx = c.out[0].as<float>();
  std::vector<double> dw(cols, 0.0), db(cols, 0.0), dxhat(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = px + r * cols, *gr = pg + r * cols;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < cols; ++j)
        mean += xr[j];
      mean /= cols;
    }
    for (int64_t j = 0; j < cols; ++j)
      var += (xr[j] - mean) * (xr[j] - mean);
    var /= cols;
    double rstd = 1.0 / std::sqrt(var + eps);
    double sumD = 0, sumDX = 0;
    for (int64_t j = 0; j < cols; ++j) {
      double xhat = (xr[j] - mean) * rstd;
      dxhat[j] = (double)gr[j] * w[j];
      sumD += dxhat[j];
      sumDX += dxhat[j] * xhat;
      dw[j] += (double)gr[j] * xhat;
      db[j] += gr[j];
    }
    for (int64_t j = 0; j < cols; ++j) {
      double xhat = (xr[j] - mean) * rstd;
      double v = rms ? rstd * (dxhat[j] - xhat * sumDX / cols)
                     : rstd * (dxhat[j] - sumD / cols - xhat * sumDX / cols);
      dx[r * cols + j] = (float)v;
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    c.out[1].as<float>()[j] = (float)dw[j];
    if (!rms)
      c.out[2].as<float>()[j] = (float)db[j];
  }
  return Status::ok();
}
Status run_layer_norm_grad(const KernelCall &c) { return normGradImpl(c, false); }
Status run_rms_norm_grad(const KernelCall &c) { return normGradImpl(c, true); }

std::string check_cross_entropy_grad(const KernelCall &c) {
  if (auto e = arity(c, 3, 1); !e.empty())
    return e;
  const TensorRef &logits = c.in[0], &labels = c.in[1], &g = c.in[2], &dx = c.out[0];
  if (!isFloatStorage(logits.dtype) || labels.dtype != DType::I64 || g.dtype != DType::F32 ||
      !g.shape.empty() || logits.shape.empty() || dx.shape != logits.shape ||
      dx.dtype != logits.dtype ||
      labels.shape != Shape(logits.shape.begin(), logits.shape.end() - 1))
    return "expects float32 logits [N..., C], int64 labels [N...], a scalar dloss, dlogits";
  return checkCrossEntropyInts(c);
}
Status run_cross_entropy_grad(const KernelCall &c) {
  const TensorRef &logits = c.in[0], &labels = c.in[1];
  int64_t stride = logits.shape.back(), classes = crossEntropyClasses(c), rows = labels.numel(),
          ignore = c.ints[0];
  const float *x = logits.as<float>();
  const int64_t *y = labels.as<int64_t>();
  double scale = *c.in[2].as<float>();
  float *dx = c.out[0].as<float>();
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r)
    count += y[r] != ignore;
  for (int64_t r = 0; r < rows; ++r) {
    float *dr = dx + r * stride;
    std::fill(dr + classes, dr + stride, 0.0f); // padding
    if (y[r] == ignore || count == 0) {
      std::fill(dr, dr + classes, 0.0f);
      continue;
    }
    if (y[r] < 0 || y[r] >= classes)
      return labelOutOfRange(y[r], r, classes, ignore);
    const float *xr = x + r * stride;
    RowLse lse = rowLse(xr, classes);
    for (int64_t j = 0; j < classes; ++j) {
      double p = std::exp((double)xr[j] - lse.max) / lse.sum - (j == y[r] ? 1.0 : 0.0);
      dr[j] = (float)(p * scale / count);
    }
  }
  return Status::ok();
}

std::string check_gather_grad(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  const TensorRef &idx = c.in[0], &g = c.in[1], &dx = c.out[0];
  if (c.ints.empty() || c.ints.size() > 2 || !validAxis(c.ints[0], dx.shape.size()))
    return "expects [axis] or [axis, padding_idx]";
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    return "indices must be int64 or int32";
  int64_t axis = c.ints[0];
  Shape expected(dx.shape.begin(), dx.shape.begin() + axis);
  expected.insert(expected.end(), idx.shape.begin(), idx.shape.end());
  expected.insert(expected.end(), dx.shape.begin() + axis + 1, dx.shape.end());
  if (!isFloatStorage(g.dtype) || dx.dtype != g.dtype || g.shape != expected)
    return "dy " + describe(g) + " should be float32 or bfloat16" + shapeStr(expected);
  return "";
}
Status run_gather_grad(const KernelCall &c) {
  const TensorRef &idx = c.in[0], &g = c.in[1], &dx = c.out[0];
  int64_t axis = c.ints[0], dim = dx.shape[axis], outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= dx.shape[d];
  for (size_t d = axis + 1; d < dx.shape.size(); ++d)
    inner *= dx.shape[d];
  float *out = dx.as<float>();
  const float *pg = g.as<float>();
  std::fill(out, out + dx.numel(), 0.0f);
  // Accumulate in index order: deterministic, and equal to PyTorch's
  // embedding backward up to float rounding of repeated indices.
  int64_t n = idx.numel();
  // PyTorch's nn.Embedding(padding_idx=P): row P gets no gradient.
  int64_t padding = c.ints.size() > 1 ? c.ints[1] : INT64_MIN;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k) {
      int64_t j = idx.dtype == DType::I64 ? idx.as<int64_t>()[k] : idx.as<int32_t>()[k];
      ZRT_RETURN_IF_ERROR(gatherIndex(j, dim));
      if (j == padding)
        continue;
      float *row = out + (o * dim + j) * inner;
      const float *src = pg + (o * n + k) * inner;
      for (int64_t i = 0; i < inner; ++i)
        row[i] += src[i];
    }
  return Status::ok();
}

std::string check_slice_grad(const KernelCall &c) {
  if (auto e = arity(c, 1, 1); !e.empty())
    return e;
  // The forward slice's check, with the roles of the operands swapped.
  KernelCall fwd;
  fwd.in = {c.out[0]};
  fwd.out = {c.in[0]};
  fwd.ints = c.ints;
  return check_slice(fwd);
}
Status run_slice_grad(const KernelCall &c) {
  const TensorRef &g = c.in[0], &dx = c.out[0];
  std::memset(dx.data, 0, dx.numel() * dtypeSize(dx.dtype));
  size_t rank = dx.shape.size(), es = dtypeSize(dx.dtype);
  std::vector<int64_t> strides(rank, 1);
  for (int64_t d = (int64_t)rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * dx.shape[d + 1];
  std::vector<int64_t> coord(rank, 0);
  for (int64_t k = 0, n = g.numel(); k < n; ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d)
      off += (c.ints[d] + coord[d] * c.ints[rank + d]) * strides[d];
    std::memcpy(dx.data + off * es, g.data + k * es, es);
    for (int64_t d = (int64_t)rank - 1; d >= 0; --d) {
      if (++coord[d] < g.shape[d])
        break;
      coord[d] = 0;
    }
  }
  return Status::ok();
}

/// The optional last input of an optimizer kernel: a scalar bool, true when
/// the step is skipped (an fp16 overflow).
std::string checkSkip(const KernelCall &c, size_t withoutSkip, size_t nout) {
  if (c.in.size() == withoutSkip + 1) {
    const TensorRef &s = c.in.back();
    if (s.dtype != DType::Bool || !s.shape.empty())
      return "expects a scalar bool 'skip' as its last input";
    return arity(c, withoutSkip + 1, nout);
  }
  return arity(c, withoutSkip, nout);
}

/// A skipped optimizer step: results = inputs (nothing moves when in place).
bool skipStep(const KernelCall &c, size_t withoutSkip) {
  if (c.in.size() != withoutSkip + 1 || !*c.in.back().as<uint8_t>())
    return false;
  for (size_t k = 0; k < c.out.size(); ++k) {
    // Outputs k correspond to inputs 0 (param) and 2.. (state): param, then
    // the state tensors in order.
    const TensorRef &from = c.in[k == 0 ? 0 : k + 1];
    if (from.data != c.out[k].data)
      std::memmove(c.out[k].data, from.data, (size_t)from.numel() * sizeof(float));
  }
  return true;
}

std::string check_adamw(const KernelCall &c) {
  if (auto e = checkSkip(c, 6, 3); !e.empty())
    return e;
  if (c.floats.size() != 4)
    return "expects [beta1, beta2, eps, weight_decay]";
  const Shape &s = c.in[0].shape;
  for (const TensorRef *t : {&c.in[0], &c.in[1], &c.in[2], &c.in[3], &c.out[0], &c.out[1], &c.out[2]})
    if (t->dtype != DType::F32 || t->shape != s)
      return "expects float32 parameter, gradient, moments and results of one shape";
  for (const TensorRef *t : {&c.in[4], &c.in[5]})
    if (t->dtype != DType::F32 || !t->shape.empty())
      return "expects float32 scalars lr and step";
  return "";
}
Status run_adamw(const KernelCall &c) {
  // PyTorch's AdamW (torch/optim/adamw.py, non-capturable): scalars in double,
  // tensor math in float32, in the same order.
  if (skipStep(c, 6))
    return Status::ok();
  double lr = *c.in[4].as<float>(), t = *c.in[5].as<float>();
  double b1 = c.floats[0], b2 = c.floats[1], eps = c.floats[2], wd = c.floats[3];
  float decay = (float)(1.0 - lr * wd);
  double bc1 = 1.0 - std::pow(b1, t), bc2 = 1.0 - std::pow(b2, t);
  float stepSize = (float)(lr / bc1), bc2Sqrt = (float)std::sqrt(bc2);
  float w1 = (float)(1.0 - b1), fb2 = (float)b2, w2 = (float)(1.0 - b2), feps = (float)eps;
  const float *p = c.in[0].as<float>(), *g = c.in[1].as<float>(), *m = c.in[2].as<float>(),
              *v = c.in[3].as<float>();
  float *po = c.out[0].as<float>(), *mo = c.out[1].as<float>(), *vo = c.out[2].as<float>();
  // Element by element, so any split over threads gives the same bits: as
  // DeepSpeed's CPU Adam, large (offloaded) shards use every core.
  parallelFor(c.in[0].numel(), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      float pk = p[k] * decay;
      float mk = m[k] + w1 * (g[k] - m[k]); // lerp(m, g, 1 - beta1)
      float vk = v[k] * fb2 + w2 * g[k] * g[k];
      float denom = std::sqrt(vk) / bc2Sqrt + feps;
      po[k] = pk - stepSize * (mk / denom);
      mo[k] = mk;
      vo[k] = vk;
    }
  });
  return Status::ok();
}

std::string check_fill(const KernelCall &c) {
  if (auto e = arity(c, 0, 1); !e.empty())
    return e;
  if (c.floats.size() != 1 || (c.out[0].dtype != DType::F32 && c.out[0].dtype != DType::F64 &&
                               !isNarrowFloat(c.out[0].dtype) && c.out[0].dtype != DType::I64))
    return "expects [value] and a float32, bfloat16, float64 or int64 output";
  return "";
}
Status run_fill(const KernelCall &c) {
  const TensorRef &y = c.out[0];
  for (int64_t k = 0, n = y.numel(); k < n; ++k) {
    if (y.dtype == DType::F32) y.as<float>()[k] = (float)c.floats[0];
    else if (isNarrowFloat(y.dtype)) storeNarrow(y, k, (float)c.floats[0]);
    else if (y.dtype == DType::F64) y.as<double>()[k] = c.floats[0];
    else y.as<int64_t>()[k] = (int64_t)c.floats[0];
  }
  return Status::ok();
}

std::string check_sgd(const KernelCall &c) {
  if (auto e = checkSkip(c, 4, 2); !e.empty())
    return e;
  if (c.floats.size() != 2 || c.ints.size() != 1)
    return "expects floats [momentum, weight_decay] and ints [nesterov]";
  const Shape &s = c.in[0].shape;
  for (const TensorRef *t : {&c.in[0], &c.in[1], &c.in[2], &c.out[0], &c.out[1]})
    if (t->dtype != DType::F32 || t->shape != s)
      return "expects float32 parameter, gradient, buffer and results of one shape";
  if (c.in[3].dtype != DType::F32 || !c.in[3].shape.empty())
    return "expects a float32 scalar lr";
  return "";
}
Status run_sgd(const KernelCall &c) {
  // torch.optim.SGD (dampening 0): the buffer starts at zero, so its first
  // value is the gradient, as PyTorch's clone on the first step.
  if (skipStep(c, 4))
    return Status::ok();
  float lr = *c.in[3].as<float>(), mom = (float)c.floats[0], wd = (float)c.floats[1];
  bool nesterov = c.ints[0];
  const float *p = c.in[0].as<float>(), *g = c.in[1].as<float>(), *b = c.in[2].as<float>();
  float *po = c.out[0].as<float>(), *bo = c.out[1].as<float>();
  for (int64_t k = 0, n = c.in[0].numel(); k < n; ++k) {
    float d = wd != 0 ? g[k] + wd * p[k] : g[k];
    float buf = mom != 0 ? mom * b[k] + d : 0.0f;
    if (mom != 0)
      d = nesterov ? d + mom * buf : buf;
    po[k] = p[k] - lr * d;
    bo[k] = buf;
  }
  return Status::ok();
}

const KernelInfo kKernels[] = {
    {"sgd", check_sgd, run_sgd},
    {"fill", check_fill, run_fill},
    {"gelu_grad", check_gelu_grad, [](const KernelCall &c) { return viaFloat32(c, run_gelu_grad); }},
    {"softmax_grad", check_softmax_grad, [](const KernelCall &c) { return viaFloat32(c, run_softmax_grad); }},
    {"log_softmax_grad", check_softmax_grad, [](const KernelCall &c) { return viaFloat32(c, run_log_softmax_grad); }},
    {"layer_norm_grad", check_layer_norm_grad, [](const KernelCall &c) { return viaFloat32(c, run_layer_norm_grad); }},
    {"rms_norm_grad", check_rms_norm_grad, [](const KernelCall &c) { return viaFloat32(c, run_rms_norm_grad); }},
    {"cross_entropy_grad", check_cross_entropy_grad, [](const KernelCall &c) { return viaFloat32(c, run_cross_entropy_grad); }},
    {"gather_grad", check_gather_grad, [](const KernelCall &c) { return viaFloat32(c, run_gather_grad); }},
    {"slice_grad", check_slice_grad, run_slice_grad},
    {"adamw", check_adamw, run_adamw},
    {"add", check_add, run_add},
    {"sub", check_sub, run_sub},
    {"mul", check_mul, run_mul},
    {"div", check_div, run_div},
    {"pow", check_pow, run_pow},
    {"max", check_max, run_max},
    {"min", check_min, run_min},
    {"and", check_logic, run_and},
    {"or", check_logic, run_or},
    {"cmp", check_cmp, run_cmp},
    {"where", check_where, run_where},
    {"neg", check_f32, run_neg},
    {"abs", check_f32, run_abs},
    {"exp", check_f32, run_exp},
    {"log", check_f32, run_log},
    {"sqrt", check_f32, run_sqrt},
    {"rsqrt", check_f32, run_rsqrt},
    {"reciprocal", check_f32, run_reciprocal},
    {"tanh", check_f32, run_tanh},
    {"erf", check_f32, run_erf},
    {"sigmoid", check_f32, run_sigmoid},
    {"relu", check_f32, run_relu},
    {"silu", check_f32, run_silu},
    {"cos", check_f32, run_cos},
    {"sin", check_f32, run_sin},
    {"not", check_not, run_not},
    {"gelu", check_gelu, run_gelu},
    {"cast", check_cast, run_cast},
    {"cast_many", check_cast_many, run_cast_many},
    {"elementwise", check_elementwise, run_elementwise},
    {"cast_concat", check_cast_concat, run_cast_concat},
    {"expand", check_expand, run_expand},
    {"transpose", check_transpose, run_transpose},
    {"slice", check_slice, run_slice},
    {"concat", check_concat, run_concat},
    {"split", check_split, run_split},
    {"gather", check_gather, run_gather},
    {"matmul", check_matmul, run_matmul},
    {"matmul_bias", check_matmul_bias, run_matmul_bias},
    {"matmul_bgrad", check_matmul_bgrad, run_matmul_bgrad},
    {"matmul_bias_gelu", check_matmul_bias_gelu, run_matmul_bias_gelu},
    {"matmul_gelu_grad", check_matmul_gelu_grad, run_matmul_gelu_grad},
    {"reduce", check_reduce, run_reduce},
    {"softmax", check_softmax, run_softmax},
    {"bias_softmax", check_bias_softmax, run_bias_softmax},
    {"attention", check_attention, [](const KernelCall &c) { return viaFloat32(c, run_attention); }},
    {"attention_grad", check_attention_grad, [](const KernelCall &c) { return viaFloat32(c, run_attention_grad); }},
    {"log_softmax", check_softmax, run_log_softmax},
    {"layer_norm", check_layer_norm, [](const KernelCall &c) { return viaFloat32(c, run_layer_norm); }},
    {"rms_norm", check_rms_norm, [](const KernelCall &c) { return viaFloat32(c, run_rms_norm); }},
    {"cross_entropy", check_cross_entropy, [](const KernelCall &c) { return viaFloat32(c, run_cross_entropy); }},
};

} // namespace

const KernelInfo *zrt::findKernel(const std::string &name) {
  for (const KernelInfo &k : kKernels)
    if (name == k.name)
      return &k;
  return nullptr;
}

std::string zrt::kernelNames() {
  std::string names;
  for (const KernelInfo &k : kKernels)
    names += (names.empty() ? "" : ", ") + std::string(k.name);
  return names;
}
