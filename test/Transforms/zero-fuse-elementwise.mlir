// RUN: zcc-opt %s -split-input-file -zero-fuse-elementwise=codegen=false | FileCheck %s
// RUN: zcc-opt %s -split-input-file -zero-fuse-elementwise | FileCheck %s --check-prefix=PTX

// Rotary embedding: q cos + rotate(q) sin, broadcast cos/sin, in bf16: one
// zero.elementwise whose steps keep the tensors' types.
// CHECK-LABEL: func.func @rope
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xbf16>, %[[C:.*]]: tensor<1x1x8x16xbf16>, %[[R:.*]]: tensor<2x4x8x16xbf16>, %[[S:.*]]: tensor<1x1x8x16xbf16>)
// CHECK-NEXT: %[[E:.*]] = zero.elementwise %[[Q]], %[[C]], %[[R]], %[[S]] {program = array<i64: 2, 0, 1, 2, 2, 3, 0, 4, 5>, step_types = [bf16, bf16, bf16]}
// CHECK-NEXT: return %[[E]]
// PTX-LABEL: func.func @rope
// PTX: zero.elementwise {{.*}}ptx = "{{.*}}.target sm_90{{.*}}.entry zcc_elementwise(
func.func @rope(%q: tensor<2x4x8x16xbf16>, %cos: tensor<1x1x8x16xbf16>, %r: tensor<2x4x8x16xbf16>, %sin: tensor<1x1x8x16xbf16>) -> tensor<2x4x8x16xbf16> {
  %0 = zero.mul %q, %cos : (tensor<2x4x8x16xbf16>, tensor<1x1x8x16xbf16>) -> tensor<2x4x8x16xbf16>
  %1 = zero.mul %r, %sin : (tensor<2x4x8x16xbf16>, tensor<1x1x8x16xbf16>) -> tensor<2x4x8x16xbf16>
  %2 = zero.add %0, %1 : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xbf16>
  return %2 : tensor<2x4x8x16xbf16>
}

// -----

// Casts and neg join; a value read twice in the tree is one input.
// CHECK-LABEL: func.func @cast_chain
// CHECK-NEXT: zero.elementwise %{{.*}}, %{{.*}} {program = array<i64: 4, 0, -1, 1, 2, 1, 5, 3, -1>, step_types = [f32, f32, bf16]}
// CHECK-NEXT: return
func.func @cast_chain(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xbf16> {
  %0 = zero.neg %x : tensor<8xf32>
  %1 = zero.sub %0, %y : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = zero.cast %1 : tensor<8xf32> to tensor<8xbf16>
  return %2 : tensor<8xbf16>
}

// -----

// Left alone: a value with a second reader stays a separate result (the
// tree stops there), an intermediate of a broadcast shape, an inexact op
// (exp), a lone op.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: zero.elementwise
func.func @not_fused(%x: tensor<8xf32>, %y: tensor<8xf32>, %b: tensor<1xf32>, %m: tensor<4x8xf32>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>) {
  %0 = zero.add %x, %y : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = zero.mul %0, %y : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = zero.add %x, %b : (tensor<8xf32>, tensor<1xf32>) -> tensor<8xf32>
  %3 = zero.mul %2, %m : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = zero.exp %x : tensor<8xf32>
  %5 = zero.add %4, %y : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %0, %1, %3, %5 : tensor<8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>
}
