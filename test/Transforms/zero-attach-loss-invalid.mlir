// RUN: zcc-opt %s -split-input-file -verify-diagnostics -zero-attach-loss=loss=cross-entropy

// expected-error @+1 {{--loss cross-entropy needs a floating-point output of rank >= 1 (the logits); the model has none}}
func.func @forward(%x: tensor<4xi64>) -> tensor<4xi64> {
  return %x : tensor<4xi64>
}

// -----

// expected-error @+1 {{the model already has an input named 'labels'}}
func.func @forward(%x: tensor<4x3xf32>, %l: tensor<4xi64> {zero.input = "labels"}) -> tensor<4x3xf32> {
  return %x : tensor<4x3xf32>
}
