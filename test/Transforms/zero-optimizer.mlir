// RUN: zcc-opt %s -zero-optimizer="grad-clip=1.0 weight-decay=0.1" | FileCheck %s
// RUN: zcc-opt %s -zero-optimizer | FileCheck %s --check-prefix=NOCLIP

// CHECK: zero.global @optimizer.step step : tensor<f32> = dense<0.000000e+00>
// CHECK: zero.global @w.adam_m adam_m : tensor<4xf32> = dense<0.000000e+00>
// CHECK: zero.global @w.adam_v adam_v : tensor<4xf32> = dense<0.000000e+00>
// CHECK-LABEL: func.func @apply
// CHECK-SAME: (%[[LR:.*]]: tensor<f32> {zero.input = "lr"}) -> (tensor<f32> {zero.output = "grad_norm"})
// CHECK: %[[G:.*]] = zero.load @w.grad
// The norm's squares summed in one pass, without a squared copy.
// CHECK-NOT: zero.mul
// CHECK: zero.reduce sum_squares %[[G]] [0]
// CHECK: %[[NORM:.*]] = zero.sqrt
// The step count goes up before the update: bias correction uses the new count.
// CHECK: %[[STEP:.*]] = zero.add %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: zero.store %[[STEP]], @optimizer.step
// Clipping: min(1, max_norm / (norm + 1e-6)), applied to every gradient.
// CHECK: %[[COEF:.*]] = zero.min
// CHECK: %[[CLIPPED:.*]] = zero.mul %[[G]], %[[COEF]]
// NOCLIP-NOT: zero.min
// CHECK: %[[P:.*]], %[[M:.*]], %[[V:.*]] = zero.adamw %{{.*}}, %[[CLIPPED]], %{{.*}}, %{{.*}}, %[[LR]], %[[STEP]] {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, epsilon = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64}
// CHECK: zero.store %[[M]], @w.adam_m
// CHECK: zero.store %[[V]], @w.adam_v
// CHECK: zero.store %[[P]], @w
// The accumulated gradient is reset for the next step.
// CHECK: zero.fill @w.grad, 0.000000e+00
// CHECK: return %[[NORM]]
zero.global @w param trainable : tensor<4xf32>
zero.global @w.grad grad : tensor<4xf32> = dense<0.0> : tensor<4xf32>
