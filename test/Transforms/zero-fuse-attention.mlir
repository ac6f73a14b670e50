// RUN: zcc-opt %s -split-input-file -zero-fuse-attention | FileCheck %s

// torch.onnx's SDPA: q and k^T each scaled by sqrt(1/sqrt(D)) (cast to the
// compute type), the mask added with the NaN guard, the heads transposed back.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x4x16xbf16>, %[[K:.*]]: tensor<2x8x4x16xbf16>, %[[V:.*]]: tensor<2x8x4x16xbf16>, %[[M:.*]]: tensor<2x1x8x8xbf16>)
// CHECK: %[[O:.*]], %{{.*}} = zero.attention %[[Q]], %[[K]], %[[V]] bias %[[M]] {nan_to_zero, scale = 0.12497329711914063 : f64} : (tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x1x8x8xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>)
// CHECK-NEXT: return %[[O]]
// CHECK-NOT: zero.transpose
func.func @forward(%q: tensor<2x8x4x16xbf16>, %k: tensor<2x8x4x16xbf16>, %v: tensor<2x8x4x16xbf16>, %mask: tensor<2x1x8x8xbf16>) -> tensor<2x8x4x16xbf16> {
  %c = zero.constant dense<0.125> : tensor<f32>
  %cb = zero.cast %c : tensor<f32> to tensor<bf16>
  %s = zero.sqrt %cb : tensor<bf16>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<2x8x4x16xbf16> -> tensor<2x4x8x16xbf16>
  %kt = zero.transpose %k [0, 2, 1, 3] : tensor<2x8x4x16xbf16> -> tensor<2x4x8x16xbf16>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<2x8x4x16xbf16> -> tensor<2x4x8x16xbf16>
  %k3 = zero.reshape %kt : tensor<2x4x8x16xbf16> -> tensor<8x8x16xbf16>
  %k3t = zero.transpose %k3 [0, 2, 1] : tensor<8x8x16xbf16> -> tensor<8x16x8xbf16>
  %kT = zero.reshape %k3t : tensor<8x16x8xbf16> -> tensor<2x4x16x8xbf16>
  %qs = zero.mul %qt, %s : (tensor<2x4x8x16xbf16>, tensor<bf16>) -> tensor<2x4x8x16xbf16>
  %ks = zero.mul %kT, %s : (tensor<2x4x16x8xbf16>, tensor<bf16>) -> tensor<2x4x16x8xbf16>
  %scores = zero.matmul %qs, %ks : (tensor<2x4x8x16xbf16>, tensor<2x4x16x8xbf16>) -> tensor<2x4x8x8xbf16>
  %p = zero.bias_softmax %scores, %mask {nan_to_zero} : (tensor<2x4x8x8xbf16>, tensor<2x1x8x8xbf16>) -> tensor<2x4x8x8xbf16>
  %o = zero.matmul %p, %vt : (tensor<2x4x8x8xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xbf16>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<2x4x8x16xbf16> -> tensor<2x8x4x16xbf16>
  return %ob : tensor<2x8x4x16xbf16>
}

// -----

// q, k, v the three parts of one split of a [B, S, 3 H D] projection: the
// packed form reads the projection (a view) instead of the split's copies.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x192xf32>, %[[M:.*]]: tensor<2x1x8x8xf32>)
// CHECK: %[[P:.*]] = zero.reshape %[[X]] : tensor<2x8x192xf32> -> tensor<2x8x3x4x16xf32>
// CHECK: %[[O:.*]], %{{.*}} = zero.attention_packed %[[P]] bias %[[M]] {scale = 2.500000e-01 : f64}
// CHECK-NOT: zero.split
// CHECK: return %[[O]]
func.func @forward(%x: tensor<2x8x192xf32>, %mask: tensor<2x1x8x8xf32>) -> tensor<2x8x4x16xf32> {
  %c = zero.constant dense<0.25> : tensor<f32>
  %parts:3 = zero.split %x {axis = 2 : i64, sizes = array<i64: 64, 64, 64>} : tensor<2x8x192xf32> -> tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>
  %q = zero.reshape %parts#0 : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %k = zero.reshape %parts#1 : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %v = zero.reshape %parts#2 : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %kT = zero.transpose %k [0, 2, 3, 1] : tensor<2x8x4x16xf32> -> tensor<2x4x16x8xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %scores = zero.matmul %qt, %kT : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %scaled = zero.mul %scores, %c : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %p = zero.bias_softmax %scaled, %mask : (tensor<2x4x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %o = zero.matmul %p, %vt : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  return %ob : tensor<2x8x4x16xf32>
}

// -----

// The scale on the scores, k^T as one transpose; the output also read with
// its heads out: that reader gets the fused result transposed.
// CHECK-LABEL: func.func @forward
// CHECK: %[[O:.*]], %{{.*}} = zero.attention %{{.*}} {scale = 2.500000e-01 : f64}
// CHECK: %[[T:.*]] = zero.transpose %[[O]] [0, 2, 1, 3]
// CHECK: return %[[O]], %[[T]]
func.func @forward(%q: tensor<1x8x2x16xf32>, %k: tensor<1x8x2x16xf32>, %v: tensor<1x8x2x16xf32>, %mask: tensor<1x1x8x8xf32>) -> (tensor<1x8x2x16xf32>, tensor<1x2x8x16xf32>) {
  %c = zero.constant dense<0.25> : tensor<f32>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<1x8x2x16xf32> -> tensor<1x2x8x16xf32>
  %kT = zero.transpose %k [0, 2, 3, 1] : tensor<1x8x2x16xf32> -> tensor<1x2x16x8xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<1x8x2x16xf32> -> tensor<1x2x8x16xf32>
  %scores = zero.matmul %qt, %kT : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %scaled = zero.mul %scores, %c : (tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %p = zero.bias_softmax %scaled, %mask : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o = zero.matmul %p, %vt : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<1x2x8x16xf32> -> tensor<1x8x2x16xf32>
  return %ob, %o : tensor<1x8x2x16xf32>, tensor<1x2x8x16xf32>
}

// -----

// q and k computed in [B, H, S, D] (Llama's RoPE after the transpose), k
// given with transpose_rhs: they reach the fused op transposed back.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x8x16xf32>, %[[K:.*]]: tensor<1x2x8x16xf32>, %[[V:.*]]: tensor<1x8x2x16xf32>
// CHECK-DAG: %[[QT:.*]] = zero.transpose %[[Q]] [0, 2, 1, 3] : tensor<1x2x8x16xf32> -> tensor<1x8x2x16xf32>
// CHECK-DAG: %[[KT:.*]] = zero.transpose %[[K]] [0, 2, 1, 3] : tensor<1x2x8x16xf32> -> tensor<1x8x2x16xf32>
// CHECK: zero.attention %[[QT]], %[[KT]], %[[V]]
func.func @forward(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x8x2x16xf32>, %mask: tensor<1x1x8x8xf32>) -> tensor<1x8x2x16xf32> {
  %c = zero.constant dense<0.25> : tensor<f32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<1x8x2x16xf32> -> tensor<1x2x8x16xf32>
  %scores = zero.matmul %q, %k {transpose_rhs} : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x8xf32>
  %scaled = zero.mul %scores, %c : (tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %p = zero.bias_softmax %scaled, %mask : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o = zero.matmul %p, %vt : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<1x2x8x16xf32> -> tensor<1x8x2x16xf32>
  return %ob : tensor<1x8x2x16xf32>
}

// -----

// Left alone: the probabilities read elsewhere (they are never stored when
// fused), a scale that is not a constant, a mask computed from a trainable
// parameter (zero.attention's backward gives the mask no gradient).
// CHECK-LABEL: func.func @forward
// CHECK-NOT: zero.attention
zero.global @bias param trainable : tensor<1x1x8x8xf32>
func.func @forward(%q: tensor<1x8x2x16xf32>, %k: tensor<1x8x2x16xf32>, %v: tensor<1x8x2x16xf32>, %mask: tensor<1x1x8x8xf32>, %x: tensor<f32>) -> (tensor<1x8x2x16xf32>, tensor<1x2x8x8xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>) {
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<1x8x2x16xf32> -> tensor<1x2x8x16xf32>
  %kT = zero.transpose %k [0, 2, 3, 1] : tensor<1x8x2x16xf32> -> tensor<1x2x16x8xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<1x8x2x16xf32> -> tensor<1x2x8x16xf32>
  %s1 = zero.matmul %qt, %kT : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %p1 = zero.bias_softmax %s1, %mask : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o1 = zero.matmul %p1, %vt : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %r1 = zero.transpose %o1 [0, 2, 1, 3] : tensor<1x2x8x16xf32> -> tensor<1x8x2x16xf32>
  %s2 = zero.matmul %qt, %kT : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %s2x = zero.mul %s2, %x : (tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %p2 = zero.bias_softmax %s2x, %mask : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o2 = zero.matmul %p2, %vt : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %r2 = zero.transpose %o2 [0, 2, 1, 3] : tensor<1x2x8x16xf32> -> tensor<1x8x2x16xf32>
  %b = zero.load @bias : tensor<1x1x8x8xf32>
  %s3 = zero.matmul %qt, %kT : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %p3 = zero.bias_softmax %s3, %b : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o3 = zero.matmul %p3, %vt : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %r3 = zero.transpose %o3 [0, 2, 1, 3] : tensor<1x2x8x16xf32> -> tensor<1x8x2x16xf32>
  return %r1, %p1, %r2, %r3 : tensor<1x8x2x16xf32>, tensor<1x2x8x8xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>
}

// -----

// Grouped-query attention as transformers spells it (repeat_kv: reshape,
// expand, reshape of the 2 k/v heads to 4, here k in the exporter's
// flattened k^T form): zero.attention reads the 2 heads unrepeated.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x4x16xf32>, %[[K:.*]]: tensor<2x8x2x16xf32>, %[[V:.*]]: tensor<2x8x2x16xf32>, %[[M:.*]]: tensor<2x1x8x8xf32>)
// CHECK: %[[O:.*]], %{{.*}} = zero.attention %[[Q]], %[[K]], %[[V]] bias %[[M]] {scale = 2.500000e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x1x8x8xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
// CHECK-NOT: zero.expand
// CHECK: return %[[O]]
func.func @forward(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>, %mask: tensor<2x1x8x8xf32>) -> tensor<2x8x4x16xf32> {
  %c = zero.constant dense<0.5> : tensor<f32>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %kt = zero.transpose %k [0, 2, 1, 3] : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
  %k5 = zero.reshape %kt : tensor<2x2x8x16xf32> -> tensor<2x2x1x8x16xf32>
  %ke = zero.expand %k5 : tensor<2x2x1x8x16xf32> -> tensor<2x2x2x8x16xf32>
  %k3 = zero.reshape %ke : tensor<2x2x2x8x16xf32> -> tensor<8x8x16xf32>
  %k3t = zero.transpose %k3 [0, 2, 1] : tensor<8x8x16xf32> -> tensor<8x16x8xf32>
  %kT = zero.reshape %k3t : tensor<8x16x8xf32> -> tensor<2x4x16x8xf32>
  %v5 = zero.reshape %vt : tensor<2x2x8x16xf32> -> tensor<2x2x1x8x16xf32>
  %ve = zero.expand %v5 : tensor<2x2x1x8x16xf32> -> tensor<2x2x2x8x16xf32>
  %vr = zero.reshape %ve : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
  %qs = zero.mul %qt, %c : (tensor<2x4x8x16xf32>, tensor<f32>) -> tensor<2x4x8x16xf32>
  %ks = zero.mul %kT, %c : (tensor<2x4x16x8xf32>, tensor<f32>) -> tensor<2x4x16x8xf32>
  %scores = zero.matmul %qs, %ks : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %p = zero.bias_softmax %scores, %mask : (tensor<2x4x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %o = zero.matmul %p, %vr : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  return %ob : tensor<2x8x4x16xf32>
}

// -----

// Constant masks proved structural (every element read): transformers'
// where(causal condition, the lifted 0, float32's lowest) becomes `causal`,
// no mask tensor, the condition and the select gone.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: zero.where
// CHECK: zero.attention_packed %{{.*}} {causal, scale = 5.000000e-01 : f64} : (tensor<1x4x3x4x4xf32>) ->
// CHECK-NOT: zero.where
zero.global @lifted buffer : tensor<f32> = dense<0.0> : tensor<f32>
func.func @forward(%x: tensor<1x4x48xf32>) -> tensor<1x4x4x4xf32> {
  %c = zero.constant dense<0.5> : tensor<f32>
  %cond = zero.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %zero = zero.load @lifted : tensor<f32>
  %low = zero.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = zero.where %cond, %zero, %low : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x4x4xf32>
  %parts:3 = zero.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<1x4x48xf32> -> tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>
  %q = zero.reshape %parts#0 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %k = zero.reshape %parts#1 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %v = zero.reshape %parts#2 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %kT = zero.transpose %k [0, 2, 3, 1] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %scores = zero.matmul %qt, %kT : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %scaled = zero.mul %scores, %c : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %p = zero.bias_softmax %scaled, %mask : (tensor<1x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x4x4x4xf32>
  %o = zero.matmul %p, %vt : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  return %ob : tensor<1x4x4x4xf32>
}

// -----

// A float mask of 0 and -inf kept on a band of 2 keys ending at the
// diagonal: a sliding window.
// CHECK-LABEL: func.func @forward
// CHECK: zero.attention_packed %{{.*}} {causal, scale = 5.000000e-01 : f64, window = 2 : i64} : (tensor<1x4x3x4x4xf32>) ->
func.func @forward(%x: tensor<1x4x48xf32>) -> tensor<1x4x4x4xf32> {
  %c = zero.constant dense<0.5> : tensor<f32>
  %mask = zero.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0xFF800000, 0.0, 0.0, 0xFF800000], [0xFF800000, 0xFF800000, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %parts:3 = zero.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<1x4x48xf32> -> tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>
  %q = zero.reshape %parts#0 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %k = zero.reshape %parts#1 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %v = zero.reshape %parts#2 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %kT = zero.transpose %k [0, 2, 3, 1] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %scores = zero.matmul %qt, %kT : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %scaled = zero.mul %scores, %c : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %p = zero.bias_softmax %scaled, %mask : (tensor<1x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x4x4x4xf32>
  %o = zero.matmul %p, %vt : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  return %ob : tensor<1x4x4x4xf32>
}

// -----

// All zeros: no mask at all.
// CHECK-LABEL: func.func @forward
// CHECK: zero.attention_packed %{{.*}} {scale = 5.000000e-01 : f64} : (tensor<1x4x3x4x4xf32>) ->
func.func @forward(%x: tensor<1x4x48xf32>) -> tensor<1x4x4x4xf32> {
  %c = zero.constant dense<0.5> : tensor<f32>
  %mask = zero.constant dense<[[[[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %parts:3 = zero.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<1x4x48xf32> -> tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>
  %q = zero.reshape %parts#0 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %k = zero.reshape %parts#1 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %v = zero.reshape %parts#2 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %kT = zero.transpose %k [0, 2, 3, 1] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %scores = zero.matmul %qt, %kT : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %scaled = zero.mul %scores, %c : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %p = zero.bias_softmax %scaled, %mask : (tensor<1x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x4x4x4xf32>
  %o = zero.matmul %p, %vt : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  return %ob : tensor<1x4x4x4xf32>
}

// -----

// Causal but for one element (key 1 of query 3 dropped): the bias stays.
// CHECK-LABEL: func.func @forward
// CHECK: zero.attention_packed %{{.*}} bias %{{.*}} {scale = 5.000000e-01 : f64} : (tensor<1x4x3x4x4xf32>, tensor<1x1x4x4xf32>) ->
func.func @forward(%x: tensor<1x4x48xf32>) -> tensor<1x4x4x4xf32> {
  %c = zero.constant dense<0.5> : tensor<f32>
  %mask = zero.constant dense<[[[[0.0, -65504.0, -65504.0, -65504.0], [0.0, 0.0, -65504.0, -65504.0], [0.0, 0.0, 0.0, -65504.0], [0.0, -65504.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %parts:3 = zero.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<1x4x48xf32> -> tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>
  %q = zero.reshape %parts#0 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %k = zero.reshape %parts#1 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %v = zero.reshape %parts#2 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %kT = zero.transpose %k [0, 2, 3, 1] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %scores = zero.matmul %qt, %kT : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %scaled = zero.mul %scores, %c : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %p = zero.bias_softmax %scaled, %mask : (tensor<1x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x4x4x4xf32>
  %o = zero.matmul %p, %vt : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  return %ob : tensor<1x4x4x4xf32>
}

// -----

// Causal in shape, but -1e4 above the diagonal is a bias, not a mask: the
// bias stays.
// CHECK-LABEL: func.func @forward
// CHECK: zero.attention_packed %{{.*}} bias %{{.*}} {scale
func.func @forward(%x: tensor<1x4x48xf32>) -> tensor<1x4x4x4xf32> {
  %c = zero.constant dense<0.5> : tensor<f32>
  %mask = zero.constant dense<[[[[0.0, -1.0e+04, -1.0e+04, -1.0e+04], [0.0, 0.0, -1.0e+04, -1.0e+04], [0.0, 0.0, 0.0, -1.0e+04], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %parts:3 = zero.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<1x4x48xf32> -> tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>
  %q = zero.reshape %parts#0 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %k = zero.reshape %parts#1 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %v = zero.reshape %parts#2 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %kT = zero.transpose %k [0, 2, 3, 1] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %scores = zero.matmul %qt, %kT : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %scaled = zero.mul %scores, %c : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %p = zero.bias_softmax %scaled, %mask : (tensor<1x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x4x4x4xf32>
  %o = zero.matmul %p, %vt : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  return %ob : tensor<1x4x4x4xf32>
}

// -----

// Logit soft-capping (Gemma 2: c tanh(s / c) of the scaled scores, before
// the mask): the op's softcap; the scale stays inside.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: zero.tanh
// CHECK: zero.attention_packed %{{.*}} {causal, scale = 5.000000e-01 : f64, softcap = 3.000000e+01 : f64} : (tensor<1x4x3x4x4xf32>) ->
// CHECK-NOT: zero.tanh
func.func @forward(%x: tensor<1x4x48xf32>) -> tensor<1x4x4x4xf32> {
  %c = zero.constant dense<0.5> : tensor<f32>
  %mask = zero.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %parts:3 = zero.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<1x4x48xf32> -> tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>
  %q = zero.reshape %parts#0 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %k = zero.reshape %parts#1 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %v = zero.reshape %parts#2 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %kT = zero.transpose %k [0, 2, 3, 1] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %scores = zero.matmul %qt, %kT : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %scaled = zero.mul %scores, %c : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %cap = zero.constant dense<30.0> : tensor<f32>
  %over = zero.div %scaled, %cap : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %th = zero.tanh %over : tensor<1x4x4x4xf32>
  %capped = zero.mul %th, %cap : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %p = zero.bias_softmax %capped, %mask : (tensor<1x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x4x4x4xf32>
  %o = zero.matmul %p, %vt : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  return %ob : tensor<1x4x4x4xf32>
}

// -----

// The division as a multiplication by 1 / c, operands either way round.
// CHECK-LABEL: func.func @forward
// CHECK: zero.attention_packed %{{.*}} {causal, scale = 5.000000e-01 : f64, softcap = 3.000000e+01 : f64}
func.func @forward(%x: tensor<1x4x48xf32>) -> tensor<1x4x4x4xf32> {
  %c = zero.constant dense<0.5> : tensor<f32>
  %mask = zero.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %parts:3 = zero.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<1x4x48xf32> -> tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>
  %q = zero.reshape %parts#0 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %k = zero.reshape %parts#1 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %v = zero.reshape %parts#2 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %kT = zero.transpose %k [0, 2, 3, 1] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %scores = zero.matmul %qt, %kT : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %scaled = zero.mul %scores, %c : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %cap = zero.constant dense<30.0> : tensor<f32>
  %inv = zero.constant dense<0.0333333351> : tensor<f32>
  %over = zero.mul %inv, %scaled : (tensor<f32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %th = zero.tanh %over : tensor<1x4x4x4xf32>
  %capped = zero.mul %cap, %th : (tensor<f32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %p = zero.bias_softmax %capped, %mask : (tensor<1x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x4x4x4xf32>
  %o = zero.matmul %p, %vt : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  return %ob : tensor<1x4x4x4xf32>
}

// -----

// c1 tanh(s / c2) with c1 != c2 is not soft-capping: not fused.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: zero.attention
// CHECK: zero.tanh
func.func @forward(%x: tensor<1x4x48xf32>) -> tensor<1x4x4x4xf32> {
  %c = zero.constant dense<0.5> : tensor<f32>
  %mask = zero.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %parts:3 = zero.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<1x4x48xf32> -> tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>
  %q = zero.reshape %parts#0 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %k = zero.reshape %parts#1 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %v = zero.reshape %parts#2 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %kT = zero.transpose %k [0, 2, 3, 1] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %scores = zero.matmul %qt, %kT : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %scaled = zero.mul %scores, %c : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %cap = zero.constant dense<30.0> : tensor<f32>
  %cap2 = zero.constant dense<20.0> : tensor<f32>
  %over = zero.div %scaled, %cap2 : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %th = zero.tanh %over : tensor<1x4x4x4xf32>
  %capped = zero.mul %th, %cap : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %p = zero.bias_softmax %capped, %mask : (tensor<1x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x4x4x4xf32>
  %o = zero.matmul %p, %vt : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  return %ob : tensor<1x4x4x4xf32>
}

// -----

// Soft-capping with a mask the kernels must read (a finite bias): not fused
// (the kernels take soft-capping with structural masks only).
// CHECK-LABEL: func.func @forward
// CHECK-NOT: zero.attention
// CHECK: zero.bias_softmax
func.func @forward(%x: tensor<1x4x48xf32>) -> tensor<1x4x4x4xf32> {
  %c = zero.constant dense<0.5> : tensor<f32>
  %mask = zero.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.5, 0.0]]]]> : tensor<1x1x4x4xf32>
  %parts:3 = zero.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<1x4x48xf32> -> tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>
  %q = zero.reshape %parts#0 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %k = zero.reshape %parts#1 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %v = zero.reshape %parts#2 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %qt = zero.transpose %q [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %kT = zero.transpose %k [0, 2, 3, 1] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %vt = zero.transpose %v [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %scores = zero.matmul %qt, %kT : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %scaled = zero.mul %scores, %c : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %cap = zero.constant dense<30.0> : tensor<f32>
  %over = zero.div %scaled, %cap : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %th = zero.tanh %over : tensor<1x4x4x4xf32>
  %capped = zero.mul %th, %cap : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %p = zero.bias_softmax %capped, %mask : (tensor<1x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x4x4x4xf32>
  %o = zero.matmul %p, %vt : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %ob = zero.transpose %o [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  return %ob : tensor<1x4x4x4xf32>
}
