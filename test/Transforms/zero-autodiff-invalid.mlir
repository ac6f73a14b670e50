// RUN: zcc-opt %s -split-input-file -verify-diagnostics -zero-autodiff

// expected-error @+1 {{zero-autodiff: @forward has no loss (run zero-attach-loss)}}
func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}

// -----

zero.global @w buffer : tensor<2xf32>
// expected-error @+1 {{the model has no trainable parameters (check --trainable/--frozen)}}
func.func @forward(%x: tensor<2xf32>) -> (tensor<f32> {zero.loss}) {
  %w = zero.load @w : tensor<2xf32>
  %0 = zero.mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = zero.reduce sum %0 [0] {keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

zero.global @w param trainable : tensor<2x2xf32>
func.func @forward(%x: tensor<2x2xf32>) -> (tensor<f32> {zero.loss}) {
  %w = zero.load @w : tensor<2x2xf32>
  %0 = zero.mul %x, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  // expected-error @+1 {{no gradient rule for reduce max yet}}
  %1 = zero.reduce max %0 [0, 1] {keepdims = false} : tensor<2x2xf32> -> tensor<f32>
  return %1 : tensor<f32>
}
