// RUN: zcc-opt %s | zcc-opt | FileCheck %s

// CHECK: zrt.buffer @w state[0] trainable : tensor<2x2xf32> = dense<1.000000e+00> : tensor<2x2xf32>
zrt.buffer @w state[0] trainable : tensor<2x2xf32> = dense<1.0> : tensor<2x2xf32>
// CHECK: zrt.buffer @x input[0] : tensor<2x2xf32>
zrt.buffer @x input[0] : tensor<2x2xf32>
// CHECK: zrt.buffer @y device[0] : tensor<2x2xf32>
zrt.buffer @y device[0] : tensor<2x2xf32>
// CHECK: zrt.buffer @yv device[0] view : tensor<4xf32>
zrt.buffer @yv device[0] view : tensor<4xf32>
// CHECK: zrt.program @eval inputs {x = @x} outputs {y = @yv} {
// CHECK-NEXT: zrt.kernel "matmul" [@x, @w] -> [@y] {ints = array<i64: 0, 1>}
// CHECK-NEXT: zrt.kernel "layer_norm" [@y, @w] -> [@y] {floats = array<f64: 1.000000e-05>, ints = array<i64: 1>}
zrt.program @eval inputs {x = @x} outputs {y = @yv} {
  zrt.kernel "matmul" [@x, @w] -> [@y] {ints = array<i64: 0, 1>}
  zrt.kernel "layer_norm" [@y, @w] -> [@y] {ints = array<i64: 1>, floats = array<f64: 1.0e-5>}
}
