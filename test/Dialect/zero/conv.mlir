// The convolution ops (ZeroConvOps.td): they parse, print and verify, and
// their verifier refuses shapes that the attributes do not tie together.
// RUN: zcc-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @conv
// CHECK: zero.conv %{{.*}}, %{{.*}} {dilations = array<i64: 1, 2>, groups = 2 : i64, pads = array<i64: 1, 2, 1, 2>, strides = array<i64: 2, 1>}
// CHECK: zero.conv_input_grad
// CHECK: zero.conv_filter_grad
func.func @conv(%x: tensor<2x4x7x8xf32>, %w: tensor<6x2x3x3xf32>, %g: tensor<2x6x4x8xf32>) -> (tensor<2x6x4x8xf32>, tensor<2x4x7x8xf32>, tensor<6x2x3x3xf32>) {
  %y = zero.conv %x, %w {strides = array<i64: 2, 1>, dilations = array<i64: 1, 2>, pads = array<i64: 1, 2, 1, 2>, groups = 2 : i64} : (tensor<2x4x7x8xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x4x8xf32>
  %dx = zero.conv_input_grad %g, %w {strides = array<i64: 2, 1>, dilations = array<i64: 1, 2>, pads = array<i64: 1, 2, 1, 2>, groups = 2 : i64} : (tensor<2x6x4x8xf32>, tensor<6x2x3x3xf32>) -> tensor<2x4x7x8xf32>
  %dw = zero.conv_filter_grad %x, %g {strides = array<i64: 2, 1>, dilations = array<i64: 1, 2>, pads = array<i64: 1, 2, 1, 2>, groups = 2 : i64} : (tensor<2x4x7x8xf32>, tensor<2x6x4x8xf32>) -> tensor<6x2x3x3xf32>
  return %y, %dx, %dw : tensor<2x6x4x8xf32>, tensor<2x4x7x8xf32>, tensor<6x2x3x3xf32>
}

// -----

func.func @output(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{output 'tensor<1x4x8x8xf32>' should be [1x4x6x6]}}
  %y = zero.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @groups(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{groups 2 do not split input channels 3 and filters 4}}
  %y = zero.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, groups = 2 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @attributes(%x: tensor<1x3x8xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+1 {{needs 1 strides and dilations and 2 pads}}
  %y = zero.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1>, pads = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8xf32>, tensor<4x3x3xf32>) -> tensor<1x4x8xf32>
  return
}
