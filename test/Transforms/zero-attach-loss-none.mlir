// RUN: zcc-opt %s -split-input-file -verify-diagnostics -zero-attach-loss=loss=none | FileCheck %s

// With loss=none the graph's scalar output is the loss.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {zero.loss, zero.output = "y"})
func.func @forward(%x: tensor<4xf32>) -> (tensor<f32> {zero.output = "y"}) {
  %0 = zero.reduce sum %x [0] {keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// expected-error @+1 {{the model has no scalar floating-point output to use as the loss; for a model that outputs logits, compile with --loss cross-entropy}}
func.func @forward(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  return %x : tensor<2x3x4xf32>
}
