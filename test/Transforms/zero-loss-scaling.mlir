// RUN: zcc-opt %s -zero-mixed-precision="precision=fp16 initial-scale-power=12 hysteresis=3" -zero-autodiff=grad-accum=2 -zero-optimizer="grad-clip=1.0" | FileCheck %s

// fp16: DeepSpeed's settings land on the module for the trainer.
// CHECK: module attributes {zero.loss_scaling = #zero.loss_scaling<loss_scale = 0.000000e+00, initial_scale_power = 12, loss_scale_window = 1000, hysteresis = 3, consecutive_hysteresis = false, min_loss_scale = 1.000000e+00>}

// float32's lowest (a mask value) saturates to float16's -65504 instead of
// rounding to -inf, where 0 * mask would be NaN.
// CHECK-LABEL: func.func @forward
// CHECK: zero.constant dense<-6.550400e+04> : tensor<f32>
// CHECK: zero.matmul {{.*}} -> tensor<2x3xf16>

// @micro_step takes the loss scale; the backward starts from scale/grad-accum.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[SCALE:[^:]*]]: tensor<f32> {zero.input = "loss_scale"}
// CHECK: %[[HALF:.*]] = zero.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[SEED:.*]] = zero.mul %[[SCALE]], %[[HALF]]
// CHECK: zero.cross_entropy_grad %{{.*}}, %{{.*}}, %[[SEED]]

// @apply unscales the norm, turns a non-finite norm into overflow, counts
// the step only when applied, folds 1/scale into the clipping coefficient and
// skips the update in place.
// CHECK-LABEL: func.func @apply
// CHECK-SAME: (%[[LR:[^:]*]]: tensor<f32> {zero.input = "lr"}, %[[S:[^:]*]]: tensor<f32> {zero.input = "loss_scale"})
// CHECK-SAME: -> (tensor<f32> {zero.output = "grad_norm"}, tensor<f32> {zero.output = "overflow"})
// CHECK: %[[RAW:.*]] = zero.sqrt
// CHECK: %[[INV:.*]] = zero.div %{{.*}}, %[[S]]
// CHECK: %[[NORM:.*]] = zero.mul %[[RAW]], %[[INV]]
// CHECK: %[[FINITE:.*]] = zero.cmp lt %[[NORM]], %{{.*}}
// CHECK: %[[SKIP:.*]] = zero.not %[[FINITE]]
// CHECK: %[[OVERFLOW:.*]] = zero.where %[[SKIP]]
// CHECK: %[[INC:.*]] = zero.sub %{{.*}}, %[[OVERFLOW]]
// CHECK: %[[STEP:.*]] = zero.add %{{.*}}, %[[INC]]
// CHECK: zero.store %[[STEP]], @optimizer.step
// CHECK: %[[CLIP:.*]] = zero.min
// CHECK: %[[COEF:.*]] = zero.mul %[[CLIP]], %[[INV]]
// CHECK: %[[G:.*]] = zero.mul %{{.*}}, %[[COEF]]
// CHECK: zero.adamw %{{.*}}, %[[G]], %{{.*}}, %{{.*}}, %[[LR]], %[[STEP]] skip %[[SKIP]] : tensor<i1>
// CHECK: zero.fill @w.grad
// CHECK: return %[[NORM]], %[[OVERFLOW]]
zero.global @w param trainable : tensor<3x4xf32>
func.func @forward(%x: tensor<2x4xf32> {zero.input = "x"}, %l: tensor<2xi64> {zero.input = "labels"})
    -> (tensor<f32> {zero.loss, zero.output = "loss"}) {
  %w = zero.load @w : tensor<3x4xf32>
  %low = zero.constant dense<-3.40282347E+38> : tensor<f32>
  %m = zero.mul %x, %low : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %0 = zero.matmul %m, %w {transpose_rhs} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  %1 = zero.cross_entropy %0, %l {ignore_index = -100 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %1 : tensor<f32>
}
