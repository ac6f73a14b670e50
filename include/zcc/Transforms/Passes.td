//===- Passes.td - zero dialect passes ---------------------*- tablegen -*-===//
#ifndef ZCC_TRANSFORMS_PASSES_TD
#define ZCC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def ZeroRecognizePatterns : Pass<"zero-recognize-patterns", "mlir::ModuleOp"> {
  let summary = "Fuse composite patterns of exported graphs into single zero ops";
  let description = [{
    PyTorch exports GELU, SiLU and RMSNorm as chains of elementwise ops. This
    pass recognizes them and replaces each chain with one op (`zero.gelu`,
    `zero.silu`, `zero.rms_norm`), so that later passes differentiate and
    generate kernels for the fused form:

    - GELU (erf):  0.5 * x * (1 + erf(x / sqrt(2)))  and  x * 0.5 * (...)
    - GELU (tanh): 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    - SiLU:        x * sigmoid(x)
    - RMSNorm:     w * (x * rsqrt(mean(x^2) + eps)), with rsqrt written as
                   1/sqrt or sqrt then reciprocal, and x^2 as pow(x, 2) or x*x

    Attention (QK^T * scale + mask, softmax, * V) is left as separate ops for
    now: its fused form needs the backward rule and kernel that come with the
    CUDA backend.
  }];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroAttachLoss : Pass<"zero-attach-loss", "mlir::ModuleOp"> {
  let summary = "Make @forward return the training loss";
  let description = [{
    With `loss=cross-entropy`, the first non-scalar floating-point result of
    `@forward` is taken as the logits [N..., C]; a new int64 argument `labels`
    of shape [N...] is added, and the mean cross-entropy with ignore_index -100
    (PyTorch's F.cross_entropy) becomes the first result, named "loss". The
    logits stay a result. With `loss=none`, the graph's scalar floating-point
    output must exist and is marked as the loss.
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"none\"",
           "cross-entropy or none">,
    Option<"ignoreIndex", "ignore-index", "int64_t", /*default=*/"-100",
           "label value left out of the mean">,
  ];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroPlanMemory : Pass<"zero-plan-memory", "mlir::ModuleOp"> {
  let summary = "Place every tensor of @forward in an arena at a static offset";
  let description = [{
    Liveness-based static memory planning. Globals are laid out in the state
    arena, constants in the constant arena, function arguments in the input
    arena; every other value gets an offset in the device arena, reusing the
    space of values that are dead (best fit, 64-byte aligned). Reshapes are
    views of their operand. An elementwise op writes in place into an operand
    that dies at that op and has the result's type.

    Offsets are recorded as `zero.offsets` (one per result) on each op,
    `zero.offset` on globals and arguments, and the arena sizes as module
    attributes `zero.<arena>_arena_bytes`; the device arena size is the exact
    per-rank peak of activations and temporaries.
  }];
  let options = [
    Option<"inPlace", "in-place", "bool", /*default=*/"true",
           "let elementwise ops overwrite a dying operand">,
  ];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroMixedPrecision : Pass<"zero-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Compute @forward in bfloat16 or float16 with float32 master weights";
  let description = [{
    Every float32 global stays float32 (the master copy the optimizer updates)
    and is cast to the compute type where it is loaded; float32 arguments and
    constants are cast likewise, and every op then computes on 16-bit tensors
    (the kernels accumulate in float32). The cross-entropy loss stays float32,
    and a 16-bit loss is cast back, so the loss and the gradients of the
    float32 globals (through the casts) are float32.

    `precision=bf16`: no loss scaling (bfloat16 has float32's exponent range).

    `precision=fp16`: float32 constants beyond float16's range saturate to
    +-65504 (masks built from float32's lowest value stay finite, so that
    0 * mask is 0, not NaN), and the module gets a `zero.loss_scaling`
    attribute with DeepSpeed's fp16 settings. zero-autodiff then seeds the
    backward with a runtime `loss_scale` input and zero-optimizer unscales,
    detects overflow and skips the step in place (see there); the trainer
    updates the scale as DeepSpeed's DynamicLossScaler does.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"bf16\"",
           "bf16 or fp16">,
    Option<"lossScale", "loss-scale", "double", /*default=*/"0.0",
           "fp16: a static loss scale; 0 = dynamic (DeepSpeed's fp16.loss_scale)">,
    Option<"initialScalePower", "initial-scale-power", "int64_t", /*default=*/"16",
           "fp16: the dynamic scale starts at 2^this">,
    Option<"lossScaleWindow", "loss-scale-window", "int64_t", /*default=*/"1000",
           "fp16: steps without overflow before the scale doubles">,
    Option<"hysteresis", "hysteresis", "int64_t", /*default=*/"2",
           "fp16: overflows tolerated before the scale halves">,
    Option<"consecutiveHysteresis", "consecutive-hysteresis", "bool", /*default=*/"false",
           "fp16: refill the hysteresis after every step without overflow">,
    Option<"minLossScale", "min-loss-scale", "double", /*default=*/"1.0",
           "fp16: the scale never goes below this">,
  ];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroAutodiff : Pass<"zero-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of @forward into @micro_step";
  let description = [{
    Builds `@micro_step`: the forward computation of `@forward` up to its loss,
    then the backward pass, accumulating the gradient of every trainable
    global `@p` into a new zero-initialized global `@p.grad` (role grad).
    Gradients of a value used several times (tied weights) add up; frozen
    globals and integer values get none. The seed is 1/grad-accum, so that
    the gradients accumulated over grad-accum micro-steps are those of the mean
    loss of the global batch. With a `zero.loss_scaling` module attribute
    (fp16), @micro_step takes a float32 scalar input `loss_scale` and the seed
    is loss_scale/grad-accum: the gradients are accumulated scaled. Each op's rule is in Autodiff.cpp; an op without
    one is an error at its ONNX location.
  }];
  let options = [
    Option<"gradAccum", "grad-accum", "int64_t", /*default=*/"1",
           "micro-steps per optimizer step (scales the seed)">,
  ];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroOptimizer : Pass<"zero-optimizer", "mlir::ModuleOp"> {
  let summary = "Build @apply: clipping by global norm and AdamW (or SGD) on every parameter";
  let description = [{
    Creates `@apply(lr) -> grad_norm`: increments the step counter (a global of
    role step), computes the global L2 norm of the accumulated gradients
    (before clipping; it is the program's output), scales them by
    min(1, grad-clip / (norm + 1e-6)) when grad-clip > 0 (PyTorch's
    clip_grad_norm_), applies `zero.adamw` to each parameter with its moments
    (new globals of roles adam_m and adam_v) and zeroes the gradients. The
    learning rate is a runtime input, so schedules need no recompilation.

    With `zero.loss_scaling` (fp16), `@apply(lr, loss_scale) -> (grad_norm,
    overflow)`: the norm is that of the unscaled gradients; overflow is 1 when
    it is not finite (an inf or NaN anywhere), and then the step counter stays,
    every optimizer op gets `skip` and leaves parameters and state untouched
    (in place, no host round trip); the gradients are zeroed either way. The
    unscale 1/loss_scale is folded into the clipping coefficient.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "adamw or sgd (with momentum)">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0", "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "SGD Nesterov momentum">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"epsilon", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.01",
           "decoupled weight decay">,
    Option<"gradClip", "grad-clip", "double", /*default=*/"0.0",
           "clip gradients to this global L2 norm (0: no clipping)">,
  ];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

#endif // ZCC_TRANSFORMS_PASSES_TD
