//===- KernelId.h - kernel names <-> ids -------------------------*- C++ -*-===//
//
// The kernels of Kernels.def as an enum, their names, and the lookup from a
// plan's name (done once, when a plan is validated or an executor prepares
// its programs). Header-only and free of LLVM and protobuf: the compiler's
// lowering and verifier use it as the runtime does.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_KERNELID_H
#define ZRT_KERNELS_KERNELID_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zrt {

enum class KernelId : uint16_t {
#define ZRT_KERNEL(Id, Name) Id,
#include "kernels/Kernels.def"
};

inline constexpr const char *kKernelNames[] = {
#define ZRT_KERNEL(Id, Name) Name,
#include "kernels/Kernels.def"
};

/// How many kernels there are: the size of every backend's table.
inline constexpr size_t kNumKernels = sizeof(kKernelNames) / sizeof(kKernelNames[0]);

inline constexpr const char *kernelName(KernelId id) { return kKernelNames[(size_t)id]; }

/// The id of the kernel a plan calls |name|, or none. A linear scan over 62
/// short names: it runs when a plan is loaded, never per instruction.
inline std::optional<KernelId> lookupKernel(std::string_view name) {
  for (size_t k = 0; k < kNumKernels; ++k)
    if (name == kKernelNames[k])
      return (KernelId)k;
  return std::nullopt;
}

/// All kernel names, comma-separated, for messages.
inline std::string kernelNameList() {
  std::string names;
  for (const char *name : kKernelNames)
    names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

/// zero.elementwise's steps (the fused program of zero-fuse-elementwise):
/// each is (opcode, a, b, c) and a type; the compiler's fusion and verifier,
/// the plan's validator and the CPU kernel read the opcodes from here.
///  - Load: a is an input, read at the result element's coordinates plus the
///    shift of `offsets[c..c+rank)` (c = -1: no shift), each coordinate
///    clamped into the input (dimensions of 1 broadcast; an input of lower
///    rank aligns right). Slices and concatenations become these shifts.
///  - Pick: a if the result coordinate on axis offsets[c] is below
///    offsets[c+1], else b (a concatenation's seam; both sides are computed).
///  - Add..Div: binary over earlier steps a and b; the rest unary over a.
/// Every step computes in float and rounds to its type, as the separate
/// kernels do; the unary functions are the ones the CPU and CUDA kernels of
/// the ops they replace compute (runtime/cpu/Elementwise.cpp).
enum class ElementwiseOpcode : int64_t {
  Add = 0,
  Sub = 1,
  Mul = 2,
  Div = 3,
  Neg = 4,
  Cast = 5,
  Load = 6,
  Pick = 7,
  Abs = 8,
  Exp = 9,
  Log = 10,
  Sqrt = 11,
  Rsqrt = 12,
  Reciprocal = 13,
  Tanh = 14,
  Erf = 15,
  Sigmoid = 16,
  Relu = 17,
  Silu = 18,
  Cos = 19,
  Sin = 20,
  Gelu = 21,
  GeluTanh = 22,
};
inline constexpr int64_t kNumElementwiseOpcodes = 23;
/// Steps that read one earlier step (b = -1).
inline constexpr bool isUnaryOpcode(int64_t op) {
  return op == (int64_t)ElementwiseOpcode::Neg || op == (int64_t)ElementwiseOpcode::Cast ||
         op >= (int64_t)ElementwiseOpcode::Abs;
}
/// The functions of the unary opcodes from Abs on, in float: one definition
/// for the CPU kernel of the fused program and the separate CPU kernels.
inline float elementwiseUnary(int64_t op, float x) {
  switch ((ElementwiseOpcode)op) {
  case ElementwiseOpcode::Neg:
    return -x;
  case ElementwiseOpcode::Abs:
    return std::fabs(x);
  case ElementwiseOpcode::Exp:
    return std::exp(x);
  case ElementwiseOpcode::Log:
    return std::log(x);
  case ElementwiseOpcode::Sqrt:
    return std::sqrt(x);
  case ElementwiseOpcode::Rsqrt:
    return 1.0f / std::sqrt(x);
  case ElementwiseOpcode::Reciprocal:
    return 1.0f / x;
  case ElementwiseOpcode::Tanh:
    return std::tanh(x);
  case ElementwiseOpcode::Erf:
    return std::erf(x);
  case ElementwiseOpcode::Sigmoid:
    return 1.0f / (1.0f + std::exp(-x));
  case ElementwiseOpcode::Relu:
    return x < 0 ? 0.0f : x; // NaN stays NaN, as in PyTorch
  case ElementwiseOpcode::Silu:
    return x / (1.0f + std::exp(-x));
  case ElementwiseOpcode::Cos:
    return std::cos(x);
  case ElementwiseOpcode::Sin:
    return std::sin(x);
  case ElementwiseOpcode::Gelu:
    return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
  case ElementwiseOpcode::GeluTanh: {
    const float k = 0.7978845608028654f;
    return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
  }
  default:
    return x; // Cast: the rounding to the step's type
  }
}

} // namespace zrt

#endif // ZRT_KERNELS_KERNELID_H
