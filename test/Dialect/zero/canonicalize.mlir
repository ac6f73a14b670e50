// RUN: zcc-opt %s -split-input-file -canonicalize | FileCheck %s

// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
func.func @identities(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = zero.cast %x : tensor<2x3xf32> to tensor<2x3xf32>
  %1 = zero.reshape %0 : tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = zero.transpose %1 [0, 1] : tensor<2x3xf32> -> tensor<2x3xf32>
  %3 = zero.expand %2 : tensor<2x3xf32> -> tensor<2x3xf32>
  %4 = zero.slice %3[[0, 0] : [2, 3] : [1, 1]] : tensor<2x3xf32> -> tensor<2x3xf32>
  %5 = zero.concat %4 {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK-NOT: zero.
  // CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
  return %1, %2, %3, %4, %5 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @arith_identities
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
func.func @arith_identities(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %zero = zero.constant dense<0.0> : tensor<f32>
  %one = zero.constant dense<1.0> : tensor<3xf32>
  %0 = zero.add %x, %zero : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %1 = zero.add %zero, %x : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = zero.sub %x, %zero : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %3 = zero.mul %one, %x : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = zero.div %x, %one : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK-NOT: zero.
  // CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Adding zero must not fold when the result is broadcast to a larger shape.
// CHECK-LABEL: func.func @no_fold_broadcast
func.func @no_fold_broadcast(%x: tensor<3xf32>) -> tensor<2x3xf32> {
  %zero = zero.constant dense<0.0> : tensor<2x3xf32>
  // CHECK: zero.add
  %0 = zero.add %x, %zero : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
func.func @reshape_chain(%x: tensor<2x3x4xf32>) -> tensor<24xf32> {
  // CHECK-NEXT: %[[R:.*]] = zero.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<24xf32>
  // CHECK-NEXT: return %[[R]]
  %0 = zero.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = zero.reshape %0 : tensor<6x4xf32> -> tensor<24xf32>
  return %1 : tensor<24xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_constant
func.func @reshape_constant() -> tensor<2x2xf32> {
  // CHECK-NEXT: %[[C:.*]] = zero.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
  // CHECK-NEXT: return %[[C]]
  %c = zero.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %0 = zero.reshape %c : tensor<4xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

// CHECK-LABEL: func.func @transpose_chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
func.func @transpose_chain(%x: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  // CHECK-NEXT: %[[T:.*]] = zero.transpose %[[X]] [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  // CHECK-NEXT: return %[[T]], %[[X]]
  %0 = zero.transpose %x [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %1 = zero.transpose %0 [2, 1, 0] : tensor<3x2x4xf32> -> tensor<4x2x3xf32>
  %2 = zero.transpose %x [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %3 = zero.transpose %2 [0, 2, 1] : tensor<2x4x3xf32> -> tensor<2x3x4xf32>
  return %1, %3 : tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// -----

// PyTorch's nn.Linear exports as MatMul(x, Transpose(W)): the transpose moves
// into the matmul.
// CHECK-LABEL: func.func @matmul_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<4x8x16xf32>, %[[W:.*]]: tensor<32x16xf32>)
func.func @matmul_transpose(%x: tensor<4x8x16xf32>, %w: tensor<32x16xf32>) -> tensor<4x8x32xf32> {
  // CHECK-NEXT: %[[Y:.*]] = zero.matmul %[[X]], %[[W]] {transpose_rhs} : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  // CHECK-NEXT: return %[[Y]]
  %t = zero.transpose %w [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %0 = zero.matmul %x, %t : (tensor<4x8x16xf32>, tensor<16x32xf32>) -> tensor<4x8x32xf32>
  return %0 : tensor<4x8x32xf32>
}

// -----

// A transpose that permutes batch dims stays.
// CHECK-LABEL: func.func @matmul_batch_transpose
func.func @matmul_batch_transpose(%x: tensor<2x3x4x5xf32>, %y: tensor<3x2x5x6xf32>) -> tensor<2x3x4x6xf32> {
  // CHECK: zero.transpose
  // CHECK: zero.matmul
  %t = zero.transpose %y [1, 0, 2, 3] : tensor<3x2x5x6xf32> -> tensor<2x3x5x6xf32>
  %0 = zero.matmul %x, %t : (tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x4x6xf32>
  return %0 : tensor<2x3x4x6xf32>
}

// -----

// CHECK-LABEL: func.func @where_splat
// CHECK-SAME: (%[[A:.*]]: tensor<3xf32>, %[[B:.*]]: tensor<3xf32>)
func.func @where_splat(%a: tensor<3xf32>, %b: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %t = zero.constant dense<true> : tensor<3xi1>
  %f = zero.constant dense<false> : tensor<i1>
  %0 = zero.where %t, %a, %b : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = zero.where %f, %a, %b : (tensor<i1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  // CHECK-NEXT: return %[[A]], %[[B]]
  return %0, %1 : tensor<3xf32>, tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @expand_splat
func.func @expand_splat() -> tensor<4x3xf32> {
  // CHECK-NEXT: %[[C:.*]] = zero.constant dense<2.000000e+00> : tensor<4x3xf32>
  // CHECK-NEXT: return %[[C]]
  %c = zero.constant dense<2.0> : tensor<3xf32>
  %0 = zero.expand %c : tensor<3xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// Unused loads are dead (they only read); stores stay.
zero.global @w param trainable : tensor<3xf32>
// CHECK-LABEL: func.func @dead_load
func.func @dead_load(%x: tensor<3xf32>) {
  // CHECK-NOT: zero.load
  // CHECK: zero.store
  %0 = zero.load @w : tensor<3xf32>
  zero.store %x, @w : tensor<3xf32>
  return
}
