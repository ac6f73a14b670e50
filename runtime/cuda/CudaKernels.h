//===- CudaKernels.h - the CUDA implementations of plan kernels --*- C++ -*-===//
//
// The kernels of kernels/Kernels.def with the operands and attributes of the
// CPU kernels (runtime/cpu), whose check functions the plan validator already
// ran: a CUDA kernel may assume a well-formed call. Operands are device
// pointers. One file per family, as on the CPU (cuda/Elementwise.cu, Layout,
// Gemm, Reduce, Norm, Attention, Loss, Optimizer; Collectives for in-process
// ranks; KernelTable.cu lists them by id).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_CUDAKERNELS_H
#define ZRT_CUDA_CUDAKERNELS_H

#include "comm/Communicator.h"
#include "kernels/KernelCall.h"
#include "kernels/KernelId.h"
#include "support/Status.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

namespace zrt {

struct MatmulPlans;      // cuBLASLt descriptors and algorithm per GEMM shape
struct GeneratedKernels; // the compiler's PTX, loaded (Generated.cu)

/// zrun --gemm-tune: what timing the heuristic's candidates found, one
/// line per GEMM shape (the heuristic's first choice and the fastest).
struct GemmTuneStats {
  int shapes = 0, changed = 0;
  double heuristicMs = 0, chosenMs = 0; // per call, summed over the shapes
  std::vector<std::string> lines;
};

struct CudaContext {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void *workspace = nullptr; // cuBLASLt workspace
  size_t workspaceBytes = 0;
  bool allowTf32 = false;
  /// Data-dependent errors found by kernels (a label or index out of
  /// range): [code, value, position, bound, ignore], device memory, zeroed;
  /// the first error wins. The executor reads it when a program ends.
  long long *errorInfo = nullptr;
  /// A device counter, zero between kernels, for a kernel whose last block
  /// to finish completes a reduction in the same launch (it counts the
  /// blocks, and that block sets it back to zero). One per stream's
  /// context; null where the caller made none (the kernel then launches the
  /// reduction's second pass).
  unsigned *blocksDone = nullptr;
  /// Scratch device memory for multi-pass kernels (grown on demand).
  void *scratch = nullptr;
  size_t scratchBytes = 0;
  /// What --memory-budget leaves for scratch (-1: no limit).
  int64_t scratchLimit = -1;
  Status reserve(size_t bytes);
  /// GEMM shapes seen so far: their cuBLASLt descriptors and the algorithm
  /// the heuristic chose, built once (a plan repeats its shapes every step).
  std::shared_ptr<MatmulPlans> matmulPlans;
  /// zrun --gemm-tune: time the heuristic's best few algorithms for each
  /// GEMM shape on its first call and keep the fastest (docs/cuda.md).
  bool tuneGemms = false;
  GemmTuneStats tuneStats;
  /// The compiler's generated kernels (runtime/cuda/Generated.cu), loaded
  /// once each.
  std::shared_ptr<GeneratedKernels> generated;
};

/// The message of a kernel error recorded in errorInfo (host copy), as the
/// CPU kernels word it; empty if none.
std::string describeCudaError(const long long info[5]);

/// Whether |p| allows 16-byte vector accesses.
inline bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

/// Whether kernel |id| has a CUDA implementation for this call's types and
/// shapes (cuda/KernelTable.cu).
bool hasCudaKernel(KernelId id, const KernelCall &call);

/// Whether the current device is compute capability 9.0 (H100, H200), the
/// one the sm_90a kernels (wgmma, TMA) run on (cuda/KernelTable.cu).
bool hopperGpu();

/// In-process ranks on one device: how many a collective kernel takes.
constexpr int kMaxDeviceRanks = 64;

/// out[k] = the sum over ranks r = 0..world-1, in that order, of
/// inputs[r][begin + k] for k < n, in float (divided by world if |avg|),
/// rounded once to |type|: the in-process group's arithmetic (runtime/comm),
/// so results are bit-identical to the CPU backend's. Device pointers, on
/// |stream|.
Status launchRankReduce(const void *const *inputs, int world, int64_t begin, int64_t n, void *out,
                        CommType type, bool avg, cudaStream_t stream);

/// How the tensor-core attention kernels tile a call: query rows per warp
/// of the forward kernel, in blocks of 16 (1 or 2; 0: the default for the
/// head dimension). Only benchmarks and tests choose.
struct AttentionTiling {
  int fwdRows = 0;
  /// The forward's kernel at head widths of 32 and more on compute
  /// capability 9.0 (elsewhere mma.sync): 1 mma.sync, 2 the one-warpgroup
  /// wgmma kernel, 3 the warp-specialised one (cuda/AttentionFa3.cu) where
  /// there is no bias tensor, else the one-warpgroup kernel; 0 the default
  /// (Attention.cu's warpSpecialisedForward: by head width and mask).
  int fwdKernel = 0;
  /// The backward's kernels, likewise, at widths up to 128 where there is no
  /// bias tensor (above, or with one: the one-warpgroup kernels): 3 dq by the
  /// warp-specialised kernel, dk and dv by the one-warpgroup one; 4 the other
  /// way round (cuda/AttentionFa3Bwd.cu); 5 both warp-specialised; 0 the
  /// default (Attention.cu's warpSpecialisedDkv: dk/dv warp-specialised from
  /// width 80 in bf16, the rest one-warpgroup).
  int bwdKernel = 0;
  /// The warp-specialised dk/dv's parts per k/v head (DkvParts): 0 the
  /// default (Attention.cu's dkvParts: by the blocks and the GPU's
  /// multiprocessors), else this many where it divides the group of query
  /// heads (else the default).
  int dkvParts = 0;
};

/// zero.attention (|backward|: attention_grad) on ctx.stream (runtime/cuda/Attention.cu);
/// hasAttentionKernel says whether the call's head dimension is supported.
bool hasAttentionKernel(bool backward, const KernelCall &call);
Status launchAttention(bool backward, const KernelCall &call, CudaContext &ctx,
                       AttentionTiling tiling = {});
/// "elementwise": the PTX the compiler generated for the call (call.code).
Status launchGenerated(const KernelCall &call, CudaContext &ctx);

/// Launches it on ctx.stream (asynchronously).
Status launchCudaKernel(KernelId id, const KernelCall &call, CudaContext &ctx);

} // namespace zrt

#endif // ZRT_CUDA_CUDAKERNELS_H
