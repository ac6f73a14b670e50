// RUN: zcc-opt %s -zero-mixed-precision | FileCheck %s

// Float32 globals and arguments are cast to bf16 where they enter; the ops
// compute in bf16; the cross-entropy loss stays float32; integer values are
// untouched.
zero.global @w param trainable : tensor<3x4xf32>
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {zero.loss}, tensor<2x3xbf16>)
// CHECK: %[[XB:.*]] = zero.cast %{{.*}} : tensor<2x4xf32> to tensor<2x4xbf16>
// CHECK: %[[W:.*]] = zero.load @w : tensor<3x4xf32>
// CHECK: %[[WB:.*]] = zero.cast %[[W]] : tensor<3x4xf32> to tensor<3x4xbf16>
// CHECK: %[[Y:.*]] = zero.matmul %[[XB]], %[[WB]] {transpose_rhs} : (tensor<2x4xbf16>, tensor<3x4xbf16>) -> tensor<2x3xbf16>
// CHECK: %[[T:.*]] = zero.tanh %[[Y]] : tensor<2x3xbf16>
// CHECK: zero.cross_entropy %[[T]], %{{.*}} {ignore_index = -100 : i64} : (tensor<2x3xbf16>, tensor<2xi64>) -> tensor<f32>
func.func @forward(%x: tensor<2x4xf32>, %l: tensor<2xi64>) -> (tensor<f32> {zero.loss}, tensor<2x3xf32>) {
  %w = zero.load @w : tensor<3x4xf32>
  %0 = zero.matmul %x, %w {transpose_rhs} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  %1 = zero.tanh %0 : tensor<2x3xf32>
  %2 = zero.cross_entropy %1, %l {ignore_index = -100 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %2, %1 : tensor<f32>, tensor<2x3xf32>
}
