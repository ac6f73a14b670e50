// RUN: zcc-opt %s -split-input-file -zero-plan-memory | FileCheck %s
// RUN: zcc-opt %s -split-input-file -zero-plan-memory=in-place=false | FileCheck %s --check-prefix=NOINPLACE

// Globals are laid out in the state arena, arguments in the input arena,
// constants in the constant arena, 64-byte aligned.
// CHECK-LABEL: module attributes
// CHECK-SAME: zero.constant_arena_bytes = 64
// CHECK-SAME: zero.device_arena_bytes = 192
// CHECK-SAME: zero.input_arena_bytes = 128
// CHECK-SAME: zero.state_arena_bytes = 192
// CHECK: zero.global @w param trainable {zero.offset = 0 : i64} : tensor<4x4xf32>
// CHECK: zero.global @b param trainable {zero.offset = 64 : i64} : tensor<4xf32>
// CHECK: zero.global @s buffer {zero.offset = 128 : i64} : tensor<2xf32>
zero.global @w param trainable : tensor<4x4xf32>
zero.global @b param trainable : tensor<4xf32>
zero.global @s buffer : tensor<2xf32>
// CHECK: func.func @forward(%{{.*}}: tensor<4x4xf32> {zero.offset = 0 : i64}, %{{.*}}: tensor<4xi64> {zero.offset = 64 : i64})
func.func @forward(%x: tensor<4x4xf32>, %l: tensor<4xi64>) -> tensor<f32> {
  %w = zero.load @w : tensor<4x4xf32>
  %b = zero.load @b : tensor<4xf32>
  // CHECK: zero.constant {zero.offsets = array<i64: 0>}
  %c = zero.constant dense<2.0> : tensor<f32>
  // CHECK: zero.matmul {{.*}} {zero.offsets = array<i64: 0>}
  %0 = zero.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  // The add writes in place into the matmul's result, which dies here.
  // CHECK: zero.add {{.*}} {zero.offsets = array<i64: 0>}
  // NOINPLACE: zero.add {{.*}} {zero.offsets = array<i64: 64>}
  %1 = zero.add %0, %b : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  // A view: no offset of its own.
  // CHECK: zero.reshape %{{.*}} : tensor<4x4xf32> -> tensor<16xf32>
  // CHECK-NOT: zero.offsets
  %2 = zero.reshape %1 : tensor<4x4xf32> -> tensor<16xf32>
  // %1 is still live through the view %2, so the mul gets new bytes.
  // CHECK: zero.mul {{.*}} {zero.offsets = array<i64: 64>}
  %3 = zero.mul %1, %c : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  // CHECK: zero.reduce sum {{.*}} {keepdims = false, zero.offsets = array<i64: 128>}
  %4 = zero.reduce sum %2 [0] {keepdims = false} : tensor<16xf32> -> tensor<f32>
  // %1/%2 are dead now: the cross-entropy reuses their bytes.
  // CHECK: zero.cross_entropy {{.*}} zero.offsets = array<i64: 0>
  %5 = zero.cross_entropy %3, %l {ignore_index = -100 : i64} : (tensor<4x4xf32>, tensor<4xi64>) -> tensor<f32>
  // In place again: the reduce's result dies here.
  // CHECK: zero.add {{.*}} {zero.offsets = array<i64: 128>}
  %6 = zero.add %4, %5 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %6 : tensor<f32>
}

// -----

// Results stay live to the end: nothing reuses a returned value's bytes.
// CHECK-LABEL: module attributes
// CHECK-SAME: zero.device_arena_bytes = 128
func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // CHECK: zero.exp {{.*}} {zero.offsets = array<i64: 0>}
  %0 = zero.exp %x : tensor<4xf32>
  // CHECK: zero.neg {{.*}} {zero.offsets = array<i64: 64>}
  %1 = zero.neg %0 : tensor<4xf32>
  // %1 dies here and is not returned: in place (and again for the sin).
  // CHECK: zero.tanh {{.*}} {zero.offsets = array<i64: 64>}
  %2 = zero.tanh %1 : tensor<4xf32>
  // CHECK: zero.sin {{.*}} {zero.offsets = array<i64: 64>}
  %3 = zero.sin %2 : tensor<4xf32>
  return %0, %3 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Store forwarding: an elementwise result stored to a global, read nowhere
// else, is written straight into the global's bytes (no device memory, no
// copy) -- gradient accumulation and optimizer updates in place.
zero.global @g grad : tensor<4xf32>
zero.global @h grad : tensor<4xf32>
// CHECK-LABEL: module attributes
// CHECK-SAME: zero.device_arena_bytes = 64
func.func @forward(%d: tensor<4xf32>) -> tensor<4xf32> {
  %g = zero.load @g : tensor<4xf32>
  // CHECK: zero.add {{.*}} {zero.in_state = array<i64: 1>, zero.offsets = array<i64: 0>}
  %0 = zero.add %g, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  zero.store %0, @g : tensor<4xf32>
  // @h is read again after the op that computes its new value: no forwarding.
  %h = zero.load @h : tensor<4xf32>
  // CHECK: zero.mul {{.*}} {zero.offsets = array<i64: 0>}
  %1 = zero.mul %h, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  zero.store %1, @h : tensor<4xf32>
  return %h : tensor<4xf32>
}
