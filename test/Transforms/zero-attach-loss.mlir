// RUN: zcc-opt %s -zero-attach-loss=loss=cross-entropy | FileCheck %s

// The logits [N, T, C] get int64 labels [N, T]; the mean cross-entropy becomes
// the first result, named "loss"; the logits stay a result.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32> {zero.input = "x"}, %[[L:.*]]: tensor<2x3xi64> {zero.input = "labels"})
// CHECK-SAME: -> (tensor<f32> {zero.loss, zero.output = "loss"}, tensor<2x3x4xf32> {zero.output = "logits"})
// CHECK: %[[CE:.*]] = zero.cross_entropy %[[X]], %[[L]] {ignore_index = -100 : i64} : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<f32>
// CHECK: return %[[CE]], %[[X]]
func.func @forward(%x: tensor<2x3x4xf32> {zero.input = "x"}) -> (tensor<2x3x4xf32> {zero.output = "logits"}) {
  return %x : tensor<2x3x4xf32>
}
