// RUN: zcc-opt %s | FileCheck %s
// Round trip: the printed form parses back to the same module.
// RUN: zcc-opt %s | zcc-opt | FileCheck %s
// RUN: zcc-opt %s --mlir-print-op-generic | zcc-opt | FileCheck %s

// CHECK: zero.global @w param trainable : tensor<4x8xf32>
zero.global @w param trainable : tensor<4x8xf32>
// CHECK: zero.global @b buffer : tensor<8xf32> = dense<1.000000e+00> : tensor<8xf32>
zero.global @b buffer : tensor<8xf32> = dense<1.0> : tensor<8xf32>
// CHECK: zero.global @s step : tensor<i64>
zero.global @s step : tensor<i64>

// CHECK-LABEL: func.func @state
func.func @state(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: [[W:%.*]] = zero.load @w : tensor<4x8xf32>
  %w = zero.load @w : tensor<4x8xf32>
  // CHECK: zero.store [[W]], @w : tensor<4x8xf32>
  zero.store %w, @w : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<2x1xf32>, %m: tensor<2x3xi1>) {
  // CHECK: zero.add %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = zero.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: zero.sub {{.*}} -> tensor<2x3xf32>
  %1 = zero.sub %c, %b : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: zero.mul
  %2 = zero.mul %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: zero.div
  %3 = zero.div %a, %c : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  // CHECK: zero.pow
  %4 = zero.pow %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: zero.max
  %5 = zero.max %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: zero.min
  %6 = zero.min %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: zero.and
  %7 = zero.and %m, %m : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: zero.or
  %8 = zero.or %m, %m : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: zero.cmp lt %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %9 = zero.cmp lt %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: zero.where {{.*}} : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  %10 = zero.where %m, %a, %c : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  // CHECK: zero.neg
  %11 = zero.neg %a : tensor<2x3xf32>
  // CHECK: zero.abs
  %12 = zero.abs %a : tensor<2x3xf32>
  // CHECK: zero.exp
  %13 = zero.exp %a : tensor<2x3xf32>
  // CHECK: zero.log
  %14 = zero.log %a : tensor<2x3xf32>
  // CHECK: zero.sqrt
  %15 = zero.sqrt %a : tensor<2x3xf32>
  // CHECK: zero.rsqrt
  %16 = zero.rsqrt %a : tensor<2x3xf32>
  // CHECK: zero.reciprocal
  %17 = zero.reciprocal %a : tensor<2x3xf32>
  // CHECK: zero.tanh
  %18 = zero.tanh %a : tensor<2x3xf32>
  // CHECK: zero.erf
  %19 = zero.erf %a : tensor<2x3xf32>
  // CHECK: zero.sigmoid
  %20 = zero.sigmoid %a : tensor<2x3xf32>
  // CHECK: zero.relu
  %21 = zero.relu %a : tensor<2x3xf32>
  // CHECK: zero.silu
  %22 = zero.silu %a : tensor<2x3xf32>
  // CHECK: zero.cos
  %23 = zero.cos %a : tensor<2x3xf32>
  // CHECK: zero.sin
  %24 = zero.sin %a : tensor<2x3xf32>
  // CHECK: zero.not
  %25 = zero.not %m : tensor<2x3xi1>
  // CHECK: zero.gelu %{{.*}} tanh : tensor<2x3xf32>
  %26 = zero.gelu %a tanh : tensor<2x3xf32>
  // CHECK: zero.cast %{{.*}} : tensor<2x3xf32> to tensor<2x3xbf16>
  %27 = zero.cast %a : tensor<2x3xf32> to tensor<2x3xbf16>
  return
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%a: tensor<2x3x4xf32>, %i: tensor<5xi64>) {
  // CHECK: zero.constant dense<[1, 2]> : tensor<2xi64>
  %c = zero.constant dense<[1, 2]> : tensor<2xi64>
  // CHECK: zero.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %0 = zero.reshape %a : tensor<2x3x4xf32> -> tensor<6x4xf32>
  // CHECK: zero.transpose %{{.*}} [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = zero.transpose %a [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  // CHECK: zero.expand %{{.*}} : tensor<2x3x4xf32> -> tensor<5x2x3x4xf32>
  %2 = zero.expand %a : tensor<2x3x4xf32> -> tensor<5x2x3x4xf32>
  // CHECK: zero.slice %{{.*}}{{\[\[}}0, 1, 0] : [2, 3, 4] : [1, 1, 2]] : tensor<2x3x4xf32> -> tensor<2x2x2xf32>
  %3 = zero.slice %a[[0, 1, 0] : [2, 3, 4] : [1, 1, 2]] : tensor<2x3x4xf32> -> tensor<2x2x2xf32>
  // CHECK: zero.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x6x4xf32>
  %4 = zero.concat %a, %a {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x6x4xf32>
  // CHECK: zero.split %{{.*}} {axis = 2 : i64, sizes = array<i64: 1, 3>} : tensor<2x3x4xf32> -> tensor<2x3x1xf32>, tensor<2x3x3xf32>
  %5:2 = zero.split %a {axis = 2 : i64, sizes = array<i64: 1, 3>} : tensor<2x3x4xf32> -> tensor<2x3x1xf32>, tensor<2x3x3xf32>
  // CHECK: zero.gather %{{.*}}[%{{.*}}] {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<2x5x4xf32>
  %6 = zero.gather %a[%i] {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<2x5x4xf32>
  return
}

// CHECK-LABEL: func.func @compute
func.func @compute(%a: tensor<8x2x3xf32>, %b: tensor<3x5xf32>, %w: tensor<3xf32>, %l: tensor<8x2xi64>) {
  // CHECK: zero.matmul %{{.*}}, %{{.*}} : (tensor<8x2x3xf32>, tensor<3x5xf32>) -> tensor<8x2x5xf32>
  %0 = zero.matmul %a, %b : (tensor<8x2x3xf32>, tensor<3x5xf32>) -> tensor<8x2x5xf32>
  // CHECK: zero.matmul %{{.*}}, %{{.*}} {transpose_lhs, transpose_rhs} : (tensor<3x5xf32>, tensor<2x3xf32>) -> tensor<5x2xf32>
  %t = zero.constant dense<0.0> : tensor<2x3xf32>
  %1 = zero.matmul %b, %t {transpose_lhs, transpose_rhs} : (tensor<3x5xf32>, tensor<2x3xf32>) -> tensor<5x2xf32>
  // CHECK: zero.reduce sum %{{.*}} [1, 2] {keepdims = false} : tensor<8x2x3xf32> -> tensor<8xf32>
  %2 = zero.reduce sum %a [1, 2] {keepdims = false} : tensor<8x2x3xf32> -> tensor<8xf32>
  // CHECK: zero.reduce mean %{{.*}} [2] {keepdims = true} : tensor<8x2x3xf32> -> tensor<8x2x1xf32>
  %3 = zero.reduce mean %a [2] {keepdims = true} : tensor<8x2x3xf32> -> tensor<8x2x1xf32>
  // CHECK: zero.softmax %{{.*}} {axis = 2 : i64} : tensor<8x2x3xf32>
  %4 = zero.softmax %a {axis = 2 : i64} : tensor<8x2x3xf32>
  // CHECK: zero.log_softmax
  %5 = zero.log_softmax %a {axis = 2 : i64} : tensor<8x2x3xf32>
  // CHECK: zero.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
  %6 = zero.layer_norm %a, %w, %w {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<8x2x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<8x2x3xf32>
  // CHECK: zero.layer_norm %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 1.000000e-05 : f64} : (tensor<8x2x3xf32>, tensor<3xf32>) -> tensor<8x2x3xf32>
  %7 = zero.layer_norm %a, %w {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<8x2x3xf32>, tensor<3xf32>) -> tensor<8x2x3xf32>
  // CHECK: zero.rms_norm %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 9.9999999999999995E-7 : f64}
  %8 = zero.rms_norm %a, %w {axis = 2 : i64, epsilon = 1.0e-6 : f64} : (tensor<8x2x3xf32>, tensor<3xf32>) -> tensor<8x2x3xf32>
  // CHECK: zero.cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : (tensor<8x2x3xf32>, tensor<8x2xi64>) -> tensor<f32>
  %9 = zero.cross_entropy %a, %l {ignore_index = -100 : i64} : (tensor<8x2x3xf32>, tensor<8x2xi64>) -> tensor<f32>
  return
}

// Optimizer ops with the optional skip flag (fp16 overflow).
// CHECK-LABEL: func.func @optimizer_skip
// CHECK: zero.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} skip %{{.*}} : tensor<i1> {beta1
// CHECK: zero.sgd %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} skip %{{.*}} : tensor<i1> {momentum
func.func @optimizer_skip(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i1>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a:3 = zero.adamw %p, %g, %p, %p, %lr, %lr skip %s : tensor<i1> {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.01 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>
  %b:2 = zero.sgd %p, %g, %p, %lr skip %s : tensor<i1> {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<f32>
  return %a#0, %b#0 : tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @attention
// CHECK: zero.attention %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} {nan_to_zero, scale = 2.500000e-01 : f64}
// CHECK: zero.attention_grad
// CHECK: zero.attention_packed %{{.*}} bias %{{.*}} {scale = 2.500000e-01 : f64}
// CHECK: zero.attention_packed_grad
func.func @attention(%q: tensor<2x8x4x16xbf16>, %m: tensor<1x1x8x8xbf16>, %qkv: tensor<2x8x3x4x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x8x3x4x16xbf16>) {
  %o, %l = zero.attention %q, %q, %q bias %m {nan_to_zero, scale = 0.25 : f64} : (tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<1x1x8x8xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>)
  %dq, %dk, %dv = zero.attention_grad %q, %q, %q bias %m, %o, %l, %o {scale = 0.25 : f64} : (tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<1x1x8x8xbf16>, tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>, tensor<2x8x4x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>)
  %po, %pl = zero.attention_packed %qkv bias %m {scale = 0.25 : f64} : (tensor<2x8x3x4x16xbf16>, tensor<1x1x8x8xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>)
  %dqkv = zero.attention_packed_grad %qkv bias %m, %po, %pl, %po {scale = 0.25 : f64} : (tensor<2x8x3x4x16xbf16>, tensor<1x1x8x8xbf16>, tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>, tensor<2x8x4x16xbf16>) -> tensor<2x8x3x4x16xbf16>
  return %dq, %dqkv : tensor<2x8x4x16xbf16>, tensor<2x8x3x4x16xbf16>
}

// A structural mask: no bias operand.
// CHECK-LABEL: func.func @attention_causal
// CHECK: zero.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64, window = 3 : i64}
// CHECK: zero.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64, window = 3 : i64}
// CHECK: zero.attention_packed %{{.*}} {scale = 2.500000e-01 : f64}
// CHECK: zero.attention_packed_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal, scale
func.func @attention_causal(%q: tensor<2x8x4x16xbf16>, %qkv: tensor<2x8x3x4x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x8x3x4x16xbf16>) {
  %o, %l = zero.attention %q, %q, %q {causal, scale = 0.25 : f64, window = 3 : i64} : (tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>)
  %dq, %dk, %dv = zero.attention_grad %q, %q, %q, %o, %l, %o {causal, scale = 0.25 : f64, window = 3 : i64} : (tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>, tensor<2x8x4x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>)
  %po, %pl = zero.attention_packed %qkv {scale = 0.25 : f64} : (tensor<2x8x3x4x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>)
  %dqkv = zero.attention_packed_grad %qkv, %po, %pl, %po {causal, scale = 0.25 : f64} : (tensor<2x8x3x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>, tensor<2x8x4x16xbf16>) -> tensor<2x8x3x4x16xbf16>
  return %dq, %dqkv : tensor<2x8x4x16xbf16>, tensor<2x8x3x4x16xbf16>
}

// Packed documents: the positions operand, last of the gradients'.
// CHECK-LABEL: func.func @attention_documents
// CHECK: zero.attention %{{.*}}, %{{.*}}, %{{.*}} positions %{{.*}} {causal, scale = 2.500000e-01 : f64}
// CHECK: zero.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} positions %{{.*}} {causal,
// CHECK: zero.attention_packed %{{.*}} positions %{{.*}} {causal,
// CHECK: zero.attention_packed_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} positions %{{.*}} {causal,
func.func @attention_documents(%q: tensor<2x8x4x16xbf16>, %qkv: tensor<2x8x3x4x16xbf16>, %p: tensor<2x8xi64>) -> (tensor<2x8x4x16xbf16>, tensor<2x8x3x4x16xbf16>) {
  %o, %l = zero.attention %q, %q, %q positions %p {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8xi64>) -> (tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>)
  %dq, %dk, %dv = zero.attention_grad %q, %q, %q, %o, %l, %o positions %p {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>, tensor<2x8x4x16xbf16>, tensor<2x8xi64>) -> (tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>)
  %po, %pl = zero.attention_packed %qkv positions %p {causal, scale = 0.25 : f64} : (tensor<2x8x3x4x16xbf16>, tensor<2x8xi64>) -> (tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>)
  %dqkv = zero.attention_packed_grad %qkv, %po, %pl, %po positions %p {causal, scale = 0.25 : f64} : (tensor<2x8x3x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>, tensor<2x8x4x16xbf16>, tensor<2x8xi64>) -> tensor<2x8x3x4x16xbf16>
  return %dq, %dqkv : tensor<2x8x4x16xbf16>, tensor<2x8x3x4x16xbf16>
}

// CHECK-LABEL: func.func @matmul_bgrad
// CHECK: zero.matmul_bgrad %{{.*}}, %{{.*}} : (tensor<8x4xbf16>, tensor<8x3xbf16>) -> (tensor<4x3xbf16>, tensor<1x3xbf16>)
func.func @matmul_bgrad(%x: tensor<8x4xbf16>, %dy: tensor<8x3xbf16>) -> (tensor<4x3xbf16>, tensor<1x3xbf16>) {
  %w, %b = zero.matmul_bgrad %x, %dy : (tensor<8x4xbf16>, tensor<8x3xbf16>) -> (tensor<4x3xbf16>, tensor<1x3xbf16>)
  return %w, %b : tensor<4x3xbf16>, tensor<1x3xbf16>
}

// qgZ: 4-bit values (two a byte) exchanged by an all-to-all in a mesh group,
// then summed over the parts that arrived.
// CHECK-LABEL: func.func @quantized_all_to_all
// CHECK: zero.quantize %{{.*}} {bits = 4 : i64, block_size = 256 : i64} : tensor<1024xf32> -> tensor<512xi8>, tensor<4xf32>
// CHECK: zero.all_to_all %{{.*}} in group {world_size = 2 : i64} : tensor<512xi8>
// CHECK: zero.dequantize %{{.*}}, %{{.*}} {average, bits = 4 : i64, block_size = 256 : i64, parts = 2 : i64} : tensor<512xi8>, tensor<4xf32> -> tensor<512xf32>
func.func @quantized_all_to_all(%g: tensor<1024xf32>) -> tensor<512xf32> {
  %v, %s = zero.quantize %g {bits = 4 : i64, block_size = 256 : i64} : tensor<1024xf32> -> tensor<512xi8>, tensor<4xf32>
  %av = zero.all_to_all %v in group {world_size = 2 : i64} : tensor<512xi8>
  %as = zero.all_to_all %s in group {world_size = 2 : i64} : tensor<4xf32>
  %r = zero.dequantize %av, %as {average, bits = 4 : i64, block_size = 256 : i64, parts = 2 : i64} : tensor<512xi8>, tensor<4xf32> -> tensor<512xf32>
  return %r : tensor<512xf32>
}
