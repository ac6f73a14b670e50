//===- Kernels.h - the CPU kernel library ------------------------*- C++ -*-===//
//
// Every plan instruction names a kernel of kernels/Kernels.def; this library
// implements each (the CPU is the reference backend), in one file per family
// (cpu/Elementwise.cpp, Layout, Gemm, Moe, Reduce, Norm, Attention, Loss,
// Optimizer; cpu/KernelTable.cpp lists them by id). A kernel has two
// halves: `check` validates the operands' dtypes and shapes and the integer
// and float attributes before anything runs (the plan validator calls it for
// every instruction), and `run` computes. The ABI, per kernel:
//
//   add sub mul div pow max min   (a, b) -> c       f32 (add sub mul max min: also i64)
//   and or                        (a, b) -> c       bool; NumPy broadcasting for all binaries
//   cmp      ints [pred]          (a, b) -> bool    pred: eq ne lt le gt ge = 0..5; f32/i64
//   where                         (cond, a, b) -> c broadcast
//   neg abs exp log sqrt rsqrt reciprocal tanh erf sigmoid relu silu cos sin   f32 -> f32
//   not                           bool -> bool
//   gelu     ints [tanh?]         f32 -> f32
//   dropout  ints [key, samples] floats [ratio]  (x, rng i64 [seed, position]) -> y
//   cast                          x -> y            between f32 f64 i64 i32 bool
//   expand                        x -> y            broadcast to y's shape
//   transpose ints = perm         x -> y            y.dim(i) = x.dim(perm[i])
//   slice    ints = start ++ stride                 y's shape gives the counts
//   concat   ints [axis]          (x...) -> y
//   split    ints [axis]          x -> (y...)
//   gather   ints [axis]          (data, indices i64/i32) -> y   (ONNX Gather)
//   matmul   ints [ta, tb]        (a, b) -> c       batched, broadcast batch dims; OpenBLAS
//   reduce   ints [kind, keepdims, axes...]         kind: sum mean max min prod = 0..4
//   softmax / log_softmax ints [axis]
//   layer_norm ints [axis] floats [eps]   (x, scale[, bias]) -> y
//   rms_norm   ints [axis] floats [eps]   (x, scale) -> y
//   cross_entropy ints [ignore_index]     (logits [N..,C], labels i64 [N..]) -> f32 []
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CPU_KERNELS_H
#define ZRT_CPU_KERNELS_H

#include "kernels/KernelCall.h"
#include "kernels/KernelId.h"
#include "support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zrt {

struct KernelInfo {
  const char *name;
  /// Empty if the call is well-formed, else what is wrong.
  std::string (*check)(const KernelCall &call);
  Status (*run)(const KernelCall &call);
};

/// The CPU implementation of kernel |id|: an index into a table built from
/// Kernels.def (resolve a plan's name with lookupKernel, once).
const KernelInfo &cpuKernel(KernelId id);

/// OpenBLAS allocates a 128 MiB buffer per thread for its GEMMs and, when it
/// cannot, retries without end (a hang, not an error): under an address-space
/// limit (ulimit -v) this checks first that the buffers fit, with one BLAS
/// thread if the limit is tight, and says what to do if even that does not.
Status checkBlasMemory();

} // namespace zrt

#endif // ZRT_CPU_KERNELS_H
