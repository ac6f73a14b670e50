// RUN: zcc-opt %s -split-input-file -zero-fuse-epilogues | FileCheck %s
// RUN: zcc-opt %s -split-input-file -zero-fuse-epilogues=gelu | FileCheck %s --check-prefix=GELU
// RUN: zcc-opt %s -split-input-file -zero-fuse-epilogues=add | FileCheck %s --check-prefix=ADD

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

// -----

// A linear layer's backward: the weight gradient's GEMM over flattened rows
// and the bias gradient's column sum of the same dy become one matmul_bgrad,
// where the first of the two was (here the reduce).
// CHECK-LABEL: func.func @bias_grad
// CHECK-SAME: (%[[X:.*]]: tensor<8x4xbf16>, %[[DY:.*]]: tensor<8x3xbf16>)
func.func @bias_grad(%x: tensor<8x4xbf16>, %dy: tensor<8x3xbf16>) -> (tensor<1x3xbf16>, tensor<4x3xbf16>) {
  // CHECK-NEXT: %[[W:.*]], %[[B:.*]] = zero.matmul_bgrad %[[X]], %[[DY]] : (tensor<8x4xbf16>, tensor<8x3xbf16>) -> (tensor<4x3xbf16>, tensor<1x3xbf16>)
  // CHECK-NEXT: return %[[B]], %[[W]]
  %0 = zero.reduce sum %dy [0] {keepdims = true} : tensor<8x3xbf16> -> tensor<1x3xbf16>
  %1 = zero.matmul %x, %dy {transpose_lhs} : (tensor<8x4xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
  return %0, %1 : tensor<1x3xbf16>, tensor<4x3xbf16>
}

// -----

// Left alone: a mean (not a sum), a sum over columns, a GEMM that does not
// transpose x, x computed after the reduce whose sum is read before the GEMM.
// CHECK-LABEL: func.func @bias_grad_not_fused
// CHECK-NOT: matmul_bgrad
func.func @bias_grad_not_fused(%x: tensor<8x4xf32>, %z: tensor<3x8xf32>, %d0: tensor<8x3xf32>,
                               %d1: tensor<8x3xf32>, %d2: tensor<8x3xf32>, %d3: tensor<8x3xf32>)
    -> (tensor<3xf32>, tensor<4x3xf32>, tensor<8xf32>, tensor<4x3xf32>, tensor<3x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4x3xf32>) {
  %0 = zero.reduce mean %d0 [0] {keepdims = false} : tensor<8x3xf32> -> tensor<3xf32>
  %1 = zero.matmul %x, %d0 {transpose_lhs} : (tensor<8x4xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %2 = zero.reduce sum %d1 [1] {keepdims = false} : tensor<8x3xf32> -> tensor<8xf32>
  %3 = zero.matmul %x, %d1 {transpose_lhs} : (tensor<8x4xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %4 = zero.matmul %z, %d2 : (tensor<3x8xf32>, tensor<8x3xf32>) -> tensor<3x3xf32>
  %5 = zero.reduce sum %d2 [0] {keepdims = false} : tensor<8x3xf32> -> tensor<3xf32>
  %6 = zero.reduce sum %d3 [0] {keepdims = false} : tensor<8x3xf32> -> tensor<3xf32>
  %7 = zero.exp %6 : tensor<3xf32>
  %8 = zero.exp %x : tensor<8x4xf32>
  %9 = zero.matmul %8, %d3 {transpose_lhs} : (tensor<8x4xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  return %0, %1, %2, %3, %4, %5, %7, %9 : tensor<3xf32>, tensor<4x3xf32>, tensor<8xf32>, tensor<4x3xf32>, tensor<3x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4x3xf32>
}

// -----

// x formed between the reduce and the GEMM (recomputed for the weight
// gradient, --recompute): the fused op takes the GEMM's place, so that a plan
// with recompute fuses the pairs the plain plan fuses.
// CHECK-LABEL: func.func @bias_grad_recomputed_x
// CHECK: %[[E:.*]] = zero.exp
// CHECK-NEXT: %[[W:.*]], %[[B:.*]] = zero.matmul_bgrad %[[E]], %{{.*}}
// CHECK-NEXT: return %[[B]], %[[W]]
func.func @bias_grad_recomputed_x(%x: tensor<8x4xf32>, %dy: tensor<8x3xf32>) -> (tensor<3xf32>, tensor<4x3xf32>) {
  %0 = zero.reduce sum %dy [0] {keepdims = false} : tensor<8x3xf32> -> tensor<3xf32>
  %1 = zero.exp %x : tensor<8x4xf32>
  %2 = zero.matmul %1, %dy {transpose_lhs} : (tensor<8x4xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  return %0, %2 : tensor<3xf32>, tensor<4x3xf32>
}

// The same with the sum reshaped to the bias's shape before x is formed (the
// keepdims reduce autodiff emits, GPT-2's last MLP with --recompute layer):
// the reshape, a view, moves after the fused op; any other reader before
// the GEMM keeps the two apart.
// CHECK-LABEL: func.func @bias_grad_recomputed_x_reshaped
// CHECK: %[[E:.*]] = zero.exp
// CHECK-NEXT: %[[W:.*]], %[[B:.*]] = zero.matmul_bgrad %[[E]], %{{.*}}
// CHECK-NEXT: %[[R:.*]] = zero.reshape %[[B]] : tensor<1x3xf32> -> tensor<3xf32>
// CHECK-NEXT: return %[[R]], %[[W]]
func.func @bias_grad_recomputed_x_reshaped(%x: tensor<8x4xf32>, %dy: tensor<8x3xf32>) -> (tensor<3xf32>, tensor<4x3xf32>) {
  %0 = zero.reduce sum %dy [0] {keepdims = true} : tensor<8x3xf32> -> tensor<1x3xf32>
  %1 = zero.reshape %0 : tensor<1x3xf32> -> tensor<3xf32>
  %2 = zero.exp %x : tensor<8x4xf32>
  %3 = zero.matmul %2, %dy {transpose_lhs} : (tensor<8x4xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  return %1, %3 : tensor<3xf32>, tensor<4x3xf32>
}

// CHECK-LABEL: func.func @bias_grad_read_before_x
// CHECK: zero.reduce sum
// CHECK-NOT: matmul_bgrad
// CHECK: zero.matmul %{{.*}}, %{{.*}} {transpose_lhs}
// CHECK-NEXT: return
func.func @bias_grad_read_before_x(%x: tensor<8x4xf32>, %dy: tensor<8x3xf32>) -> (tensor<1x3xf32>, tensor<4x3xf32>) {
  %0 = zero.reduce sum %dy [0] {keepdims = true} : tensor<8x3xf32> -> tensor<1x3xf32>
  %1 = zero.exp %0 : tensor<1x3xf32>
  %2 = zero.exp %x : tensor<8x4xf32>
  %3 = zero.matmul %2, %dy {transpose_lhs} : (tensor<8x4xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  return %1, %3 : tensor<1x3xf32>, tensor<4x3xf32>
}

// -----

// GPT-2's MLP (--target cuda, gelu): the tanh-GELU after a linear layer
// becomes matmul_bias_gelu, whose pre-activation the backward's gelu_grad
// reads; the GEMM producing the GELU's output gradient and the gelu_grad
// become matmul_gelu_grad. Without the option both stay apart.
// CHECK-LABEL: func.func @mlp
// CHECK-NOT: gelu_grad
// CHECK: zero.gelu %{{.*}} tanh
// CHECK: zero.gelu_grad
// GELU-LABEL: func.func @mlp
// GELU-SAME: (%[[X:.*]]: tensor<8x4xbf16>, %[[W:.*]]: tensor<4x16xbf16>, %[[B:.*]]: tensor<16xbf16>, %[[DY:.*]]: tensor<8x4xbf16>, %[[W2:.*]]: tensor<16x4xbf16>)
// GELU-NEXT: %[[H:.*]], %[[PRE:.*]] = zero.matmul_bias_gelu %[[X]], %[[W]], %[[B]] : (tensor<8x4xbf16>, tensor<4x16xbf16>, tensor<16xbf16>) -> (tensor<8x16xbf16>, tensor<8x16xbf16>)
// GELU-NEXT: %[[P3:.*]] = zero.reshape %[[PRE]] : tensor<8x16xbf16> -> tensor<2x4x16xbf16>
// GELU-NEXT: %[[H3:.*]] = zero.reshape %[[H]] : tensor<8x16xbf16> -> tensor<2x4x16xbf16>
// GELU-NEXT: %[[P2:.*]] = zero.reshape %[[P3]] : tensor<2x4x16xbf16> -> tensor<8x16xbf16>
// GELU-NEXT: %[[D:.*]] = zero.matmul_gelu_grad %[[DY]], %[[W2]], %[[P2]] {transpose_rhs} : (tensor<8x4xbf16>, tensor<16x4xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
// GELU-NEXT: %[[D3:.*]] = zero.reshape %[[D]] : tensor<8x16xbf16> -> tensor<2x4x16xbf16>
// GELU-NEXT: return %[[H3]], %[[D3]]
func.func @mlp(%x: tensor<8x4xbf16>, %w: tensor<4x16xbf16>, %b: tensor<16xbf16>, %dy: tensor<8x4xbf16>, %w2: tensor<16x4xbf16>)
    -> (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>) {
  %0 = zero.matmul_bias %x, %w, %b : (tensor<8x4xbf16>, tensor<4x16xbf16>, tensor<16xbf16>) -> tensor<8x16xbf16>
  %1 = zero.reshape %0 : tensor<8x16xbf16> -> tensor<2x4x16xbf16>
  %2 = zero.gelu %1 tanh : tensor<2x4x16xbf16>
  %3 = zero.matmul %dy, %w2 {transpose_rhs} : (tensor<8x4xbf16>, tensor<16x4xbf16>) -> tensor<8x16xbf16>
  %4 = zero.reshape %3 : tensor<8x16xbf16> -> tensor<2x4x16xbf16>
  %5 = zero.gelu_grad %1, %4 tanh : tensor<2x4x16xbf16>
  return %2, %5 : tensor<2x4x16xbf16>, tensor<2x4x16xbf16>
}

// -----

// Left alone even with gelu: the exact (erf) GELU, whose form cuBLASLt's
// epilogue does not compute; a product read elsewhere too.
// GELU-LABEL: func.func @mlp_not_fused
// GELU-NOT: matmul_bias_gelu
// GELU-NOT: matmul_gelu_grad
func.func @mlp_not_fused(%x: tensor<8x4xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>, %dy: tensor<8x4xf32>, %p: tensor<8x16xf32>, %w2: tensor<16x4xf32>)
    -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %0 = zero.matmul_bias %x, %w, %b : (tensor<8x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %1 = zero.gelu %0 none : tensor<8x16xf32>
  %2 = zero.matmul %dy, %w2 {transpose_rhs} : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %3 = zero.gelu_grad %p, %2 tanh : tensor<8x16xf32>
  return %1, %3, %2 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// The residual stream's add after a projection, and a sum of input
// gradients (dx of three projections): with `add`, each GEMM takes the
// addend defined before it (beta = 1); the chain folds one GEMM at a time.
// Without `add` the adds stay.
// ADD-LABEL: func.func @residual_and_sums
// CHECK-LABEL: func.func @residual_and_sums
func.func @residual_and_sums(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %u: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // ADD: %[[H:.*]] = zero.matmul_add %arg0, %arg1, %arg0 : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: zero.matmul
  // CHECK: zero.add
  %p = zero.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h = zero.add %x, %p : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // ADD: %[[A:.*]] = zero.matmul %[[H]], %arg1 {transpose_rhs}
  // ADD: %[[B:.*]] = zero.matmul_add %[[H]], %arg2, %[[A]] {transpose_rhs}
  // ADD: %[[C:.*]] = zero.matmul_add %[[H]], %arg1, %[[B]] :
  // ADD-NOT: zero.add
  // ADD: return %[[H]], %[[C]]
  %a = zero.matmul %h, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %b = zero.matmul %h, %u {transpose_rhs} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %c = zero.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = zero.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = zero.add %s, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %h, %t : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A broadcast addend (a bias) and an addend computed after the GEMM stay adds.
// ADD-LABEL: func.func @not_addends
func.func @not_addends(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %r: tensor<1x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // ADD: zero.matmul %arg0, %arg1 :
  // ADD: zero.add
  %p = zero.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = zero.add %p, %r : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  // ADD: zero.matmul %arg0, %arg1 {transpose_rhs}
  // ADD: zero.exp
  // ADD: zero.add
  %q = zero.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %e = zero.exp %x : tensor<4x8xf32>
  %t = zero.add %q, %e : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %t : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A tied embedding's gradient: the output projection's weight gradient plus
// the embedding's scatter-add. With `add` the scatter adds into the GEMM's
// result (gather_grad's addend); a scatter read twice stays as it is.
// ADD-LABEL: func.func @tied_embedding
// CHECK-LABEL: func.func @tied_embedding
func.func @tied_embedding(%ids: tensor<2x3xi64>, %dy: tensor<2x3x4xbf16>, %x: tensor<6x4xbf16>, %d: tensor<6x10xbf16>) -> (tensor<10x4xbf16>, tensor<10x4xbf16>, tensor<10x4xbf16>) {
  // ADD: %[[W:.*]] = zero.matmul %arg3, %arg2 {transpose_lhs}
  // ADD: %[[S:.*]] = zero.gather_grad %arg0, %arg1, %[[W]] {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2x3x4xbf16>, tensor<10x4xbf16>) -> tensor<10x4xbf16>
  // ADD-NOT: zero.add %[[W]]
  // CHECK: zero.gather_grad %arg0, %arg1 {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2x3x4xbf16>) -> tensor<10x4xbf16>
  // CHECK: zero.add
  %w = zero.matmul %d, %x {transpose_lhs} : (tensor<6x10xbf16>, tensor<6x4xbf16>) -> tensor<10x4xbf16>
  %e = zero.gather_grad %ids, %dy {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2x3x4xbf16>) -> tensor<10x4xbf16>
  %g = zero.add %w, %e : (tensor<10x4xbf16>, tensor<10x4xbf16>) -> tensor<10x4xbf16>
  // ADD: %[[T:.*]] = zero.gather_grad %arg0, %arg1 {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2x3x4xbf16>) -> tensor<10x4xbf16>
  // ADD: zero.add %[[W]], %[[T]]
  // ADD: return %[[S]]
  %e2 = zero.gather_grad %ids, %dy {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2x3x4xbf16>) -> tensor<10x4xbf16>
  %g2 = zero.add %w, %e2 : (tensor<10x4xbf16>, tensor<10x4xbf16>) -> tensor<10x4xbf16>
  return %g, %g2, %e2 : tensor<10x4xbf16>, tensor<10x4xbf16>, tensor<10x4xbf16>
}

// -----

// The loss and its gradient read the same logits: with `add` one
// cross_entropy_grad at the loss's place gives both (its dloss, a constant,
// moved up); a gradient of other labels stays apart.
// ADD-LABEL: func.func @loss_and_gradient
// CHECK-LABEL: func.func @loss_and_gradient
func.func @loss_and_gradient(%x: tensor<4x10xbf16>, %y: tensor<4xi64>, %z: tensor<4xi64>) -> (tensor<f32>, tensor<4x10xbf16>, tensor<4x10xbf16>) {
  // ADD: %[[D:.*]] = zero.constant dense<1.000000e+00> : tensor<f32>
  // ADD-NEXT: %[[G:.*]], %[[L:.*]] = zero.cross_entropy_grad %arg0, %arg1, %[[D]] {ignore_index = -100 : i64} : (tensor<4x10xbf16>, tensor<4xi64>, tensor<f32>) -> (tensor<4x10xbf16>, tensor<f32>)
  // ADD-NOT: zero.cross_entropy %
  // ADD: zero.cross_entropy_grad %arg0, %arg2, %[[D]] {ignore_index = -100 : i64} : (tensor<4x10xbf16>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xbf16>
  // ADD: return %[[L]], %[[G]], %
  // CHECK: zero.cross_entropy %arg0, %arg1
  // CHECK: zero.cross_entropy_grad %arg0, %arg1, %{{.*}} : (tensor<4x10xbf16>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xbf16>
  %l = zero.cross_entropy %x, %y {ignore_index = -100 : i64} : (tensor<4x10xbf16>, tensor<4xi64>) -> tensor<f32>
  %d = zero.constant dense<1.0> : tensor<f32>
  %g = zero.cross_entropy_grad %x, %y, %d {ignore_index = -100 : i64} : (tensor<4x10xbf16>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xbf16>
  %h = zero.cross_entropy_grad %x, %z, %d {ignore_index = -100 : i64} : (tensor<4x10xbf16>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xbf16>
  return %l, %g, %h : tensor<f32>, tensor<4x10xbf16>, tensor<4x10xbf16>
}
