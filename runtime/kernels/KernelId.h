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
/// each is (opcode, a, b, dtype), opcode one of these. The compiler's fusion
/// and verifier and the CPU kernel read them from here.
enum class ElementwiseOpcode : int64_t { Add = 0, Sub = 1, Mul = 2, Div = 3, Neg = 4, Cast = 5 };
inline constexpr int64_t kNumElementwiseOpcodes = 6;
inline constexpr bool isUnaryOpcode(int64_t op) {
  return op == (int64_t)ElementwiseOpcode::Neg || op == (int64_t)ElementwiseOpcode::Cast;
}

} // namespace zrt

#endif // ZRT_KERNELS_KERNELID_H
