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

// -----

// Gradients packed into their bucket (a concatenation stored to a global):
// a piece that only the concatenation reads is written by its producer
// straight into its place in the bucket (zero.in_state; the runtime's concat
// then copies nothing for it) and takes no device memory. A piece that is
// read elsewhere too, or whose place is not 64-byte aligned, gets its own
// bytes and is copied.
// CHECK-LABEL: module attributes
// CHECK-SAME: zero.device_arena_bytes = 128
zero.global @bucket buffer : tensor<40xf32>
zero.global @flat buffer : tensor<16xf32>
func.func @forward(%x: tensor<4x4xf32>, %y: tensor<4xf32>) -> tensor<4x4xf32> {
  // Stored through a reshape (the same bytes): written into @flat (at 192).
  // CHECK: zero.add {{.*}} {zero.in_state = array<i64: 1>, zero.offsets = array<i64: 192>}
  %a = zero.add %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %f = zero.reshape %a : tensor<4x4xf32> -> tensor<16xf32>
  zero.store %f, @flat : tensor<16xf32>
  // Bytes 0-63 of the bucket.
  // CHECK: zero.matmul {{.*}} {zero.in_state = array<i64: 1>, zero.offsets = array<i64: 0>}
  %0 = zero.matmul %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = zero.reshape %0 : tensor<4x4xf32> -> tensor<16xf32>
  // Returned too: its own bytes.
  // CHECK: zero.exp {{.*}} {zero.offsets = array<i64: 0>}
  %2 = zero.exp %x : tensor<4x4xf32>
  %3 = zero.reshape %2 : tensor<4x4xf32> -> tensor<16xf32>
  // Bytes 128-143.
  // CHECK: zero.neg {{.*}} {zero.in_state = array<i64: 1>, zero.offsets = array<i64: 128>}
  %4 = zero.neg %y : tensor<4xf32>
  // Bytes 144-159: not aligned.
  // CHECK: zero.tanh {{.*}} {zero.offsets = array<i64: 64>}
  %5 = zero.tanh %y : tensor<4xf32>
  // CHECK: zero.concat {{.*}} {axis = 0 : i64, zero.in_state = array<i64: 1>, zero.offsets = array<i64: 0>}
  %6 = zero.concat %1, %3, %4, %5 {axis = 0 : i64} : (tensor<16xf32>, tensor<16xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<40xf32>
  zero.store %6, @bucket : tensor<40xf32>
  return %2 : tensor<4x4xf32>
}

// -----

// matmul_add writes into its addend when the addend dies there (cuBLASLt's
// C = D), not when the GEMM reads the addend's bytes as an operand too.
// CHECK-LABEL: module attributes
// CHECK-SAME: zero.device_arena_bytes = 128
func.func @forward(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // CHECK: zero.exp {{.*}} {zero.offsets = array<i64: 0>}
  %0 = zero.exp %x : tensor<4x4xf32>
  // CHECK: zero.matmul_add {{.*}} {zero.offsets = array<i64: 0>}
  // NOINPLACE: zero.matmul_add {{.*}} {zero.offsets = array<i64: 64>}
  %1 = zero.matmul_add %x, %w, %0 : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  // The addend is also the left operand: new bytes.
  // CHECK: zero.matmul_add {{.*}} {zero.offsets = array<i64: 64>}
  %2 = zero.matmul_add %1, %w, %1 : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %2 : tensor<4x4xf32>
}

// -----

// An async collective's input dies at its wait, the last reader of its
// bytes (the wait is a view: it has no bytes of its own): the mul after it
// reuses them.
// CHECK-LABEL: module attributes
// CHECK-LABEL: func.func @gathered
func.func @gathered(%x: tensor<16xf32>) -> (tensor<32xf32>, tensor<16xf32>) {
  %c = zero.constant dense<2.0> : tensor<f32>
  // CHECK: zero.mul {{.*}} {zero.offsets = array<i64: 0>}
  %0 = zero.mul %x, %c : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  // CHECK: zero.all_gather {{.*}}zero.offsets = array<i64: 64>
  %1 = zero.all_gather %0 {async, world_size = 2 : i64} : tensor<16xf32> -> tensor<32xf32>
  %2 = zero.wait %1, %0 : tensor<32xf32>, tensor<16xf32>
  // CHECK: zero.mul {{.*}} {zero.offsets = array<i64: 0>}
  %3 = zero.mul %x, %c : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  return %2, %3 : tensor<32xf32>, tensor<16xf32>
}
