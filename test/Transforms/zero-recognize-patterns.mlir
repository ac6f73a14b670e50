// RUN: zcc-opt %s -split-input-file -zero-recognize-patterns -canonicalize | FileCheck %s

// F.gelu as PyTorch's dynamo exporter writes it: x * (0.5 * (erf(x / sqrt2) + 1)).
// CHECK-LABEL: func.func @gelu_erf
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
func.func @gelu_erf(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %[[G:.*]] = zero.gelu %[[X]] none : tensor<4x8xf32>
  // CHECK-NEXT: return %[[G]]
  %sqrt2 = zero.constant dense<1.41421354> : tensor<f32>
  %one = zero.constant dense<1.0> : tensor<f32>
  %half = zero.constant dense<0.5> : tensor<f32>
  %0 = zero.div %x, %sqrt2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = zero.erf %0 : tensor<4x8xf32>
  %2 = zero.add %1, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = zero.mul %half, %2 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = zero.mul %x, %3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// -----

// GPT-2's gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
// CHECK-LABEL: func.func @gelu_tanh
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
func.func @gelu_tanh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %[[G:.*]] = zero.gelu %[[X]] tanh : tensor<4x8xf32>
  // CHECK-NEXT: return %[[G]]
  %half = zero.constant dense<0.5> : tensor<f32>
  %three = zero.constant dense<3.0> : tensor<f32>
  %c = zero.constant dense<0.044715> : tensor<f32>
  %k = zero.constant dense<0.797884583> : tensor<f32>
  %one = zero.constant dense<1.0> : tensor<f32>
  %0 = zero.mul %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = zero.pow %x, %three : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = zero.mul %1, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = zero.add %x, %2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = zero.mul %3, %k : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %5 = zero.tanh %4 : tensor<4x8xf32>
  %6 = zero.add %5, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %7 = zero.mul %0, %6 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %7 : tensor<4x8xf32>
}

// -----

// A wrong constant is not GELU.
// CHECK-LABEL: func.func @not_gelu
func.func @not_gelu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK-NOT: zero.gelu
  // CHECK: zero.erf
  %sqrt3 = zero.constant dense<1.7320508> : tensor<f32>
  %one = zero.constant dense<1.0> : tensor<f32>
  %half = zero.constant dense<0.5> : tensor<f32>
  %0 = zero.div %x, %sqrt3 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = zero.erf %0 : tensor<4x8xf32>
  %2 = zero.add %1, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = zero.mul %half, %2 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = zero.mul %x, %3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
func.func @silu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %[[S:.*]] = zero.silu %[[X]] : tensor<4x8xf32>
  // CHECK-NEXT: return %[[S]]
  %0 = zero.sigmoid %x : tensor<4x8xf32>
  %1 = zero.mul %x, %0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// LlamaRMSNorm: w * (x * 1/sqrt(mean(x^2, -1) + eps)).
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8xf32>)
func.func @rms_norm(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // CHECK-NEXT: %[[N:.*]] = zero.rms_norm %[[X]], %[[W]] {axis = 2 : i64, epsilon = 9.9999999747524271E-7 : f64}
  // CHECK-NEXT: return %[[N]]
  %two = zero.constant dense<2.0> : tensor<f32>
  %eps = zero.constant dense<1.0e-6> : tensor<f32>
  %0 = zero.pow %x, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %1 = zero.reduce mean %0 [2] {keepdims = true} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %2 = zero.add %1, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %3 = zero.sqrt %2 : tensor<2x4x1xf32>
  %4 = zero.reciprocal %3 : tensor<2x4x1xf32>
  %5 = zero.mul %x, %4 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %6 = zero.mul %w, %5 : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %6 : tensor<2x4x8xf32>
}

// -----

// A mean over another axis is not RMSNorm.
// CHECK-LABEL: func.func @not_rms_norm
func.func @not_rms_norm(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // CHECK-NOT: zero.rms_norm
  %two = zero.constant dense<2.0> : tensor<f32>
  %eps = zero.constant dense<1.0e-6> : tensor<f32>
  %0 = zero.pow %x, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %1 = zero.reduce mean %0 [1] {keepdims = true} : tensor<2x4x8xf32> -> tensor<2x1x8xf32>
  %2 = zero.add %1, %eps : (tensor<2x1x8xf32>, tensor<f32>) -> tensor<2x1x8xf32>
  %3 = zero.rsqrt %2 : tensor<2x1x8xf32>
  %5 = zero.mul %x, %3 : (tensor<2x4x8xf32>, tensor<2x1x8xf32>) -> tensor<2x4x8xf32>
  %6 = zero.mul %w, %5 : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %6 : tensor<2x4x8xf32>
}

// -----

// Attention's scores: an additive mask, the softmax and the NaN guard of
// PyTorch's exported scaled_dot_product_attention become one bias_softmax.
// CHECK-LABEL: func.func @attention_softmax
// CHECK-SAME: (%[[S:.*]]: tensor<2x3x4x4xf32>, %[[M:.*]]: tensor<2x1x4x4xf32>)
func.func @attention_softmax(%s: tensor<2x3x4x4xf32>, %m: tensor<2x1x4x4xf32>) -> tensor<2x3x4x4xf32> {
  // CHECK-NEXT: %[[P:.*]] = zero.bias_softmax %[[S]], %[[M]] {nan_to_zero}
  // CHECK-NEXT: return %[[P]]
  %zero = zero.constant dense<0.0> : tensor<f32>
  %0 = zero.add %s, %m : (tensor<2x3x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x3x4x4xf32>
  %1 = zero.softmax %0 {axis = 3 : i64} : tensor<2x3x4x4xf32>
  %2 = zero.cmp ne %1, %1 : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xi1>
  %3 = zero.where %2, %zero, %1 : (tensor<2x3x4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %3 : tensor<2x3x4x4xf32>
}

// -----

// Without the guard (the mask first), and a softmax whose result has other
// users keeps its guard unfused; softmax over another axis is left alone.
// CHECK-LABEL: func.func @masked_softmax
// CHECK-SAME: (%[[S:.*]]: tensor<3x4xf32>, %[[M:.*]]: tensor<4xf32>)
func.func @masked_softmax(%s: tensor<3x4xf32>, %m: tensor<4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  // CHECK: %[[P:.*]] = zero.bias_softmax %[[S]], %[[M]] :
  // CHECK: %[[Q:.*]] = zero.bias_softmax %{{.*}}, %[[M]] :
  // CHECK: zero.cmp ne %[[Q]], %[[Q]]
  // CHECK: zero.softmax {{.*}}axis = 0
  // CHECK-NOT: bias_softmax
  %zero = zero.constant dense<0.0> : tensor<f32>
  %0 = zero.add %m, %s : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %1 = zero.softmax %0 {axis = 1 : i64} : tensor<3x4xf32>
  %2 = zero.mul %s, %s : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %3 = zero.add %2, %m : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %4 = zero.softmax %3 {axis = 1 : i64} : tensor<3x4xf32>
  %5 = zero.cmp ne %4, %4 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xi1>
  %6 = zero.where %5, %zero, %4 : (tensor<3x4xi1>, tensor<f32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %7 = zero.add %6, %4 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %8 = zero.add %s, %m : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %9 = zero.softmax %8 {axis = 0 : i64} : tensor<3x4xf32>
  return %1, %7, %9 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}
