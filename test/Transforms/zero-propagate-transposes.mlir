// RUN: zcc-opt %s -split-input-file -zero-propagate-transposes | FileCheck %s

// RoPE between the heads-out transpose and the transpose back: the first
// sinks below the slices, negation, concatenation and products (the cos
// table [1, 1, S, D] permuted by a reshape) and cancels the second.
// CHECK: module attributes {zero.transposed_elements = array<i64: 2048, 0>}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x4x16xf32>, %[[C:.*]]: tensor<1x1x8x16xf32>)
// CHECK-NOT: zero.transpose
// CHECK-DAG: %[[CR:.*]] = zero.reshape %[[C]] : tensor<1x1x8x16xf32> -> tensor<1x8x1x16xf32>
// CHECK-DAG: %[[A:.*]] = zero.slice %[[X]]{{\[\[}}0, 0, 0, 0] : [2, 8, 4, 8] : [1, 1, 1, 1]]
// CHECK-DAG: %[[B:.*]] = zero.slice %[[X]]{{\[\[}}0, 0, 0, 8] : [2, 8, 4, 16] : [1, 1, 1, 1]]
// CHECK-DAG: %[[N:.*]] = zero.neg %[[B]] : tensor<2x8x4x8xf32>
// CHECK-DAG: %[[R:.*]] = zero.concat %[[N]], %[[A]] {axis = 3 : i64}
// CHECK-DAG: zero.mul %[[X]], %[[CR]] : (tensor<2x8x4x16xf32>, tensor<1x8x1x16xf32>)
// CHECK-DAG: zero.mul %[[R]], %{{.*}} : (tensor<2x8x4x16xf32>, tensor<1x8x1x16xf32>)
// CHECK: %[[S:.*]] = zero.add
// CHECK-NEXT: return %[[S]] : tensor<2x8x4x16xf32>
module attributes {} {
func.func @forward(%x: tensor<2x8x4x16xf32>, %cos: tensor<1x1x8x16xf32>) -> tensor<2x8x4x16xf32> {
  %t = zero.transpose %x [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %a = zero.slice %t[[0, 0, 0, 0] : [2, 4, 8, 8] : [1, 1, 1, 1]] : tensor<2x4x8x16xf32> -> tensor<2x4x8x8xf32>
  %b = zero.slice %t[[0, 0, 0, 8] : [2, 4, 8, 16] : [1, 1, 1, 1]] : tensor<2x4x8x16xf32> -> tensor<2x4x8x8xf32>
  %n = zero.neg %b : tensor<2x4x8x8xf32>
  %r = zero.concat %n, %a {axis = 3 : i64} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x16xf32>
  %m1 = zero.mul %t, %cos : (tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x4x8x16xf32>
  %m2 = zero.mul %r, %cos : (tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x4x8x16xf32>
  %s = zero.add %m1, %m2 : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %back = zero.transpose %s [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  return %back : tensor<2x8x4x16xf32>
}
}

// -----

// A transpose that meets no inverse would only move (here: be duplicated
// over two users): the function is left as it was.
// CHECK-LABEL: func.func @forward
// CHECK: zero.transpose %{{.*}} [0, 2, 1, 3]
// CHECK-NEXT: zero.neg
// CHECK-NEXT: zero.exp
// CHECK-NOT: zero.transposed_elements
func.func @forward(%x: tensor<2x8x4x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) {
  %t = zero.transpose %x [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %n = zero.neg %t : tensor<2x4x8x16xf32>
  %e = zero.exp %t : tensor<2x4x8x16xf32>
  return %n, %e : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
}
