// RUN: zcc-opt %s -zero-optimizer-in-backward | FileCheck %s
// RUN: zcc-opt %s -zero-optimizer-in-backward=async=true | FileCheck %s --check-prefix=ASYNC
// Two micro-steps a step: every gradient is needed whole first; nothing moves.
// RUN: sed 's/grad_accum_steps = 1,/grad_accum_steps = 2,/' %s | zcc-opt -zero-optimizer-in-backward | FileCheck %s --check-prefix=ACCUM
// ACCUM-NOT: zero.optimizer_in_backward
// ACCUM: zero.store %{{.*}}, @b.grad
// ACCUM-LABEL: func.func @apply
// ACCUM: zero.adamw

// Two layers in one bucket: @apply's bucket-wide AdamW becomes one update per
// member inside @micro_step, each after its gradient and after the last read
// of its parameter (w2's update waits for dh = dy w2^T); @micro_step takes lr
// and returns the norm; the gradient bucket and its packing are gone.
// CHECK-NOT: @b.grad
// CHECK-DAG: zero.global @w1.adam_m adam_m {bucket = @b.adam_m, bucket_offset = 0 : i64} : tensor<4x4xf32>
// CHECK-DAG: zero.global @w2.adam_v adam_v {bucket = @b.adam_v, bucket_offset = 16 : i64} : tensor<4x4xf32>
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[LR:[a-z0-9]+]]: tensor<f32> {zero.input = "lr"}) -> (tensor<f32> {zero.loss, zero.output = "loss"}, tensor<f32> {zero.output = "grad_norm"})
// CHECK: %[[STEP0:.*]] = zero.load @optimizer.step
// CHECK: zero.store %{{.*}}, @optimizer.step
// CHECK: %[[STEP:.*]] = zero.load @optimizer.step
// CHECK: %[[DW2:.*]] = zero.matmul %{{.*}}, %{{.*}} {transpose_lhs}
// CHECK: %[[DH:.*]] = zero.matmul %{{.*}}, %{{.*}} {transpose_rhs}
// CHECK: %[[P2:.*]] = zero.load @w2 :
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}, %[[S2:[a-z_0-9]+]] = zero.adamw %[[P2]], %[[DW2]], %{{.*}}, %{{.*}}, %[[LR]], %[[STEP]]
// CHECK: zero.store %{{.*}}, @w2 :
// CHECK: %[[DW1:.*]] = zero.matmul %{{.*}}, %[[DH]] {transpose_lhs}
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}, %[[S1:[a-z_0-9]+]] = zero.adamw
// CHECK: zero.store %{{.*}}, @w1.adam_v
// CHECK: %[[R1:.*]] = zero.reshape %[[S1]] : tensor<f32> -> tensor<1xf32>
// CHECK: %[[R2:.*]] = zero.reshape %[[S2]] : tensor<f32> -> tensor<1xf32>
// CHECK: %[[ALL:.*]] = zero.concat %[[R1]], %[[R2]]
// CHECK: %[[SUM:.*]] = zero.reduce sum %[[ALL]] [0]
// CHECK: %[[NORM:.*]] = zero.sqrt %[[SUM]]
// CHECK: return %{{.*}}, %[[NORM]]
// CHECK-LABEL: func.func @apply
// CHECK-SAME: (%{{.*}}: tensor<f32> {zero.input = "lr"})
// CHECK-NEXT: return
//
// Async: each update marked, and waited for (its gradient kept alive) before
// the first later group after enough GEMM FLOPs to hide it (2 x 28 x 170 a
// parameter: 152K for w2's 16; dw1's GEMM over 8192 rows is 262K), else
// before the norm (w1's).
// ASYNC: %[[DW2:.*]] = zero.matmul %{{.*}}, %{{.*}} {transpose_lhs}
// ASYNC: %{{.*}}, %{{.*}}, %{{.*}}, %[[S2:[a-z_0-9]+]] = zero.adamw {{.*}} {async,
// ASYNC: %[[DW1:.*]] = zero.matmul
// ASYNC: zero.wait %[[S2]], %{{.*}} : tensor<f32>, tensor<4x4xf32>
// ASYNC: %{{.*}}, %{{.*}}, %{{.*}}, %[[S1:[a-z_0-9]+]] = zero.adamw {{.*}} {async,
// ASYNC: zero.wait %[[S1]], %{{.*}} : tensor<f32>, tensor<4x4xf32>
// ASYNC: zero.concat
module attributes {zero.buckets = [#zero.bucket<members = [#zero.member<name = "w1", offset = 0, type = tensor<4x4xf32>>, #zero.member<name = "w2", offset = 16, type = tensor<4x4xf32>>], param = @b, grad = @b.grad, size = 32, param_sharded = false, grad_sharded = false, backward_gather = false>], zero.partition = #zero.partition<stage = 0, world_size = 1, reduce_bucket_size = 500000000, allgather_bucket_size = 500000000, persistence_threshold = 100000, comm_type = f32, group_size = 0, state_shards = 1, hpz = false, quantized_weights = false, quantized_gradients = false, quantized_gradient_bits = 8>, zero.training = #zero.training<grad_accum_steps = 1, optimizer = "adamw", lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.01, grad_clip = 0.0>} {
  zero.global @b param : tensor<32xf32> = dense<0.000000e+00> : tensor<32xf32>
  zero.global @w1 param trainable {bucket = @b, bucket_offset = 0 : i64} : tensor<4x4xf32> = dense<1.000000e-01> : tensor<4x4xf32>
  zero.global @w2 param trainable {bucket = @b, bucket_offset = 16 : i64} : tensor<4x4xf32> = dense<2.000000e-01> : tensor<4x4xf32>
  zero.global @b.grad grad : tensor<32xf32> = dense<0.000000e+00> : tensor<32xf32>
  zero.global @b.adam_m adam_m : tensor<32xf32> = dense<0.000000e+00> : tensor<32xf32>
  zero.global @b.adam_v adam_v : tensor<32xf32> = dense<0.000000e+00> : tensor<32xf32>
  zero.global @optimizer.step step : tensor<f32> = dense<0.000000e+00> : tensor<f32>
  func.func @micro_step(%x: tensor<8192x4xf32> {zero.input = "x"}) -> (tensor<f32> {zero.loss, zero.output = "loss"}) {
    %w1 = zero.load @w1 : tensor<4x4xf32>
    %w2 = zero.load @w2 : tensor<4x4xf32>
    %h = zero.matmul %x, %w1 : (tensor<8192x4xf32>, tensor<4x4xf32>) -> tensor<8192x4xf32>
    %y = zero.matmul %h, %w2 : (tensor<8192x4xf32>, tensor<4x4xf32>) -> tensor<8192x4xf32>
    %loss = zero.reduce sum %y [0, 1] {keepdims = false} : tensor<8192x4xf32> -> tensor<f32>
    %dy = zero.constant dense<1.000000e+00> : tensor<8192x4xf32>
    %dw2 = zero.matmul %h, %dy {transpose_lhs} : (tensor<8192x4xf32>, tensor<8192x4xf32>) -> tensor<4x4xf32>
    %dh = zero.matmul %dy, %w2 {transpose_rhs} : (tensor<8192x4xf32>, tensor<4x4xf32>) -> tensor<8192x4xf32>
    %dw1 = zero.matmul %x, %dh {transpose_lhs} : (tensor<8192x4xf32>, tensor<8192x4xf32>) -> tensor<4x4xf32>
    %f1 = zero.reshape %dw1 : tensor<4x4xf32> -> tensor<16xf32>
    %f2 = zero.reshape %dw2 : tensor<4x4xf32> -> tensor<16xf32>
    %g = zero.concat %f1, %f2 {axis = 0 : i64} : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
    zero.store %g, @b.grad : tensor<32xf32>
    return %loss : tensor<f32>
  }
  func.func @apply(%lr: tensor<f32> {zero.input = "lr"}) -> (tensor<f32> {zero.output = "grad_norm"}) {
    %g = zero.load @b.grad : tensor<32xf32>
    %one = zero.constant dense<1.000000e+00> : tensor<f32>
    %s = zero.load @optimizer.step : tensor<f32>
    %s1 = zero.add %s, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
    zero.store %s1, @optimizer.step : tensor<f32>
    %p = zero.load @b : tensor<32xf32>
    %m = zero.load @b.adam_m : tensor<32xf32>
    %v = zero.load @b.adam_v : tensor<32xf32>
    %np, %nm, %nv, %sq = zero.adamw %p, %g, %m, %v, %lr, %s1 {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, epsilon = 1.000000e-08 : f64, weight_decay = 1.000000e-02 : f64} : tensor<32xf32>, tensor<32xf32>, tensor<f32>, tensor<f32> sum_squares tensor<f32>
    %n = zero.sqrt %sq : tensor<f32>
    zero.store %nm, @b.adam_m : tensor<32xf32>
    zero.store %nv, @b.adam_v : tensor<32xf32>
    zero.store %np, @b : tensor<32xf32>
    return %n : tensor<f32>
  }
}
