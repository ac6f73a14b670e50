// RUN: zcc-opt %s -split-input-file -zero-fuse-elementwise=codegen=false | FileCheck %s
// RUN: zcc-opt %s -split-input-file -zero-fuse-elementwise | FileCheck %s --check-prefix=PTX

// Rotary embedding: q cos + rotate(q) sin, broadcast cos/sin, in bf16: one
// zero.elementwise whose steps keep the tensors' types; each input a load
// (opcode 6) at the result's coordinates.
// CHECK-LABEL: func.func @rope
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xbf16>, %[[C:.*]]: tensor<1x1x8x16xbf16>, %[[R:.*]]: tensor<2x4x8x16xbf16>, %[[S:.*]]: tensor<1x1x8x16xbf16>)
// CHECK-NEXT: %[[E:.*]] = zero.elementwise %[[Q]], %[[C]], %[[R]], %[[S]] {program = array<i64: 6, 0, -1, -1, 6, 1, -1, -1, 2, 0, 1, -1, 6, 2, -1, -1, 6, 3, -1, -1, 2, 3, 4, -1, 0, 2, 5, -1>, step_types = [bf16, bf16, bf16, bf16, bf16, bf16, bf16]}
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
// CHECK-NEXT: zero.elementwise %{{.*}}, %{{.*}} {program = array<i64: 6, 0, -1, -1, 4, 0, -1, -1, 6, 1, -1, -1, 1, 1, 2, -1, 5, 3, -1, -1>, step_types = [f32, f32, f32, f32, bf16]}
// CHECK-NEXT: return
func.func @cast_chain(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xbf16> {
  %0 = zero.neg %x : tensor<8xf32>
  %1 = zero.sub %0, %y : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = zero.cast %1 : tensor<8xf32> to tensor<8xbf16>
  return %2 : tensor<8xbf16>
}

// -----

// Left alone: a value with a second reader outside the tree stays a separate
// result (the tree stops there), an intermediate of a broadcast shape, a
// strided slice, a lone op.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: zero.elementwise
func.func @not_fused(%x: tensor<8xf32>, %y: tensor<8xf32>, %b: tensor<1xf32>, %m: tensor<4x8xf32>, %w: tensor<16xf32>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %0 = zero.add %x, %y : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = zero.mul %0, %y : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = zero.add %x, %b : (tensor<8xf32>, tensor<1xf32>) -> tensor<8xf32>
  %3 = zero.mul %2, %m : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = zero.slice %w[[0] : [16] : [2]] : tensor<16xf32> -> tensor<8xf32>
  %5 = zero.add %4, %y : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %6 = zero.exp %x : tensor<8xf32>
  return %0, %1, %3, %5, %6 : tensor<8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// RoPE's rotate-half as transformers writes it, concat(-q[.., 8:], q[.., :8]):
// no slice, negation or concatenation is left; q is read at its coordinates
// and shifted by +8 (offsets 0-3) and -8 (offsets 4-7), clamped, and a pick
// (opcode 7) on axis 3 at 8 (offsets 8-9) chooses between the halves.
// CHECK-LABEL: func.func @rotate_half
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x4x16xbf16>, %[[C:.*]]: tensor<1x8x1x16xbf16>, %[[S:.*]]: tensor<1x8x1x16xbf16>)
// CHECK-NEXT: %[[E:.*]] = zero.elementwise %[[Q]], %[[C]], %[[S]] {offsets = array<i64: 0, 0, 0, 8, 0, 0, 0, -8, 3, 8>,
// CHECK-SAME: program = array<i64: 6, 0, -1, -1, 6, 1, -1, -1, 2, 0, 1, -1, 6, 0, -1, 0, 4, 3, -1, -1, 6, 0, -1, 4, 7, 4, 5, 8, 6, 2, -1, -1, 2, 6, 7, -1, 0, 2, 8, -1>
// CHECK-NEXT: return %[[E]]
// PTX-LABEL: func.func @rotate_half
// PTX: zero.elementwise {{.*}}ptx = "{{.*}}.entry zcc_elementwise(
func.func @rotate_half(%q: tensor<2x8x4x16xbf16>, %cos: tensor<1x8x1x16xbf16>, %sin: tensor<1x8x1x16xbf16>) -> tensor<2x8x4x16xbf16> {
  %lo = zero.slice %q[[0, 0, 0, 0] : [2, 8, 4, 8] : [1, 1, 1, 1]] : tensor<2x8x4x16xbf16> -> tensor<2x8x4x8xbf16>
  %hi = zero.slice %q[[0, 0, 0, 8] : [2, 8, 4, 16] : [1, 1, 1, 1]] : tensor<2x8x4x16xbf16> -> tensor<2x8x4x8xbf16>
  %n = zero.neg %hi : tensor<2x8x4x8xbf16>
  %r = zero.concat %n, %lo {axis = 3 : i64} : (tensor<2x8x4x8xbf16>, tensor<2x8x4x8xbf16>) -> tensor<2x8x4x16xbf16>
  %0 = zero.mul %q, %cos : (tensor<2x8x4x16xbf16>, tensor<1x8x1x16xbf16>) -> tensor<2x8x4x16xbf16>
  %1 = zero.mul %r, %sin : (tensor<2x8x4x16xbf16>, tensor<1x8x1x16xbf16>) -> tensor<2x8x4x16xbf16>
  %2 = zero.add %0, %1 : (tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>) -> tensor<2x8x4x16xbf16>
  return %2 : tensor<2x8x4x16xbf16>
}

// -----

// Its backward: g sin has two readers, both in the tree (the two slices), so
// it joins and is computed at each shift it is read at (steps 3-5 at +8,
// 6-8 at -8) instead of being stored.
// CHECK-LABEL: func.func @rotate_half_grad
// CHECK-NEXT: zero.elementwise %{{.*}}, %{{.*}}, %{{.*}} {offsets = array<i64: 0, 0, 0, 8, 0, 0, 0, -8, 3, 8>,
// CHECK-SAME: program = array<i64: 6, 0, -1, -1, 6, 1, -1, -1, 2, 0, 1, -1, 6, 0, -1, 0, 6, 2, -1, 0, 2, 3, 4, -1, 6, 0, -1, 4, 6, 2, -1, 4, 2, 6, 7, -1, 4, 8, -1, -1, 7, 5, 9, 8, 0, 2, 10, -1>
// CHECK-NEXT: return
func.func @rotate_half_grad(%g: tensor<2x8x4x16xbf16>, %cos: tensor<1x8x1x16xbf16>, %sin: tensor<1x8x1x16xbf16>) -> tensor<2x8x4x16xbf16> {
  %m = zero.mul %g, %sin : (tensor<2x8x4x16xbf16>, tensor<1x8x1x16xbf16>) -> tensor<2x8x4x16xbf16>
  %lo = zero.slice %m[[0, 0, 0, 0] : [2, 8, 4, 8] : [1, 1, 1, 1]] : tensor<2x8x4x16xbf16> -> tensor<2x8x4x8xbf16>
  %hi = zero.slice %m[[0, 0, 0, 8] : [2, 8, 4, 16] : [1, 1, 1, 1]] : tensor<2x8x4x16xbf16> -> tensor<2x8x4x8xbf16>
  %n = zero.neg %lo : tensor<2x8x4x8xbf16>
  %r = zero.concat %hi, %n {axis = 3 : i64} : (tensor<2x8x4x8xbf16>, tensor<2x8x4x8xbf16>) -> tensor<2x8x4x16xbf16>
  %0 = zero.mul %g, %cos : (tensor<2x8x4x16xbf16>, tensor<1x8x1x16xbf16>) -> tensor<2x8x4x16xbf16>
  %1 = zero.add %0, %r : (tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>) -> tensor<2x8x4x16xbf16>
  return %1 : tensor<2x8x4x16xbf16>
}

// -----

// SwiGLU's silu(g) u: the unary function (opcode 18) joins; its kernel calls
// libdevice's exp, linked into the PTX (no external function is left).
// CHECK-LABEL: func.func @swiglu
// CHECK-NEXT: zero.elementwise %{{.*}}, %{{.*}} {program = array<i64: 6, 0, -1, -1, 18, 0, -1, -1, 6, 1, -1, -1, 2, 1, 2, -1>, step_types = [bf16, bf16, bf16, bf16]}
// CHECK-NEXT: return
// PTX-LABEL: func.func @swiglu
// PTX-NOT: extern
// PTX: ex2.approx
// PTX-NOT: extern
// PTX: return
func.func @swiglu(%g: tensor<8x16xbf16>, %u: tensor<8x16xbf16>) -> tensor<8x16xbf16> {
  %0 = zero.silu %g : tensor<8x16xbf16>
  %1 = zero.mul %0, %u : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  return %1 : tensor<8x16xbf16>
}

// -----

// The backward's residual-stream add: dx of a norm gradient that nothing
// else reads, plus a gradient computed before it, becomes the norm
// gradient's residual; an add whose other operand comes later, or whose dx
// has a second reader, stays.
// CHECK-LABEL: func.func @residual
// CHECK: %[[DX:.*]], %{{.*}} = zero.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} residual %[[R:.*]] {axis = 1 : i64
// CHECK-NOT: zero.add %[[DX]]
// CHECK: %[[DX2:.*]], %{{.*}} = zero.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64
// CHECK: zero.add %[[DX2]]
func.func @residual(%x: tensor<4x8xbf16>, %w: tensor<8xbf16>, %dy: tensor<4x8xbf16>, %r: tensor<4x8xbf16>)
    -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xbf16>) {
  %dx, %dw = zero.rms_norm_grad %x, %w, %dy {axis = 1 : i64, epsilon = 1.0e-06 : f64} : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>)
  %0 = zero.add %r, %dx : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %dx2, %dw2 = zero.rms_norm_grad %x, %w, %0 {axis = 1 : i64, epsilon = 1.0e-06 : f64} : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>)
  %1 = zero.add %dx2, %dx2 : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  return %0, %dw, %1, %dx2, %dw2 : tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xbf16>
}

// -----

// Sibling trees over shared inputs (SwiGLU's backward: du = dy silu(g),
// dg = dy u sigmoid(g)) a few ops apart: one op with two results at the
// first, its steps the first tree's then the second's, the shared loads and
// silu(g)'s load of g computed once; the GEMM between them reads the first
// result. Both results come back through the PTX entry's two pointers.
// CHECK-LABEL: func.func @siblings
// CHECK-SAME: (%[[DY:.*]]: tensor<8x16xbf16>, %[[G:.*]]: tensor<8x16xbf16>, %[[U:.*]]: tensor<8x16xbf16>, %[[W:.*]]: tensor<16x4xbf16>)
// CHECK-NEXT: %[[E:.*]]:2 = zero.elementwise %[[DY]], %[[G]], %[[U]] {outputs = array<i64: 3, 6>, program = array<i64: 6, 0, -1, -1, 6, 1, -1, -1, 18, 1, -1, -1, 2, 0, 2, -1, 6, 2, -1, -1, 2, 0, 4, -1, 2, 5, 2, -1>, step_types = [bf16, bf16, bf16, bf16, bf16, bf16, bf16]}
// CHECK-NEXT: %[[M:.*]] = zero.matmul %[[E]]#0, %[[W]]
// CHECK-NEXT: return %[[M]], %[[E]]#1
// PTX-LABEL: func.func @siblings
// PTX: zero.elementwise {{.*}}ptx = "{{.*}}.entry zcc_elementwise({{.*}}_param_3,{{.*}}_param_4,{{.*}}_param_5
func.func @siblings(%dy: tensor<8x16xbf16>, %g: tensor<8x16xbf16>, %u: tensor<8x16xbf16>, %w: tensor<16x4xbf16>) -> (tensor<8x4xbf16>, tensor<8x16xbf16>) {
  %0 = zero.silu %g : tensor<8x16xbf16>
  %1 = zero.mul %dy, %0 : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %2 = zero.matmul %1, %w : (tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xbf16>
  %3 = zero.mul %dy, %u : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %4 = zero.silu %g : tensor<8x16xbf16>
  %5 = zero.mul %3, %4 : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  return %2, %5 : tensor<8x4xbf16>, tensor<8x16xbf16>
}

// -----

// Not merged: the second tree reads a value formed after the first (the
// GEMM's result), or shares no input with it.
// CHECK-LABEL: func.func @not_siblings
// CHECK-NOT: outputs =
// CHECK: return
func.func @not_siblings(%dy: tensor<8x16xbf16>, %g: tensor<8x16xbf16>, %w: tensor<16x16xbf16>, %v: tensor<8x16xbf16>) -> (tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>) {
  %0 = zero.silu %g : tensor<8x16xbf16>
  %1 = zero.mul %dy, %0 : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %2 = zero.matmul %1, %w : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
  %3 = zero.mul %2, %g : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %4 = zero.neg %3 : tensor<8x16xbf16>
  %5 = zero.exp %v : tensor<8x16xbf16>
  %6 = zero.neg %5 : tensor<8x16xbf16>
  return %1, %4, %6 : tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>
}
