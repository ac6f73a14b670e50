//===- Elementwise.cpp - CPU kernels: elementwise ---------------------------===//
//
// Elementwise kernels: binary and unary arithmetic, comparisons and logic,
// casts (single, grouped, into a bucket), the fused elementwise program of
// zero-fuse-elementwise, GELU and its gradient, fill. Elementwise work over
// large flat operands runs on every core (parallelFor); a result never
// depends on how the work was split.
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"
#include "kernels/Philox.h"
#include "plan/PlanLoader.h"
#include "plan/plan.pb.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

namespace zrt::cpu {

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
  forEachBroadcast<2>(
      c.out[0].shape, {c.in[0].shape, c.in[1].shape},
      [&](int64_t k, const std::array<int64_t, 2> &off) { o[k] = fn(a[off[0]], b[off[1]]); });
}

#define ZRT_ARITH(NAME, EXPR)                                                                      \
  std::string check##NAME(const KernelCall &c) {                                                   \
    return checkBinary(c, {DType::F32, DType::BF16, DType::F16, DType::I64}, false);               \
  }                                                                                                \
  Status run##NAME(const KernelCall &c) {                                                          \
    if (c.in[0].dtype == DType::I64) {                                                             \
      binaryLoop<int64_t, int64_t>(c, [](int64_t x, int64_t y) { return EXPR; });                  \
      return Status::ok();                                                                         \
    }                                                                                              \
    return dispatchFloat(c.in[0].dtype, [&](auto tag) {                                            \
      using T = decltype(tag);                                                                     \
      binaryLoop<T, T>(c, [](float x, float y) -> float { return EXPR; });                         \
      return Status::ok();                                                                         \
    });                                                                                            \
  }
ZRT_ARITH(Add, x + y)
ZRT_ARITH(Sub, x - y)
ZRT_ARITH(Mul, x *y)
ZRT_ARITH(Max, std::max(x, y))
ZRT_ARITH(Min, std::min(x, y))
#undef ZRT_ARITH

std::string checkDiv(const KernelCall &c) {
  return checkBinary(c, {DType::F32, DType::BF16, DType::F16}, false);
}
Status runDiv(const KernelCall &c) {
  return dispatchFloat(c.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    binaryLoop<T, T>(c, [](float x, float y) -> float { return x / y; });
    return Status::ok();
  });
}
std::string checkPow(const KernelCall &c) {
  return checkBinary(c, {DType::F32, DType::BF16, DType::F16}, false);
}
Status runPow(const KernelCall &c) {
  return dispatchFloat(c.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    binaryLoop<T, T>(c, [](float x, float y) -> float { return std::pow(x, y); });
    return Status::ok();
  });
}
std::string checkAnd(const KernelCall &c) { return checkBinary(c, {DType::Bool}, false); }
std::string checkOr(const KernelCall &c) { return checkAnd(c); }
Status runAnd(const KernelCall &c) {
  binaryLoop<uint8_t, uint8_t>(c, [](uint8_t x, uint8_t y) -> uint8_t { return x && y; });
  return Status::ok();
}
Status runOr(const KernelCall &c) {
  binaryLoop<uint8_t, uint8_t>(c, [](uint8_t x, uint8_t y) -> uint8_t { return x || y; });
  return Status::ok();
}

std::string checkCmp(const KernelCall &c) {
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
    case 0:
      return x == y;
    case 1:
      return x != y;
    case 2:
      return x < y;
    case 3:
      return x <= y;
    case 4:
      return x > y;
    default:
      return x >= y;
    }
  });
}
Status runCmp(const KernelCall &c) {
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

std::string checkWhere(const KernelCall &c) {
  if (auto e = arity(c, 3, 1); !e.empty())
    return e;
  const TensorRef &cond = c.in[0], &a = c.in[1], &b = c.in[2], &o = c.out[0];
  if (cond.dtype != DType::Bool || a.dtype != b.dtype || o.dtype != a.dtype ||
      dtypeSize(a.dtype) == 0)
    return "expects a bool condition and two values of the result type";
  Shape s1, s;
  if (!broadcastShape(a.shape, b.shape, s1) || !broadcastShape(cond.shape, s1, s) || s != o.shape)
    return "shapes do not broadcast to " + describe(o);
  return "";
}
Status runWhere(const KernelCall &c) {
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

// The functions are zero.elementwise's (kernels/KernelId.h), so that a fused
// program computes what the separate kernels do, bit for bit.
#define ZRT_UNARY(NAME)                                                                            \
  std::string check##NAME(const KernelCall &c) { return checkUnaryFloat(c); }                      \
  Status run##NAME(const KernelCall &c) {                                                          \
    return unaryF32(                                                                               \
        c, [](float x) { return elementwiseUnary((int64_t)ElementwiseOpcode::NAME, x); });         \
  }
ZRT_UNARY(Neg)
ZRT_UNARY(Abs)
ZRT_UNARY(Exp)
ZRT_UNARY(Log)
ZRT_UNARY(Sqrt)
ZRT_UNARY(Rsqrt)
ZRT_UNARY(Reciprocal)
ZRT_UNARY(Tanh)
ZRT_UNARY(Erf)
ZRT_UNARY(Sigmoid)
ZRT_UNARY(Relu)
ZRT_UNARY(Silu)
ZRT_UNARY(Cos)
ZRT_UNARY(Sin)
#undef ZRT_UNARY

std::string checkNot(const KernelCall &c) { return checkUnary(c, DType::Bool); }
Status runNot(const KernelCall &c) {
  const uint8_t *x = c.in[0].as<uint8_t>();
  uint8_t *y = c.out[0].as<uint8_t>();
  for (int64_t k = 0, n = c.out[0].numel(); k < n; ++k)
    y[k] = !x[k];
  return Status::ok();
}

std::string checkGelu(const KernelCall &c) {
  if (auto e = checkInts(c, 1); !e.empty())
    return e;
  if (c.ints[0] != 0 && c.ints[0] != 1)
    return "approximation must be 0 (exact) or 1 (tanh)";
  return checkUnaryFloat(c);
}
Status runGelu(const KernelCall &c) {
  // 1: GPT-2's gelu_new, PyTorch's approximate='tanh'
  if (c.ints[0] == 1)
    return unaryF32(
        c, [](float x) { return elementwiseUnary((int64_t)ElementwiseOpcode::GeluTanh, x); });
  return unaryF32(c, [](float x) { return elementwiseUnary((int64_t)ElementwiseOpcode::Gelu, x); });
}

bool castable(DType d) {
  return d == DType::F32 || isNarrowFloat(d) || d == DType::F64 || d == DType::I64 ||
         d == DType::I32 || d == DType::Bool;
}
std::string checkCast(const KernelCall &c) {
  if (auto e = arity(c, 1, 1); !e.empty())
    return e;
  if (c.in[0].shape != c.out[0].shape || !castable(c.in[0].dtype) || !castable(c.out[0].dtype))
    return "cannot cast " + describe(c.in[0]) + " to " + describe(c.out[0]);
  return "";
}
double loadAsDouble(const TensorRef &t, int64_t k) {
  switch (t.dtype) {
  case DType::F32:
    return t.as<float>()[k];
  case DType::BF16:
  case DType::F16:
    return loadNarrow(t, k);
  case DType::F64:
    return t.as<double>()[k];
  case DType::I64:
    return (double)t.as<int64_t>()[k];
  case DType::I32:
    return t.as<int32_t>()[k];
  case DType::Bool:
    return t.as<uint8_t>()[k];
  default:
    return 0;
  }
}
Status runCast(const KernelCall &c) {
  const TensorRef &x = c.in[0], &y = c.out[0];
  for (int64_t k = 0, n = y.numel(); k < n; ++k) {
    if (x.dtype == DType::I64 && y.dtype == DType::I64) {
      y.as<int64_t>()[k] = x.as<int64_t>()[k];
      continue;
    }
    double v = loadAsDouble(x, k);
    switch (y.dtype) {
    case DType::F32:
      y.as<float>()[k] = (float)v;
      break;
    case DType::BF16:
    case DType::F16:
      storeNarrow(y, k, (float)v);
      break;
    case DType::F64:
      y.as<double>()[k] = v;
      break;
    case DType::I64:
      y.as<int64_t>()[k] = x.dtype == DType::I32 ? x.as<int32_t>()[k] : (int64_t)v;
      break;
    case DType::I32:
      y.as<int32_t>()[k] = (int32_t)v;
      break;
    case DType::Bool:
      y.as<uint8_t>()[k] = v != 0;
      break;
    default:
      break;
    }
  }
  return Status::ok();
}

//--- elementwise: a fused tree of elementwise ops -------------------------===//
// ints = [inputs, steps, (opcode, a, b, c, dtype) per step, the step each
// output stores, then the offsets]: opcode an ElementwiseOpcode
// (kernels/KernelId.h), which says what a, b and c refer to; dtype is the
// plan's type code (plan::F32, F16 or BF16) the step rounds to. The outputs
// (sibling trees merged) share one shape.

/// A step's type: the plan's dtype code (plan.proto) of float32, float16 or
/// bfloat16; anything else is not a float a step rounds to.
bool stepType(int64_t code, DType &out) {
  return (code == plan::F32 || code == plan::F16 || code == plan::BF16) && toDType(code, out);
}
DType planFloatType(int64_t code) {
  DType t = DType::F32;
  stepType(code, t);
  return t;
}

constexpr int64_t kStepInts = 5;

std::string checkElementwise(const KernelCall &c) {
  int64_t outputs = (int64_t)c.out.size();
  if (c.ints.size() < 2 || outputs < 1 || (int64_t)c.in.size() != c.ints[0] || c.ints[1] < 1 ||
      c.ints[1] > ((int64_t)c.ints.size() - 2 - outputs) / kStepInts)
    return "expects [inputs, steps, (opcode, a, b, c, dtype) per step, a step per output, "
           "offsets] over its inputs and at least one output";
  const TensorRef &y = c.out[0];
  int64_t inputs = c.ints[0], steps = c.ints[1], rank = (int64_t)y.shape.size();
  int64_t offsets = (int64_t)c.ints.size() - 2 - kStepInts * steps - outputs;
  const int64_t *stored = c.ints.data() + 2 + kStepInts * steps;
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t *step = &c.ints[2 + kStepInts * s];
    int64_t op = step[0], a = step[1], b = step[2], aux = step[3];
    DType type;
    bool ok = op >= 0 && op < kNumElementwiseOpcodes && stepType(step[4], type);
    if (ok && op == (int64_t)ElementwiseOpcode::Load)
      ok = a >= 0 && a < inputs && b == -1 && (aux == -1 || (aux >= 0 && aux + rank <= offsets));
    else if (ok && op == (int64_t)ElementwiseOpcode::Pick)
      ok = a >= 0 && a < s && b >= 0 && b < s && aux >= 0 && aux + 2 <= offsets &&
           stored[outputs + aux] >= 0 && stored[outputs + aux] < rank;
    else if (ok)
      ok = a >= 0 && a < s && (isUnaryOpcode(op) ? b == -1 : b >= 0 && b < s) && aux == -1;
    if (!ok)
      return "step " + std::to_string(s) + " is not an opcode 0-" +
             std::to_string(kNumElementwiseOpcodes - 1) +
             " over an input or earlier steps with its offsets";
  }
  for (int64_t k = 0; k < outputs; ++k) {
    const TensorRef &out = c.out[k];
    if (stored[k] < 0 || stored[k] >= steps)
      return "output " + std::to_string(k) + " stores step " + std::to_string(stored[k]) + " of " +
             std::to_string(steps);
    if (out.shape != y.shape || out.dtype != planFloatType(c.ints[2 + kStepInts * stored[k] + 4]))
      return "output " + describe(out) + " is not of " + describe(y) +
             "'s shape and its step's type";
  }
  for (const TensorRef &x : c.in) {
    if (!isFloatStorage(x.dtype) || (int64_t)x.shape.size() > rank)
      return "input " + describe(x) + " is not a float tensor of at most the rank of " +
             describe(y);
    // Loads clamp each coordinate into [0, dim): no dimension may be empty.
    if (y.numel() > 0 && std::find(x.shape.begin(), x.shape.end(), 0) != x.shape.end())
      return "input " + describe(x) + " is empty";
  }
  return "";
}

/// v[j] = f(a[j]) for a unary opcode, its function inlined in the loop.
template <int64_t OP> void unaryLoop(const float *a, float *v, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    v[j] = elementwiseUnary(OP, a[j]);
}
template <int64_t... OPS>
void unaryLoop(int64_t op, const float *a, float *v, int64_t n,
               std::integer_sequence<int64_t, OPS...>) {
  ((op == OPS ? unaryLoop<OPS>(a, v, n) : void()), ...);
}
void unaryLoop(int64_t op, const float *a, float *v, int64_t n) {
  unaryLoop(op, a, v, n, std::make_integer_sequence<int64_t, kNumElementwiseOpcodes>());
}

/// Blocks of contiguous output elements: their coordinates, then each step
/// over the whole block (in float, rounded to its type, as the separate
/// kernels do), so that the program is dispatched once per block.
Status runElementwise(const KernelCall &c) {
  const TensorRef &y = c.out[0];
  int64_t inputs = c.ints[0], steps = c.ints[1], rank = (int64_t)y.shape.size();
  const int64_t *stored = c.ints.data() + 2 + kStepInts * steps;
  const int64_t *offsets = stored + c.out.size();
  // Per input, its extent and stride on each output dimension (0: it broadcasts).
  std::vector<std::vector<int64_t>> dims(inputs, std::vector<int64_t>(rank, 1)),
      strides(inputs, std::vector<int64_t>(rank, 0));
  for (int64_t k = 0; k < inputs; ++k) {
    const Shape &s = c.in[k].shape;
    int64_t lead = rank - (int64_t)s.size(), stride = 1;
    for (int64_t d = (int64_t)s.size() - 1; d >= 0; --d) {
      dims[k][d + lead] = s[d];
      strides[k][d + lead] = s[d] == 1 ? 0 : stride;
      stride *= s[d];
    }
  }
  auto round = [](float *v, int64_t n, DType t) {
    if (t == DType::BF16)
      for (int64_t j = 0; j < n; ++j)
        v[j] = float(BF16(v[j]));
    else if (t == DType::F16)
      for (int64_t j = 0; j < n; ++j)
        v[j] = float(F16(v[j]));
  };
  constexpr int64_t kBlock = 256;
  parallelFor(y.numel(), [&](int64_t begin, int64_t end) {
    std::vector<float> values(steps * kBlock);
    std::vector<int64_t> coords(rank * kBlock), at(kBlock);
    for (int64_t first = begin; first < end; first += kBlock) {
      int64_t n = std::min(kBlock, end - first);
      // The first element's coordinates by division, the others counted on.
      for (int64_t d = rank - 1, r = first; d >= 0; --d) {
        coords[d * kBlock] = r % y.shape[d];
        r /= y.shape[d];
      }
      for (int64_t j = 1; j < n; ++j) {
        bool carry = true;
        for (int64_t d = rank - 1; d >= 0; --d) {
          int64_t x = coords[d * kBlock + j - 1] + (carry ? 1 : 0);
          carry = x == y.shape[d];
          coords[d * kBlock + j] = carry ? 0 : x;
        }
      }
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t *step = &c.ints[2 + kStepInts * s];
        float *v = &values[s * kBlock];
        const float *a = step[1] >= 0 ? &values[step[1] * kBlock] : nullptr;
        const float *b = step[2] >= 0 ? &values[step[2] * kBlock] : nullptr;
        switch ((ElementwiseOpcode)step[0]) {
        case ElementwiseOpcode::Load: {
          const TensorRef &x = c.in[step[1]];
          if (x.shape == y.shape && step[3] < 0) {
            for (int64_t j = 0; j < n; ++j)
              at[j] = first + j;
          } else {
            std::fill(at.begin(), at.begin() + n, 0);
            for (int64_t d = 0; d < rank; ++d) {
              int64_t stride = strides[step[1]][d], last = dims[step[1]][d] - 1;
              int64_t shift = step[3] >= 0 ? offsets[step[3] + d] : 0;
              if (!stride)
                continue;
              const int64_t *cd = &coords[d * kBlock];
              for (int64_t j = 0; j < n; ++j)
                at[j] += std::clamp<int64_t>(cd[j] + shift, 0, last) * stride;
            }
          }
          if (x.dtype == DType::F32)
            for (int64_t j = 0; j < n; ++j)
              v[j] = x.as<float>()[at[j]];
          else if (x.dtype == DType::BF16)
            for (int64_t j = 0; j < n; ++j)
              v[j] = float(x.as<BF16>()[at[j]]);
          else
            for (int64_t j = 0; j < n; ++j)
              v[j] = loadNarrow(x, at[j]);
          break;
        }
        case ElementwiseOpcode::Pick: {
          const int64_t *cd = &coords[offsets[step[3]] * kBlock], seam = offsets[step[3] + 1];
          for (int64_t j = 0; j < n; ++j)
            v[j] = cd[j] < seam ? a[j] : b[j];
          break;
        }
        case ElementwiseOpcode::Add:
          for (int64_t j = 0; j < n; ++j)
            v[j] = a[j] + b[j];
          break;
        case ElementwiseOpcode::Sub:
          for (int64_t j = 0; j < n; ++j)
            v[j] = a[j] - b[j];
          break;
        case ElementwiseOpcode::Mul:
          for (int64_t j = 0; j < n; ++j)
            v[j] = a[j] * b[j];
          break;
        case ElementwiseOpcode::Div:
          for (int64_t j = 0; j < n; ++j)
            v[j] = a[j] / b[j];
          break;
        default:
          unaryLoop(step[0], a, v, n);
          break;
        }
        round(v, n, planFloatType(step[4]));
      }
      for (size_t k = 0; k < c.out.size(); ++k) {
        const TensorRef &out = c.out[k];
        const float *r = &values[stored[k] * kBlock];
        if (out.dtype == DType::F32)
          std::copy(r, r + n, out.as<float>() + first);
        else
          for (int64_t j = 0; j < n; ++j)
            storeNarrow(out, first + j, r[j]);
      }
    }
  });
  return Status::ok();
}

std::string checkCastMany(const KernelCall &c) {
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
Status runCastMany(const KernelCall &c) {
  for (size_t i = 0; i < c.in.size(); ++i) {
    KernelCall one;
    one.in = {c.in[i]};
    one.out = {c.out[i]};
    ZRT_RETURN_IF_ERROR(runCast(one));
  }
  return Status::ok();
}

std::string checkCastConcat(const KernelCall &c) {
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
Status runCastConcat(const KernelCall &c) {
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
    ZRT_RETURN_IF_ERROR(runCast(one));
    at += x.numel();
  }
  return Status::ok();
}

std::string checkGeluGrad(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  if (auto e = checkInts(c, 1); !e.empty())
    return e;
  for (const TensorRef *t : {&c.in[0], &c.in[1], &c.out[0]})
    if (t->dtype != c.out[0].dtype || !isFloatStorage(t->dtype) || t->shape != c.out[0].shape)
      return "expects float32 or bfloat16 x, dy and dx of one type and shape";
  return "";
}
Status runGeluGradF32(const KernelCall &c) {
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

// dropout: ints [key, samples], floats [ratio]; (x, rng i64 [seed,
// position]) -> y = x * keep / (1 - ratio) (kernels/Philox.h).
std::string checkDropout(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  if (auto e = checkInts(c, 2); !e.empty())
    return e;
  const TensorRef &x = c.in[0], &rng = c.in[1];
  if (!isFloatStorage(x.dtype) || c.out[0].dtype != x.dtype || x.shape != c.out[0].shape)
    return "expects a float tensor in and out of one type and shape, got " + describe(x) + " -> " +
           describe(c.out[0]);
  if (rng.dtype != DType::I64 || rng.numel() != 2)
    return "expects its second input to be int64 [seed, position], got " + describe(rng);
  if (c.ints[0] < 0 || c.ints[0] > 0xFFFFFFFFLL)
    return "key " + std::to_string(c.ints[0]) + " is not a 32-bit value";
  if (c.ints[1] < 1 || x.numel() % c.ints[1] != 0)
    return std::to_string(c.ints[1]) + " samples do not divide " + describe(x);
  if (c.floats.size() != 1 || !(c.floats[0] > 0 && c.floats[0] < 1))
    return "expects [ratio] in (0, 1)";
  return "";
}
Status runDropout(const KernelCall &c) {
  const int64_t *rng = c.in[1].as<int64_t>();
  DropoutMask m;
  m.seed = (uint64_t)rng[0];
  m.position = (uint64_t)rng[1];
  m.key = (uint32_t)c.ints[0];
  m.threshold = dropoutThreshold(c.floats[0]);
  m.perSample = c.in[0].numel() / c.ints[1];
  const float scale = dropoutScale(c.floats[0]);
  return dispatchFloat(c.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *x = c.in[0].as<T>();
    T *y = c.out[0].as<T>();
    parallelFor(c.out[0].numel(), [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k)
        y[k] = T(m.keep(k) ? float(x[k]) * scale : 0.0f);
    });
    return Status::ok();
  });
}

std::string checkFill(const KernelCall &c) {
  if (auto e = arity(c, 0, 1); !e.empty())
    return e;
  if (c.floats.size() != 1 || (c.out[0].dtype != DType::F32 && c.out[0].dtype != DType::F64 &&
                               !isNarrowFloat(c.out[0].dtype) && c.out[0].dtype != DType::I64))
    return "expects [value] and a float32, bfloat16, float64 or int64 output";
  return "";
}
Status runFill(const KernelCall &c) {
  const TensorRef &y = c.out[0];
  for (int64_t k = 0, n = y.numel(); k < n; ++k) {
    if (y.dtype == DType::F32)
      y.as<float>()[k] = (float)c.floats[0];
    else if (isNarrowFloat(y.dtype))
      storeNarrow(y, k, (float)c.floats[0]);
    else if (y.dtype == DType::F64)
      y.as<double>()[k] = c.floats[0];
    else
      y.as<int64_t>()[k] = (int64_t)c.floats[0];
  }
  return Status::ok();
}

// bfloat16/float16 operands: widened to float32 around the float32 kernel.
Status runGeluGrad(const KernelCall &c) { return viaFloat32(c, runGeluGradF32); }

} // namespace zrt::cpu
