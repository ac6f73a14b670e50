// RUN: zcc-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{offset must be non-negative, got -64}}
zrt.buffer @b device[-64] : tensor<2xf32>

// -----

// expected-error @+1 {{only state, constant, host and NVMe buffers have initial values}}
zrt.buffer @b device[0] : tensor<2xf32> = dense<1.0> : tensor<2xf32>

// -----

// expected-error @+1 {{NVMe buffers start at zero, or are parameter shards}}
zrt.buffer @b nvme[0] : tensor<2xf32> = dense<1.0> : tensor<2xf32>

// -----

// expected-error @+1 {{initial value type 'tensor<3xf32>' does not match 'tensor<2xf32>'}}
zrt.buffer @b state[0] : tensor<2xf32> = dense<1.0> : tensor<3xf32>

// -----

// expected-error @+1 {{a view has no initial value}}
zrt.buffer @b constant[0] view : tensor<2xf32> = dense<1.0> : tensor<2xf32>

// -----

// expected-error @+1 {{only state buffers can be trainable}}
zrt.buffer @b device[0] trainable : tensor<2xf32>

// -----

zrt.buffer @x input[0] : tensor<2xf32>
zrt.program @eval inputs {} outputs {} {
  // expected-error @+1 {{refers to @nope, which is not a zrt.buffer}}
  zrt.kernel "relu" [@x] -> [@nope]
}

// -----

zrt.buffer @x input[0] : tensor<2xf32>
zrt.program @eval inputs {} outputs {} {
  // expected-error @+1 {{needs a kernel name}}
  zrt.kernel "" [@x] -> [@x]
}

// -----

// A kernel the runtime does not have (runtime/kernels/Kernels.def): zrun's
// validator would refuse the plan, so the verifier refuses it first.
zrt.buffer @x input[0] : tensor<2xf32>
zrt.program @eval inputs {} outputs {} {
  // expected-error @+1 {{unknown kernel 'relu6' (known: add, sub, mul}}
  zrt.kernel "relu6" [@x] -> [@x]
}
