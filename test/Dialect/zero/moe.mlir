// The dropless mixture-of-experts ops (ZeroMoeOps.td): they parse, print and
// verify, and their verifiers refuse shapes that do not tie rows, experts and
// offsets together.
// RUN: zcc-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @routed
// CHECK: zero.moe_route %{{.*}} {num_experts = 4 : i64} : tensor<8x2xi64> -> tensor<16xi64>, tensor<8x2xi64>, tensor<5xi64>
// CHECK: zero.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} {transpose_rhs}
// CHECK: zero.grouped_matmul_rhs_grad %{{.*}}, %{{.*}}, %{{.*}} {transpose_rhs}
func.func @routed(%e: tensor<8x2xi64>, %x: tensor<16x6xf32>, %w: tensor<4x3x6xf32>, %g: tensor<16x3xf32>) -> (tensor<16x3xf32>, tensor<4x3x6xf32>) {
  %t, %p, %o = zero.moe_route %e {num_experts = 4 : i64} : tensor<8x2xi64> -> tensor<16xi64>, tensor<8x2xi64>, tensor<5xi64>
  %y = zero.grouped_matmul %x, %w, %o {transpose_rhs} : (tensor<16x6xf32>, tensor<4x3x6xf32>, tensor<5xi64>) -> tensor<16x3xf32>
  %dw = zero.grouped_matmul_rhs_grad %x, %g, %o {transpose_rhs} : (tensor<16x6xf32>, tensor<16x3xf32>, tensor<5xi64>) -> tensor<4x3x6xf32>
  return %y, %dw : tensor<16x3xf32>, tensor<4x3x6xf32>
}

// -----

func.func @route_offsets(%e: tensor<8x2xi64>) {
  // expected-error @+1 {{offsets 'tensor<4xi64>' should be [5]}}
  %t, %p, %o = zero.moe_route %e {num_experts = 4 : i64} : tensor<8x2xi64> -> tensor<16xi64>, tensor<8x2xi64>, tensor<4xi64>
  return
}

// -----

func.func @route_tokens(%e: tensor<8x2xi64>) {
  // expected-error @+1 {{tokens 'tensor<8xi64>' should be [16]}}
  %t, %p, %o = zero.moe_route %e {num_experts = 4 : i64} : tensor<8x2xi64> -> tensor<8xi64>, tensor<8x2xi64>, tensor<5xi64>
  return
}

// -----

func.func @grouped_offsets(%x: tensor<16x6xf32>, %w: tensor<4x3x6xf32>, %o: tensor<4xi64>) {
  // expected-error @+1 {{offsets 'tensor<4xi64>' should hold 5 values (experts + 1)}}
  %y = zero.grouped_matmul %x, %w, %o {transpose_rhs} : (tensor<16x6xf32>, tensor<4x3x6xf32>, tensor<4xi64>) -> tensor<16x3xf32>
  return
}

// -----

func.func @grouped_contraction(%x: tensor<16x6xf32>, %w: tensor<4x3x6xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{rows 'tensor<16x6xf32>' do not multiply expert matrices 'tensor<4x3x6xf32>'}}
  %y = zero.grouped_matmul %x, %w, %o : (tensor<16x6xf32>, tensor<4x3x6xf32>, tensor<5xi64>) -> tensor<16x3xf32>
  return
}

// -----

func.func @grouped_result(%x: tensor<16x6xf32>, %w: tensor<4x3x6xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{result 'tensor<16x6xf32>' should be [16x3]}}
  %y = zero.grouped_matmul %x, %w, %o {transpose_rhs} : (tensor<16x6xf32>, tensor<4x3x6xf32>, tensor<5xi64>) -> tensor<16x6xf32>
  return
}

// -----

func.func @rhs_grad(%x: tensor<16x6xf32>, %g: tensor<16x4xf32>, %o: tensor<5xi64>) {
  // expected-error @+1 {{grad 'tensor<16x4xf32>' should be [16x3]}}
  %dw = zero.grouped_matmul_rhs_grad %x, %g, %o {transpose_rhs} : (tensor<16x6xf32>, tensor<16x4xf32>, tensor<5xi64>) -> tensor<4x3x6xf32>
  return
}

// -----

// Expert parallelism: a rank's 2 of 4 experts over 8 tokens, top-2: 8 x 2 rows.
// CHECK-LABEL: func.func @route_rank
// CHECK: zero.moe_route %{{.*}} first %{{.*}} : tensor<1xi64> {all_experts = 4 : i64, num_experts = 2 : i64} : tensor<8x2xi64> -> tensor<16xi64>, tensor<8x2xi64>, tensor<3xi64>
func.func @route_rank(%e: tensor<8x2xi64>, %f: tensor<1xi64>) {
  %t, %p, %o = zero.moe_route %e first %f : tensor<1xi64> {all_experts = 4 : i64, num_experts = 2 : i64} : tensor<8x2xi64> -> tensor<16xi64>, tensor<8x2xi64>, tensor<3xi64>
  return
}

// -----

func.func @route_rank_slices(%e: tensor<8x2xi64>, %f: tensor<1xi64>) {
  // expected-error @+1 {{all_experts 5 must be a multiple of the rank's num_experts 2}}
  %t, %p, %o = zero.moe_route %e first %f : tensor<1xi64> {all_experts = 5 : i64, num_experts = 2 : i64} : tensor<8x2xi64> -> tensor<16xi64>, tensor<8x2xi64>, tensor<3xi64>
  return
}

// -----

func.func @route_rank_capacity(%e: tensor<8x2xi64>, %f: tensor<1xi64>) {
  // expected-error @+1 {{routes a rank's experts (first_expert) without a capacity}}
  %t, %p, %o = zero.moe_route %e first %f : tensor<1xi64> {all_experts = 4 : i64, capacity = 4 : i64, num_experts = 2 : i64} : tensor<8x2xi64> -> tensor<16xi64>, tensor<8x2xi64>, tensor<3xi64>
  return
}

// -----

func.func @route_all_without_first(%e: tensor<8x2xi64>) {
  // expected-error @+1 {{all_experts 8 needs first_expert}}
  %t, %p, %o = zero.moe_route %e {all_experts = 8 : i64, num_experts = 4 : i64} : tensor<8x2xi64> -> tensor<16xi64>, tensor<8x2xi64>, tensor<5xi64>
  return
}
