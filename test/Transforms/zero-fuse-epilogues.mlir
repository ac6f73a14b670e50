// RUN: zcc-opt %s -split-input-file -zero-fuse-epilogues | FileCheck %s

// nn.Linear: the GEMM and its bias add become one matmul_bias.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<8x4xf32>, %[[W:.*]]: tensor<3x4xf32>, %[[B:.*]]: tensor<3xf32>)
func.func @linear(%x: tensor<8x4xf32>, %w: tensor<3x4xf32>, %b: tensor<3xf32>) -> tensor<8x3xf32> {
  // CHECK-NEXT: %[[Y:.*]] = zero.matmul_bias %[[X]], %[[W]], %[[B]] {transpose_rhs}
  // CHECK-NEXT: return %[[Y]]
  %0 = zero.matmul %x, %w {transpose_rhs} : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
  %1 = zero.add %b, %0 : (tensor<3xf32>, tensor<8x3xf32>) -> tensor<8x3xf32>
  return %1 : tensor<8x3xf32>
}

// -----

// Left alone: a GEMM with another user, a bias over rows, a bias computed
// after the GEMM (the fused op would read it before it exists).
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: matmul_bias
func.func @not_fused(%x: tensor<8x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>, %r: tensor<8x1xf32>)
    -> (tensor<8x3xf32>, tensor<8x3xf32>, tensor<8x3xf32>, tensor<8x3xf32>) {
  %0 = zero.matmul %x, %w : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %1 = zero.add %0, %b : (tensor<8x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %2 = zero.matmul %x, %w : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %3 = zero.add %2, %r : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
  %4 = zero.matmul %x, %w : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %5 = zero.exp %b : tensor<3xf32>
  %6 = zero.add %4, %5 : (tensor<8x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  return %0, %1, %3, %6 : tensor<8x3xf32>, tensor<8x3xf32>, tensor<8x3xf32>, tensor<8x3xf32>
}
