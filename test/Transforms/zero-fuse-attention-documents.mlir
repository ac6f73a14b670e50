// RUN: zcc-opt %s -split-input-file -verify-diagnostics -zero-fuse-attention="documents=position_ids" | FileCheck %s

// Per-document attention (zcc --per-document): a causal self-attention takes
// the positions input.
// CHECK-LABEL: func.func @forward
// CHECK: zero.attention_packed %{{.*}} positions %arg1 {causal, scale = 5.000000e-01 : f64} : (tensor<1x4x3x4x4xf32>, tensor<1x4xi64>) ->
func.func @forward(%x: tensor<1x4x48xf32> {zero.input = "x"}, %pos: tensor<1x4xi64> {zero.input = "position_ids"}) -> tensor<1x4x4x4xf32> {
  %c = zero.constant dense<0.5> : tensor<f32>
  %mask = zero.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %parts:3 = zero.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<1x4x48xf32> -> tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>
  %q = zero.reshape %parts#0 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %k = zero.reshape %parts#1 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %v = zero.reshape %parts#2 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %kT = zero.transpose %k [0, 2, 3, 1] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %scores = zero.matmul %qt, %kT : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %scaled = zero.mul %scores, %c : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %p = zero.bias_softmax %scaled, %mask : (tensor<1x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x4x4x4xf32>
  %o = zero.matmul %p, %vt : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  return %ob : tensor<1x4x4x4xf32>
}

// -----

// A mask that is not causal (none at all): the documents would see each
// other, an error naming the op.
func.func @forward(%x: tensor<1x4x48xf32> {zero.input = "x"}, %pos: tensor<1x4xi64> {zero.input = "position_ids"}) -> tensor<1x4x4x4xf32> {
  %c = zero.constant dense<0.5> : tensor<f32>
  %mask = zero.constant dense<0.0> : tensor<1x1x4x4xf32>
  %parts:3 = zero.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<1x4x48xf32> -> tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>
  %q = zero.reshape %parts#0 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %k = zero.reshape %parts#1 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %v = zero.reshape %parts#2 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %kT = zero.transpose %k [0, 2, 3, 1] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %scores = zero.matmul %qt, %kT : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %scaled = zero.mul %scores, %c : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %p = zero.bias_softmax %scaled, %mask : (tensor<1x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x4x4x4xf32>
  // expected-error @+1 {{this attention's mask is not causal over the sequence}}
  %o = zero.matmul %p, %vt : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  return %ob : tensor<1x4x4x4xf32>
}

// -----

// No such input.
// expected-error @+1 {{per-document attention: @forward has no integer [batch, sequence] input 'position_ids'}}
module {
  func.func @forward(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
    return %x : tensor<1x4xf32>
  }
}
