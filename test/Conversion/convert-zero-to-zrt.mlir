// RUN: zcc-opt %s -zero-plan-memory -convert-zero-to-zrt | FileCheck %s

// Every value becomes a buffer at its planned offset; compute ops become
// kernels of the program @eval, in order; views and constants are no
// instructions.
// CHECK-LABEL: module attributes
// CHECK-SAME: zrt.constant_arena_bytes = 64
// CHECK-SAME: zrt.device_arena_bytes = 192
// CHECK-SAME: zrt.input_arena_bytes = 128
// CHECK-SAME: zrt.state_arena_bytes = 128
// CHECK-DAG: zrt.buffer @w state[0] trainable {role = "param"} : tensor<4x3xf32> = dense<5.000000e-01> : tensor<4x3xf32>
// CHECK-DAG: zrt.buffer @s state[64] {role = "buffer"} : tensor<3xf32> = dense<1.000000e+00> : tensor<3xf32>
// CHECK-DAG: zrt.buffer @in.x input[0] : tensor<2x4xf32>
// CHECK-DAG: zrt.buffer @in.labels input[64] : tensor<2xi64>
// CHECK-DAG: zrt.buffer @c0 constant[0] : tensor<f32> = dense<2.000000e+00> : tensor<f32>
// CHECK-DAG: zrt.buffer @[[MM:t[0-9]+]] device[0] : tensor<2x3xf32>
// CHECK-DAG: zrt.buffer @[[VIEW:v[0-9]+]] device[64] view : tensor<6xf32>
// CHECK: zrt.program @eval inputs {labels = @in.labels, x = @in.x} outputs {flat = @[[VIEW]], logits = @[[ADD:t[0-9]+]], loss = @[[CE:t[0-9]+]]} {
// CHECK-NEXT: zrt.kernel "matmul" [@in.x, @w] -> [@[[MM]]] {ints = array<i64: 0, 0>}
// CHECK-NEXT: zrt.kernel "gelu" [@[[MM]]] -> [@[[GELU:t[0-9]+]]] {ints = array<i64: 1>}
// CHECK-NEXT: zrt.kernel "add" [@[[GELU]], @s] -> [@[[ADD]]]
// CHECK-NEXT: zrt.kernel "mul" [@[[ADD]], @c0] -> [@{{t[0-9]+}}]
// CHECK-NEXT: zrt.kernel "cross_entropy" [@[[ADD]], @in.labels] -> [@[[CE]]] {ints = array<i64: -100>}
// CHECK-NEXT: }
// CHECK-NOT: zero.
// CHECK-NOT: func.func
zero.global @w param trainable : tensor<4x3xf32> = dense<0.5> : tensor<4x3xf32>
zero.global @s buffer : tensor<3xf32> = dense<1.0> : tensor<3xf32>
func.func @forward(%x: tensor<2x4xf32> {zero.input = "x"}, %l: tensor<2xi64> {zero.input = "labels"})
    -> (tensor<f32> {zero.output = "loss"}, tensor<2x3xf32> {zero.output = "logits"}, tensor<6xf32> {zero.output = "flat"}) {
  %w = zero.load @w : tensor<4x3xf32>
  %s = zero.load @s : tensor<3xf32>
  %c = zero.constant dense<2.0> : tensor<f32>
  %0 = zero.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %1 = zero.gelu %0 tanh : tensor<2x3xf32>
  %2 = zero.add %1, %s : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %3 = zero.mul %2, %c : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %4 = zero.reshape %3 : tensor<2x3xf32> -> tensor<6xf32>
  %5 = zero.cross_entropy %2, %l {ignore_index = -100 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %5, %2, %4 : tensor<f32>, tensor<2x3xf32>, tensor<6xf32>
}
