// RUN: zcc-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{initial value type 'tensor<3xf32>' does not match the global's type 'tensor<4xf32>'}}
zero.global @w param : tensor<4xf32> = dense<1.0> : tensor<3xf32>

// -----

// expected-error @+1 {{a trainable global must have a floating-point type}}
zero.global @i param trainable : tensor<4xi64>

// -----

func.func @load_unknown() {
  // expected-error @+1 {{refers to 'nope', which is not a zero.global}}
  %0 = zero.load @nope : tensor<4xf32>
  return
}

// -----

zero.global @w param : tensor<4xf32>
func.func @load_type() {
  // expected-error @+1 {{type 'tensor<5xf32>' does not match global 'w' of type 'tensor<4xf32>'}}
  %0 = zero.load @w : tensor<5xf32>
  return
}

// -----

zero.global @w param : tensor<4xf32>
func.func @store_type(%x: tensor<4xf16>) {
  // expected-error @+1 {{type 'tensor<4xf16>' does not match global 'w' of type 'tensor<4xf32>'}}
  zero.store %x, @w : tensor<4xf16>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot reshape [2x3] (6 elements) to [7] (7 elements)}}
  %0 = zero.reshape %x : tensor<2x3xf32> -> tensor<7xf32>
  return
}

// -----

func.func @reshape_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{element type changes from 'f32' to 'f16'}}
  %0 = zero.reshape %x : tensor<2x3xf32> -> tensor<6xf16>
  return
}

// -----

func.func @transpose_rank(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{permutation has 3 entries for a tensor of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.transpose %x [0, 1, 2] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @transpose_perm(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{permutation [0, 0] is not a permutation of 0..1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.transpose %x [0, 0] : tensor<2x3xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @transpose_result(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3x2xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.transpose %x [1, 0] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @expand_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot broadcast [2x3] to [2x4]}}
  %0 = zero.expand %x : tensor<2x3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @expand_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{element type changes from 'f32' to 'i64'}}
  %0 = zero.expand %x : tensor<2x3xf32> -> tensor<2x2x3xi64>
  return
}

// -----

func.func @slice_entries(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{start, limit and stride need one entry per dimension (2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.slice %x[[0] : [2] : [1]] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_stride(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{stride of dimension 1 must be >= 1, got 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.slice %x[[0, 0] : [2, 3] : [1, 0]] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{bounds [1, 4) of dimension 1 are outside [0, 3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.slice %x[[0, 1] : [2, 4] : [1, 1]] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @concat_axis(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.concat %x, %x {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_shapes(%x: tensor<2x3xf32>, %y: tensor<3x3xf32>) {
  // expected-error @+2 {{input shapes [2x3] and [3x3] differ outside axis 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.concat %x, %y {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @split_sizes(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{split sizes add up to 2 but dimension 1 has 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = zero.split %x {axis = 1 : i64, sizes = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<2x1xf32>, tensor<2x1xf32>
  return
}

// -----

func.func @gather_axis(%x: tensor<2x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.gather %x[%i] {axis = 2 : i64} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @gather_index_type(%x: tensor<2x3xf32>, %i: tensor<4xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = zero.gather %x[%i] {axis = 0 : i64} : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @broadcast(%x: tensor<2x3xf32>, %y: tensor<4xf32>) {
  // expected-error @+2 {{operand shapes [2x3] and [4] are not broadcast-compatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.add %x, %y : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @element_types(%x: tensor<2x3xf32>, %y: tensor<3xf16>) {
  // expected-error @+2 {{operand element types differ: 'f32' vs 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.mul %x, %y : (tensor<2x3xf32>, tensor<3xf16>) -> tensor<2x3xf32>
  return
}

// -----

func.func @where_condition(%c: tensor<4xi1>, %x: tensor<2x3xf32>) {
  // expected-error @+2 {{condition shape [4] does not broadcast with [2x3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.where %c, %x, %x : (tensor<4xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @unary_int(%x: tensor<2x3xi64>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point values}}
  %0 = zero.exp %x : tensor<2x3xi64>
  return
}

// -----

func.func @matmul_rank(%x: tensor<3xf32>, %y: tensor<3x4xf32>) {
  // expected-error @+2 {{operands must have rank >= 2, got 1 and 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.matmul %x, %y : (tensor<3xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_k(%x: tensor<2x3xf32>, %y: tensor<4x5xf32>) {
  // expected-error @+2 {{contraction dimensions differ: [2x3] x [4x5] (3 vs 4)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.matmul %x, %y : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_batch(%x: tensor<2x2x3xf32>, %y: tensor<5x3x4xf32>) {
  // expected-error @+2 {{batch dimensions of [2x2x3] and [5x3x4] do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.matmul %x, %y : (tensor<2x2x3xf32>, tensor<5x3x4xf32>) -> tensor<2x2x4xf32>
  return
}

// -----

func.func @reduce_axes(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{axes [1, 1] must be distinct and in [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = zero.reduce sum %x [1, 1] {keepdims = false} : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 must be in [0, 2)}}
  %0 = zero.softmax %x {axis = 2 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<2x3xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{scale has type 'tensor<2xf32>', expected shape [3] of 'f32'}}
  %0 = zero.layer_norm %x, %s {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_result(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{result type must equal the input type}}
  %0 = zero.layer_norm %x, %s {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @rms_norm_eps(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{epsilon must be non-negative}}
  %0 = zero.rms_norm %x, %s {axis = 1 : i64, epsilon = -1.0 : f64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @cross_entropy_labels(%x: tensor<2x3xf32>, %l: tensor<3xi64>) {
  // expected-error @+1 {{labels [3] must have the shape of the logits [2x3] without the class axis}}
  %0 = zero.cross_entropy %x, %l {ignore_index = -100 : i64} : (tensor<2x3xf32>, tensor<3xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_result(%x: tensor<2x3xf32>, %l: tensor<2xi64>) {
  // expected-error @+1 {{result must be a scalar tensor}}
  %0 = zero.cross_entropy %x, %l {ignore_index = -100 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2xf32>
  return
}

// -----

func.func @adamw_skip_not_scalar(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<2xi1>) {
  // expected-error @+1 {{skip must be a scalar}}
  %a:3 = zero.adamw %p, %p, %p, %p, %lr, %lr skip %s : tensor<2xi1> {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.01 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>
  return
}

// -----

func.func @sgd_skip_not_scalar(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<2xi1>) {
  // expected-error @+1 {{skip must be a scalar}}
  %b:2 = zero.sgd %p, %p, %p, %lr skip %s : tensor<2xi1> {momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<f32>
  return
}

// -----

// Grouped-query attention: k/v heads must divide q's (2 of 4 would do, 3 not).
func.func @attention_kv_heads(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x3x16xf32>, %m: tensor<2x1x8x8xf32>) {
  // expected-error @+1 {{k [2x8x3x16] and v [2x8x3x16] must be [B, Sk, Hk, D] with q's B and D, Hk dividing q's H [2x8x4x16]}}
  %o, %l = zero.attention %q, %k, %k bias %m {scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>, tensor<2x1x8x8xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_mask(%q: tensor<2x8x4x16xf32>, %m: tensor<2x1x8x4xf32>) {
  // expected-error @+1 {{bias [2x1x8x4] must be [B or 1, H or 1, 8, 8]}}
  %o, %l = zero.attention %q, %q, %q bias %m {scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x1x8x4xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_lse(%q: tensor<2x8x4x16xf32>, %m: tensor<1x1x8x8xf32>) {
  // expected-error @+1 {{lse must be [B, H, Sq] = [2x4x8]}}
  %o, %l = zero.attention %q, %q, %q bias %m {scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<1x1x8x8xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4xf32>)
  return
}

// -----

// A mask is a bias or causal (and a window), not both.
func.func @attention_bias_and_causal(%q: tensor<2x8x4x16xf32>, %m: tensor<1x1x8x8xf32>) {
  // expected-error @+1 {{takes a bias or causal/window, not both}}
  %o, %l = zero.attention %q, %q, %q bias %m {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<1x1x8x8xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_causal_lengths(%q: tensor<2x8x4x16xf32>, %k: tensor<2x6x4x16xf32>) {
  // expected-error @+1 {{causal needs as many queries as keys, not 8 and 6}}
  %o, %l = zero.attention %q, %k, %k {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x6x4x16xf32>, tensor<2x6x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_window(%q: tensor<2x8x4x16xf32>) {
  // expected-error @+1 {{window must be at least 1, and only with causal}}
  %o, %l = zero.attention %q, %q, %q {scale = 0.25 : f64, window = 4 : i64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_packed_shape(%qkv: tensor<2x8x2x4x16xf32>, %m: tensor<1x1x8x8xf32>) {
  // expected-error @+1 {{expects qkv [B, S, 3, H, D]}}
  %o, %l = zero.attention_packed %qkv bias %m {scale = 0.25 : f64} : (tensor<2x8x2x4x16xf32>, tensor<1x1x8x8xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @matmul_bgrad_rows(%x: tensor<8x4xf32>, %dy: tensor<6x3xf32>) {
  // expected-error @+1 {{expects 2-D operands with as many rows}}
  %w, %b = zero.matmul_bgrad %x, %dy : (tensor<8x4xf32>, tensor<6x3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @matmul_bgrad_bias(%x: tensor<8x4xf32>, %dy: tensor<8x3xf32>) {
  // expected-error @+1 {{bias gradient 'tensor<4xf32>' should be [3] or [1, 3]}}
  %w, %b = zero.matmul_bgrad %x, %dy : (tensor<8x4xf32>, tensor<8x3xf32>) -> (tensor<4x3xf32>, tensor<4xf32>)
  return
}

// -----

func.func @matmul_bgrad_weight(%x: tensor<8x4xf32>, %dy: tensor<8x3xf32>) {
  // expected-error @+1 {{weight gradient 'tensor<3x4xf32>' should be 4x3}}
  %w, %b = zero.matmul_bgrad %x, %dy : (tensor<8x4xf32>, tensor<8x3xf32>) -> (tensor<3x4xf32>, tensor<1x3xf32>)
  return
}

// -----

func.func @cast_many_count(%a: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{expects as many results as inputs, at least one; got 2 inputs and 1 results}}
  %r = zero.cast_many %a, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xbf16>
  return
}

// -----

func.func @cast_many_types(%a: tensor<8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{pair 1: 'tensor<4xf32>' -> 'tensor<4xf16>' is not a 'f32' -> 'bf16' cast of one shape}}
  %r:2 = zero.cast_many %a, %b : (tensor<8xf32>, tensor<4xf32>) -> (tensor<8xbf16>, tensor<4xf16>)
  return
}

// -----

func.func @cast_concat_count(%a: tensor<8xbf16>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{the inputs hold 12 elements, the result 16}}
  %r = zero.cast_concat %a, %b : (tensor<8xbf16>, tensor<4xbf16>) -> tensor<16xf32>
  return
}

// -----

func.func @matmul_bias_gelu_pre(%x: tensor<8x4xbf16>, %w: tensor<4x16xbf16>, %b: tensor<16xbf16>) {
  // expected-error @+1 {{expects a 2-D result and pre-activation of one type}}
  %h, %p = zero.matmul_bias_gelu %x, %w, %b : (tensor<8x4xbf16>, tensor<4x16xbf16>, tensor<16xbf16>) -> (tensor<8x16xbf16>, tensor<8x16xf32>)
  return
}

// -----

func.func @matmul_bias_gelu_bias(%x: tensor<8x4xbf16>, %w: tensor<4x16xbf16>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{bias 'tensor<8xbf16>' is not one value per column of 'tensor<8x16xbf16>'}}
  %h, %p = zero.matmul_bias_gelu %x, %w, %b : (tensor<8x4xbf16>, tensor<4x16xbf16>, tensor<8xbf16>) -> (tensor<8x16xbf16>, tensor<8x16xbf16>)
  return
}

// -----

func.func @elementwise_step(%a: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{step 1 (0, 0, 1, -1) is not a load of an input, a pick or an opcode over earlier steps}}
  %r = zero.elementwise %a, %b {program = array<i64: 6, 0, -1, -1, 0, 0, 1, -1>, step_types = [f32, f32]} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @elementwise_load(%a: tensor<8xf32>) {
  // expected-error @+1 {{step 0 (6, 1, -1, -1) is not a load of an input}}
  %r = zero.elementwise %a {program = array<i64: 6, 1, -1, -1>, step_types = [f32]} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @elementwise_pick(%a: tensor<8xf32>) {
  // expected-error @+1 {{step 2 (7, 0, 1, 0) is not a load of an input, a pick}}
  %r = zero.elementwise %a {offsets = array<i64: 1, 4>, program = array<i64: 6, 0, -1, -1, 4, 0, -1, -1, 7, 0, 1, 0>, step_types = [f32, f32, f32]} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @elementwise_types(%a: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{step 2's type is not result 0's 'bf16'}}
  %r = zero.elementwise %a, %b {program = array<i64: 6, 0, -1, -1, 6, 1, -1, -1, 0, 0, 1, -1>, step_types = [f32, f32, f32]} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xbf16>
  return
}

// -----

func.func @elementwise_empty(%a: tensor<8xf32>, %b: tensor<0xf32>) {
  // expected-error @+1 {{input 'tensor<0xf32>' is not of a static, non-empty shape}}
  %r = zero.elementwise %a, %b {program = array<i64: 6, 0, -1, -1, 6, 1, -1, -1, 0, 0, 1, -1>, step_types = [f32, f32, f32]} : (tensor<8xf32>, tensor<0xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @elementwise_rank(%a: tensor<8xf32>, %b: tensor<2x8xf32>) {
  // expected-error @+1 {{input 'tensor<2x8xf32>' has a higher rank than 'tensor<8xf32>'}}
  %r = zero.elementwise %a, %b {program = array<i64: 6, 0, -1, -1, 6, 1, -1, -1, 0, 0, 1, -1>, step_types = [f32, f32, f32]} : (tensor<8xf32>, tensor<2x8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @matmul_gelu_grad_pre(%dy: tensor<8x4xbf16>, %w: tensor<16x4xbf16>, %p: tensor<8x8xbf16>) {
  // expected-error @+1 {{expects a 2-D result and pre-activation of one type}}
  %r = zero.matmul_gelu_grad %dy, %w, %p {transpose_rhs} : (tensor<8x4xbf16>, tensor<16x4xbf16>, tensor<8x8xbf16>) -> tensor<8x16xbf16>
  return
}

// -----

func.func @matmul_add_addend(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>, %r: tensor<1x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{addend 'tensor<1x8xf32>' is not of the result's type 'tensor<4x8xf32>'}}
  %0 = zero.matmul_add %a, %b, %r : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @all_to_all_uneven(%v: tensor<10xi8>) -> tensor<10xi8> {
  // expected-error @+1 {{expects a 1-D tensor of world_size (4) equal chunks, got 'tensor<10xi8>'}}
  %0 = zero.all_to_all %v {world_size = 4 : i64} : tensor<10xi8>
  return %0 : tensor<10xi8>
}

// -----

func.func @quantize_bits(%g: tensor<512xf32>) {
  // expected-error @+1 {{quantizes to 8 or 4 bits, got 2}}
  %v, %s = zero.quantize %g {bits = 2 : i64, block_size = 256 : i64} : tensor<512xf32> -> tensor<128xi8>, tensor<2xf32>
  return
}

// -----

func.func @quantize_packed_length(%g: tensor<512xf32>) {
  // expected-error @+1 {{expects 1-D tensors of N elements, N x 4 / 8 bytes of values}}
  %v, %s = zero.quantize %g {bits = 4 : i64, block_size = 256 : i64} : tensor<512xf32> -> tensor<512xi8>, tensor<2xf32>
  return
}

// -----

func.func @dequantize_parts(%v: tensor<768xi8>, %s: tensor<3xf32>) -> tensor<512xf32> {
  // expected-error @+1 {{expects the result to be one of parts (2) of the values}}
  %0 = zero.dequantize %v, %s {block_size = 256 : i64, parts = 2 : i64} : tensor<768xi8>, tensor<3xf32> -> tensor<512xf32>
  return %0 : tensor<512xf32>
}

// -----

func.func @attention_softcap_negative(%q: tensor<2x8x4x16xf32>) {
  // expected-error @+1 {{softcap must be positive}}
  %o, %l = zero.attention %q, %q, %q {causal, scale = 0.25 : f64, softcap = -1.0 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_softcap_bias(%q: tensor<2x8x4x16xf32>, %m: tensor<1x1x8x8xf32>) {
  // expected-error @+1 {{softcap takes a structural mask (causal, window or none), not a bias}}
  %o, %l = zero.attention %q, %q, %q bias %m {scale = 0.25 : f64, softcap = 30.0 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<1x1x8x8xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_positions_not_causal(%q: tensor<2x8x4x16xf32>, %p: tensor<2x8xi64>) {
  // expected-error @+1 {{positions (per-document attention) take a causal mask, no bias}}
  %o, %l = zero.attention %q, %q, %q positions %p {scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8xi64>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_positions_shape(%q: tensor<2x8x4x16xf32>, %p: tensor<1x8xi64>) {
  // expected-error @+1 {{positions [1x8] must be [B, S] = [2x8]}}
  %o, %l = zero.attention %q, %q, %q positions %p {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<1x8xi64>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}
