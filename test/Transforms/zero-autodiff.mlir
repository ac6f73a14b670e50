// RUN: zcc-opt %s -split-input-file -zero-autodiff | FileCheck %s
// RUN: zcc-opt %s -split-input-file -zero-autodiff=grad-accum=4 | FileCheck %s --check-prefix=ACCUM

// A linear layer, a frozen bias and the loss: @micro_step runs the forward,
// then the adjoints in reverse order, and accumulates the gradient of the
// trainable weight into @w.grad; the frozen @b gets none.
// CHECK: zero.global @w param trainable : tensor<3x4xf32>
// CHECK-NEXT: zero.global @w.grad grad : tensor<3x4xf32> = dense<0.000000e+00>
// CHECK: zero.global @b buffer : tensor<3xf32>
// CHECK-NOT: @b.grad
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: -> (tensor<f32> {zero.loss, zero.output = "loss"})
// CHECK: %[[Y:.*]] = zero.matmul %[[X:.*]], %[[W:.*]] {transpose_rhs}
// CHECK: %[[Z:.*]] = zero.add %[[Y]], %{{.*}}
// CHECK: %[[L:.*]] = zero.cross_entropy %[[Z]], %[[LABELS:.*]] {ignore_index = -100 : i64}
// CHECK: %[[SEED:.*]] = zero.constant dense<1.000000e+00> : tensor<f32>
// ACCUM: zero.constant dense<2.500000e-01> : tensor<f32>
// CHECK: %[[DZ:.*]] = zero.cross_entropy_grad %[[Z]], %[[LABELS]], %[[SEED]]
// The bias broadcast: dY = dZ (same shape), then dW = dY^T X for y = x W^T.
// CHECK: %[[DW:.*]] = zero.matmul %[[DZ]], %[[X]] {transpose_lhs} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
// CHECK: %[[ACC:.*]] = zero.load @w.grad
// CHECK: %[[NEW:.*]] = zero.add %[[ACC]], %[[DW]]
// CHECK: zero.store %[[NEW]], @w.grad
// CHECK: return %[[L]] : tensor<f32>
zero.global @w param trainable : tensor<3x4xf32>
zero.global @b buffer : tensor<3xf32>
func.func @forward(%x: tensor<2x4xf32> {zero.input = "x"}, %l: tensor<2xi64> {zero.input = "labels"})
    -> (tensor<f32> {zero.loss, zero.output = "loss"}, tensor<2x3xf32> {zero.output = "logits"}) {
  %w = zero.load @w : tensor<3x4xf32>
  %b = zero.load @b : tensor<3xf32>
  %0 = zero.matmul %x, %w {transpose_rhs} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  %1 = zero.add %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %2 = zero.cross_entropy %1, %l {ignore_index = -100 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %2, %1 : tensor<f32>, tensor<2x3xf32>
}

// -----

// Tied weights: one global read by a gather and a matmul gets the sum of both
// adjoints; the broadcast operand of the add gets its adjoint summed back.
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[DT:.*]] = zero.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<2x5xf32>, tensor<2x4xf32>) -> tensor<5x4xf32>
// CHECK: %[[DG:.*]] = zero.gather_grad %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<2xi64>, tensor<2x4xf32>) -> tensor<5x4xf32>
// CHECK: zero.add %[[DT]], %[[DG]]
// CHECK: zero.store %{{.*}}, @emb.grad
zero.global @emb param trainable : tensor<5x4xf32>
func.func @forward(%ids: tensor<2xi64>, %l: tensor<2xi64>) -> (tensor<f32> {zero.loss}) {
  %e = zero.load @emb : tensor<5x4xf32>
  %h = zero.gather %e[%ids] {axis = 0 : i64} : (tensor<5x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %t = zero.tanh %h : tensor<2x4xf32>
  %logits = zero.matmul %t, %e {transpose_rhs} : (tensor<2x4xf32>, tensor<5x4xf32>) -> tensor<2x5xf32>
  %loss = zero.cross_entropy %logits, %l {ignore_index = -100 : i64} : (tensor<2x5xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// RoPE's rotate-half cuts x in two along its last axis: the two slices'
// gradients are joined by a concatenation, not padded with zeros and added.
// dw = [g[:, 2:4], -g[:, 0:2]] for r = [-w[:, 2:4], w[:, 0:2]].
// CHECK-LABEL: func.func @micro_step
// CHECK: %[[G:.*]] = zero.cross_entropy_grad
// CHECK-NOT: zero.slice_grad
// CHECK: %[[LO:.*]] = zero.slice %[[G]]{{\[\[}}0, 0] : [2, 2] : [1, 1]]
// CHECK: %[[HI:.*]] = zero.slice %[[G]]{{\[\[}}0, 2] : [2, 4] : [1, 1]]
// CHECK: %[[N:.*]] = zero.neg %[[LO]]
// CHECK: zero.concat %[[HI]], %[[N]] {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
// CHECK-NOT: zero.slice_grad
zero.global @w param trainable : tensor<2x4xf32>
func.func @forward(%l: tensor<2xi64>) -> (tensor<f32> {zero.loss}) {
  %w = zero.load @w : tensor<2x4xf32>
  %a = zero.slice %w[[0, 0] : [2, 2] : [1, 1]] : tensor<2x4xf32> -> tensor<2x2xf32>
  %b = zero.slice %w[[0, 2] : [2, 4] : [1, 1]] : tensor<2x4xf32> -> tensor<2x2xf32>
  %n = zero.neg %b : tensor<2x2xf32>
  %r = zero.concat %n, %a {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %loss = zero.cross_entropy %r, %l {ignore_index = -100 : i64} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
