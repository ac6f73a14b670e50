// RUN: zcc-opt %s -split-input-file -zero-group-casts | FileCheck %s

// Mixed precision's parameter casts at the start of a step: one cast_many
// where the last cast was; loads and constants between them do not break
// the run.
// CHECK-LABEL: func.func @params
// CHECK-SAME: (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>, %[[C:.*]]: tensor<2x2xf32>)
func.func @params(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %c: tensor<2x2xf32>) -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<2x2xbf16>) {
  // CHECK-NEXT: %[[K:.*]] = zero.constant
  // CHECK-NEXT: %[[M:.*]]:3 = zero.cast_many %[[A]], %[[B]], %[[C]] : (tensor<4x8xf32>, tensor<8xf32>, tensor<2x2xf32>) -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<2x2xbf16>)
  // CHECK-NEXT: return %[[M]]#0, %[[M]]#1, %[[M]]#2
  %0 = zero.cast %a : tensor<4x8xf32> to tensor<4x8xbf16>
  %1 = zero.cast %b : tensor<8xf32> to tensor<8xbf16>
  %k = zero.constant dense<1.0> : tensor<f32>
  %2 = zero.cast %c : tensor<2x2xf32> to tensor<2x2xbf16>
  return %0, %1, %2 : tensor<4x8xbf16>, tensor<8xbf16>, tensor<2x2xbf16>
}

// -----

// A run ends where an op reads one of its casts, where the types change, and
// at any op that is not a load or a constant; a lone cast stays as it is.
// CHECK-LABEL: func.func @runs
func.func @runs(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>, %d: tensor<8xf32>, %h: tensor<8xf16>)
    -> (tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>) {
  // CHECK: zero.cast_many %{{.*}}, %{{.*}} : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xbf16>, tensor<8xbf16>)
  // CHECK-NEXT: zero.exp
  // CHECK-NEXT: zero.cast %{{.*}} : tensor<8xf32> to tensor<8xbf16>
  // CHECK-NEXT: zero.cast %{{.*}} : tensor<8xf16> to tensor<8xf32>
  // CHECK-NEXT: zero.cast %{{.*}} : tensor<8xf32> to tensor<8xbf16>
  // CHECK-NOT: cast_many
  %0 = zero.cast %a : tensor<8xf32> to tensor<8xbf16>
  %1 = zero.cast %b : tensor<8xf32> to tensor<8xbf16>
  %2 = zero.exp %0 : tensor<8xbf16>
  %3 = zero.cast %c : tensor<8xf32> to tensor<8xbf16>
  %4 = zero.cast %h : tensor<8xf16> to tensor<8xf32>
  %5 = zero.cast %4 : tensor<8xf32> to tensor<8xbf16>
  return %1, %2, %4, %3, %5, %d : tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>
}

// -----

// Gradients widened and packed into a bucket: one cast_concat. A piece that
// is not a single-use cast goes in as it is.
// CHECK-LABEL: func.func @bucket
// CHECK-SAME: (%[[W:.*]]: tensor<4x8xbf16>, %[[B:.*]]: tensor<8xbf16>, %[[F:.*]]: tensor<3xf32>)
func.func @bucket(%w: tensor<4x8xbf16>, %b: tensor<8xbf16>, %f: tensor<3xf32>) -> tensor<43xf32> {
  // CHECK-NEXT: %[[G:.*]] = zero.cast_concat %[[W]], %[[B]], %[[F]] : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<3xf32>) -> tensor<43xf32>
  // CHECK-NEXT: return %[[G]]
  %0 = zero.cast %w : tensor<4x8xbf16> to tensor<4x8xf32>
  %1 = zero.reshape %0 : tensor<4x8xf32> -> tensor<32xf32>
  %2 = zero.cast %b : tensor<8xbf16> to tensor<8xf32>
  %3 = zero.concat %1, %2, %f {axis = 0 : i64} : (tensor<32xf32>, tensor<8xf32>, tensor<3xf32>) -> tensor<43xf32>
  return %3 : tensor<43xf32>
}

// -----

// Left alone: a cast read elsewhere too (only one single-use cast is left),
// and a concat that is not 1-D.
// CHECK-LABEL: func.func @bucket_not_grouped
// CHECK-NOT: cast_concat
func.func @bucket_not_grouped(%w: tensor<8xbf16>, %b: tensor<8xbf16>, %m: tensor<2x4xbf16>)
    -> (tensor<16xf32>, tensor<8xf32>, tensor<4x4xf32>) {
  %0 = zero.cast %w : tensor<8xbf16> to tensor<8xf32>
  %1 = zero.cast %b : tensor<8xbf16> to tensor<8xf32>
  %2 = zero.concat %0, %1 {axis = 0 : i64} : (tensor<8xf32>, tensor<8xf32>) -> tensor<16xf32>
  %3 = zero.cast %m : tensor<2x4xbf16> to tensor<2x4xf32>
  %4 = zero.cast %m : tensor<2x4xbf16> to tensor<2x4xf32>
  %5 = zero.concat %3, %4 {axis = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  return %2, %0, %5 : tensor<16xf32>, tensor<8xf32>, tensor<4x4xf32>
}
