//===- MoeGemm.cuh - grouped GEMMs on Hopper's wgmma --------------*- CUDA -*-===//
//
// The mixture of experts' grouped GEMMs on wgmma with TMA loads
// (cuda/MoeGemm.cu, compiled for sm_90a): cuda/Moe.cu calls them for
// bfloat16 and float16 on compute capability 9.0 where the operands suit
// TMA, and runs its SIMT kernels otherwise. The groups' row offsets are
// device data (moe_route's): the grid covers every way the rows can fall
// and each block finds its expert from the offsets.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CUDA_MOEGEMM_CUH
#define ZRT_CUDA_MOEGEMM_CUH

#include "support/DType.h"
#include "support/Status.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace zrt {

/// A grouped GEMM's operands: |rows| [m, k] in expert order, |rhs| the
/// expert matrices [experts, k, n] ([experts, n, k] when |transposeRhs|),
/// |offsets| [experts + 1] (int64, or int32 when !offsets64), |out| [m, n].
/// For the matrix gradient (launchGroupedRhsGradWgmma): out[e] [p, q] =
/// left_e^T right_e, |rows| the left [m, p] and |rhs| the right [m, q].
struct GroupedOperands {
  DType type = DType::BF16;
  const void *rows = nullptr, *rhs = nullptr, *offsets = nullptr;
  void *out = nullptr;
  bool offsets64 = true, transposeRhs = false;
  int64_t m = 0, k = 0, n = 0, experts = 0;
};

/// Whether the wgmma kernels take these operands: 16-bit types, rows of a
/// multiple of 8 elements and 16-byte aligned bases (TMA's rules), sizes
/// that fit its 32-bit coordinates, compute capability 9.0.
bool groupedWgmmaFits(const GroupedOperands &g);
/// out = rows x rhs_e over each expert's rows (grouped_matmul).
Status launchGroupedWgmma(const GroupedOperands &g, cudaStream_t st);
/// out[e] = rows_e^T rhs_e (grouped_matmul_rhs_grad's product, with the
/// caller choosing which of x and the gradient is the left): |k| is p, |n| q.
Status launchGroupedRhsGradWgmma(const GroupedOperands &g, cudaStream_t st);

} // namespace zrt

#endif // ZRT_CUDA_MOEGEMM_CUH
