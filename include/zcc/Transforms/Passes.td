//===- Passes.td - zero dialect passes ---------------------*- tablegen -*-===//
#ifndef ZCC_TRANSFORMS_PASSES_TD
#define ZCC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def ZeroTrainingConfig : Pass<"zero-training-config", "mlir::ModuleOp"> {
  let summary = "Records the step's precision, target and training settings on the module";
  let description = [{
    The first pass of zero-training-pipeline. Sets `zero.precision` and
    `zero.target`, which later passes and the plan writer read, and with
    `train`, `zero.training`: the trainer's settings (learning rate,
    optimizer and its hyper-parameters, clipping, gradient accumulation and
    the DeepSpeed scheduler, if any) that the plan carries to zrun.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"", "fp32, bf16 or fp16">,
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"", "cpu or cuda">,
    Option<"train", "train", "bool", /*default=*/"false", "record zero.training">,
    Option<"gradAccum", "grad-accum", "int64_t", /*default=*/"1", "micro-steps per step">,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "base learning rate">,
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"", "adamw or sgd">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"epsilon", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.01", "weight decay">,
    Option<"gradClip", "grad-clip", "double", /*default=*/"0.0", "global norm clip (0: off)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"\"",
           "a DeepSpeed scheduler (WarmupLR, WarmupDecayLR, WarmupCosineLR) or empty">,
    Option<"scheduleLr", "schedule-lr", "double", /*default=*/"0.0", "the schedule's peak lr">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"1000", "warmup steps">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"-1", "total steps (-1: auto)">,
    Option<"warmupMinLr", "warmup-min-lr", "double", /*default=*/"0.0", "warmup's first lr">,
    Option<"warmupLog", "warmup-log", "bool", /*default=*/"true", "logarithmic warmup">,
    Option<"warmupMinRatio", "warmup-min-ratio", "double", /*default=*/"0.0",
           "WarmupCosineLR's first lr ratio">,
    Option<"cosMinRatio", "cos-min-ratio", "double", /*default=*/"1e-4",
           "WarmupCosineLR's last lr ratio">,
  ];
}

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
    - masked softmax: softmax(x + mask) over the last axis, with PyTorch's
                   SDPA NaN guard where(p != p, 0, p) after it -> bias_softmax

    The two GEMMs of attention (QK^T, * V) stay separate ops.
  }];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroPadGemms : Pass<"zero-pad-gemms", "mlir::ModuleOp"> {
  let summary = "Pad GEMMs with an odd number of output columns (a vocabulary)";
  let description = [{
    cuBLASLt's fast kernels want 16-byte aligned rows; a 16-bit output with
    50257 columns (GPT-2's vocabulary) has 2-byte aligned rows and runs at a
    fraction of the GEMM rate, in the forward and both backward GEMMs. For a
    matmul in @forward whose output has at least `min-columns` columns, not a
    multiple of `multiple`, the right operand gets zero columns (rows, when it
    is transposed) up to the multiple, and a slice takes the real columns from
    the result: the padded columns are zero and their gradient is dropped, so
    the values are those of the unpadded product. zcc runs it for --target cuda.
  }];
  let options = [
    Option<"multiple", "multiple", "int64_t", /*default=*/"64", "pad columns to a multiple of this">,
    Option<"minColumns", "min-columns", "int64_t", /*default=*/"4096",
           "pad only outputs at least this wide">,
  ];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroFuseAttention : Pass<"zero-fuse-attention", "mlir::ModuleOp"> {
  let summary = "Fuse scaled dot-product attention into zero.attention (flash attention)";
  let description = [{
    In @forward, before differentiation: `matmul(bias_softmax(matmul(q' * a,
    k'^T * b), mask), v')`, where q', k', v' are [B, S, H, D] projections
    with their heads transposed out ([0, 2, 1, 3]) and a, b constant scalars,
    becomes `zero.attention(q, k, v, mask) {scale = a * b}` on the untransposed
    projections; the transpose of its result back to [B, S, H, D] goes too.
    k' and v' repeated per query-head group (transformers' repeat_kv:
    reshape, expand, reshape) become grouped-query attention on the
    unrepeated [B, S, Hk, D] heads: no copy of the repeated heads, and the
    backward's dk, dv come out per shared head.
    The [B, H, Sq, Sk] scores and probabilities are never stored; the
    backward recomputes them (zero.attention_grad). A mask that depends on a
    trainable parameter, a head dimension above `max-head-dim`, or
    probabilities read elsewhere keep the unfused form. zcc runs it for
    --target cuda.

    With `documents` (the name of an integer [B, S] input of @forward: zcc
    --per-document's position_ids), every attention must fuse with a causal
    structural mask over S tokens, and each takes the positions operand
    (query i sees keys j >= i - positions[b, i], its document's); an
    attention that does not fuse, or whose mask is not causal, is an error
    naming it, since its documents would see each other.
  }];
  let options = [
    Option<"maxHeadDim", "max-head-dim", "int64_t", /*default=*/"256",
           "fuse only heads of at most this many elements">,
    Option<"documents", "documents", "std::string", /*default=*/"\"\"",
           "the @forward input of per-document positions (zcc --per-document)">,
  ];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroPropagateTransposes : Pass<"zero-propagate-transposes", "mlir::ModuleOp"> {
  let summary = "Sink transposes below layout-agnostic ops until they cancel";
  let description = [{
    In @forward, before differentiation: a transpose that feeds an
    elementwise op (or a cast), a slice or a concatenation moves below it
    (the op then works in the untransposed layout: the slice's bounds and
    the concatenation's axis permuted, the op's other operands permuted too
    where that moves no data: transposed by the same permutation, scalars, or
    tables whose permutation only moves unit dimensions). Transposes that
    meet their inverse compose to the identity and vanish (Llama's RoPE in
    [B, H, S, D] between the head transposes and fused attention's transposes
    back). The rewrite is kept only if it lowers the number of elements
    transposed (the module records `zero.transposed_elements` = [before,
    after]); elementwise results are unchanged bit for bit. Autodiff then
    differentiates the transpose-free forward.
  }];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroFuseEpilogues : Pass<"zero-fuse-epilogues", "mlir::ModuleOp"> {
  let summary = "Fold a matmul's bias add (matmul_bias) and bias gradient (matmul_bgrad) into the GEMM";
  let description = [{
    After differentiation (the plan's programs are final): `add(matmul(a, b),
    bias)` with a [N] bias over the result's last dimension, the matmul used
    only there, becomes `zero.matmul_bias` — a cuBLASLt bias epilogue on the
    GPU, the same float additions as the separate add on the CPU. A 2-D
    `matmul(x, dy) {transpose_lhs}` and a `reduce sum dy [0]` of the same dy
    (a linear layer's weight and bias gradients) become `zero.matmul_bgrad`:
    cuBLASLt's bias-gradient epilogue on the GPU, the same GEMM and column
    sums as the separate ops on the CPU. With `gelu` (--target cuda): a
    tanh-GELU after a matmul_bias becomes `zero.matmul_bias_gelu` (cuBLASLt
    GELU_AUX_BIAS, the pre-activation kept for the backward), and
    `gelu_grad(pre, matmul(..))` becomes `zero.matmul_gelu_grad` (DGELU).
    With `add` (--target cuda): `add(matmul(a, b), r)` with r of the
    result's type, defined before the matmul, becomes `zero.matmul_add`
    (cuBLASLt with beta = 1): the residual stream's add after a projection,
    the backward's sums of input gradients (dx of q, k and v; of gate and up).
    Also with `add`: `add(x, gather_grad(i, dy))` becomes gather_grad with x
    as its addend (a tied embedding's gradient: the output projection's plus
    the embedding's scatter-add, computed in place on x's memory), and
    `cross_entropy` with `cross_entropy_grad` of the same logits and labels
    becomes one cross_entropy_grad with the loss as its second result, at the
    loss's place (one read of the logits; its dloss must be a constant).
  }];
  let options = [
    Option<"gelu", "gelu", "bool", /*default=*/"false",
           "also fold tanh-GELU and its gradient into GEMM epilogues (--target cuda)">,
    Option<"add", "add", "bool", /*default=*/"false",
           "also fold an add of a result-shaped addend into the GEMM (beta = 1; --target cuda)">,
  ];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroFuseElementwise : Pass<"zero-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Fuse trees of elementwise ops, slices and concatenations into generated GPU kernels";
  let description = [{
    A tree of elementwise arithmetic (add, sub, mul, div, neg), unary
    functions (abs, exp, log, sqrt, rsqrt, reciprocal, tanh, erf, sigmoid,
    relu, SiLU, cos, sin, GELU), float casts, unit-stride slices and
    concatenations becomes one `zero.elementwise` (--target cuda): leaves
    broadcast to their reader's shape; an intermediate value joins when
    every reader of it is in the tree, and is computed where each reads it
    (RoPE's rotate-half: `concat(-x[.., D/2:], x[.., :D/2])` becomes reads
    of x at shifted coordinates and a select, in the kernel that multiplies
    and adds). With `codegen` its kernel is generated: a gpu.func lowered by
    convert-gpu-to-nvvm (the unary functions through libdevice) and
    gpu-module-to-binary (format isa, chip sm_90) to PTX, kept in the op's
    `ptx` attribute and in the plan. Each step rounds to the type its tensor
    had, as the separate kernels did.
  }];
  let options = [
    Option<"codegen", "codegen", "bool", /*default=*/"true",
           "generate each fused op's PTX (off: fusion only, for IR tests)">,
  ];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect",
                           "mlir::gpu::GPUDialect", "mlir::LLVM::LLVMDialect",
                           "mlir::NVVM::NVVMDialect", "mlir::arith::ArithDialect",
                           "mlir::scf::SCFDialect", "mlir::cf::ControlFlowDialect",
                           "mlir::math::MathDialect"];
}

def ZeroFuseOptimizer : Pass<"zero-fuse-optimizer", "mlir::ModuleOp"> {
  let summary = "The passes over memory around AdamW folded into it: copies, norm, scale";
  let description = [{
    Two passes over every parameter or gradient that AdamW, which reads and
    writes them all anyway, can do as it goes:

    - Parameter copies (bf16/fp16): mixed precision casts each float32
      parameter to 16 bits where a program reads it, at the start of every
      micro-step (4 bytes read and 2 written a parameter). Where `@apply`
      stores a bucket straight from `zero.adamw` (stages 0-2 on one rank, no
      offload), a `param_copy` global beside the bucket (`BUCKET.copy`, and
      `MEMBER.copy` at each member's offset) holds the copies; the AdamW
      writes them (its copy result) and the programs' casts of the members
      become loads of their copies. A new program `@refresh` casts the
      buckets into their copies: the runtime runs it after anything writes
      the state from outside the programs (the initial values, `--weights`, a
      resumed checkpoint). The same values as the casts.
    - The gradient norm: a `reduce sum_squares` of exactly the gradient an
      AdamW reads, where nothing the AdamW reads depends on it (no clipping,
      no fp16 overflow test: the norm is only reported), is formed by the
      AdamW as it reads the gradient (its `sum_squares` result); what reads
      it moves after the AdamW. The same sum in another order on the GPU (the
      CPU keeps the reduce's order and bits).
    - The gradient's scale: an AdamW reading `mul(cast?(g), coef)`, coef a
      scalar (clipping's factor, fp16's unscaling), reads g with `scale coef`
      instead: the same products, no float32 copy of the gradients.
  }];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroOptimizerInBackward : Pass<"zero-optimizer-in-backward", "mlir::ModuleOp"> {
  let summary = "Each parameter's AdamW update inside the micro-step, once its gradient is final";
  let description = [{
    Where a step is one micro-step on one rank and nothing in `@apply` needs
    every gradient before any update (no accumulation, no clipping, no fp16
    loss scale, no offload, one rank), `@apply`'s bucket-wide AdamW becomes
    one AdamW per bucket member inside `@micro_step`, placed after the
    member's gradient is formed and after the last read of the member's
    parameter (through views): PyTorch's optimizer-in-backward, applied by
    the compiler. The gradient bucket goes: each gradient lives from its GEMM
    to its update (the peak drops by up to the bucket's bytes), and
    `@micro_step` takes the step's `lr` and returns `grad_norm` (the square
    root of the members' sums of squares, added in member order); `@apply`
    is left empty. The updates are elementwise: the parameters and moments
    are the bits the bucket-wide update writes; the norm adds the same
    squares in another order.

    With `async` (the CUDA target), each update is marked `async` and runs
    on a second stream beside the backward's GEMMs. Updates placed at one op
    form a group; the `zero.wait`s on a group (which keep its gradients
    alive) go before the first later group that starts after enough GEMM
    FLOPs to hide the group's updates (2 x 28 x 170 a parameter), or before
    the norm.
  }];
  let options = [
    Option<"async", "async", "bool", "false",
           "run the updates on a second stream (zero.adamw async + zero.wait)">,
  ];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroGroupCasts : Pass<"zero-group-casts", "mlir::ModuleOp"> {
  let summary = "One launch for mixed precision's per-parameter casts (cast_many, cast_concat)";
  let description = [{
    After differentiation: a run of float casts of one source and one target
    type (the fp32 -> bf16 copies of every parameter at the start of a
    step), with nothing between them that reads their results, becomes one
    `zero.cast_many` where the last of them was; a 1-D `concat` along axis 0
    whose pieces are flattened casts (the bf16 -> fp32 gradients packed into
    a bucket) becomes one `zero.cast_concat`, pieces already of the result's
    type copied as they are. The same conversions, element for element.
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
    logits stay a result. `logits=NAME` takes the output NAME instead. With
    `loss=none`, the graph's scalar floating-point output must exist and is
    marked as the loss. Each `aux-loss=NAME=COEF` adds COEF times the scalar
    output NAME to the loss (a mixture of experts' load-balancing loss); the
    sum becomes a new first result "loss".
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"none\"",
           "cross-entropy or none">,
    Option<"logits", "logits", "std::string", /*default=*/"\"\"",
           "the output cross-entropy reads (default: the first float one of rank >= 1)">,
    ListOption<"auxLoss", "aux-loss", "std::string",
               "NAME=COEF: add COEF x the scalar output NAME to the loss">,
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

def ZeroRecompute : Pass<"zero-recompute", "mlir::ModuleOp"> {
  let summary = "Activation checkpointing: recompute forward values in the backward";
  let description = [{
    Rewrites `@micro_step` (after zero-autodiff) so that forward values the
    backward reads are recomputed just before the backward first needs them,
    instead of living from the forward to the backward.

    `layer`: each repeated block (the forward ops between the first uses of
    parameters named `...<prefix>.<N>....`, e.g. `transformer.h.3`,
    `model.layers.7`) is a segment; its inputs are the checkpoints (kept), and
    the ops of the segment that the backward needs are cloned, in order, before
    the segment's backward begins (HuggingFace's gradient_checkpointing,
    DeepSpeed's activation checkpointing).

    `selective`: cheap ops (elementwise, casts, layout, norms) are recomputed
    from values the backward keeps anyway (matmul outputs stay saved), each
    before its first backward use, through at most 8 ops.

    Recomputation runs the same kernels on the same inputs: the trajectory is
    bit-identical to the plain plan's.
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"none\"",
           "none, layer or selective">,
  ];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroPartition : Pass<"zero-partition", "mlir::ModuleOp"> {
  let summary = "ZeRO stages 0-3 over world-size data-parallel ranks: flat buckets, sharding, collectives";
  let description = [{
    Runs after zero-autodiff and before zero-optimizer. The trainable
    parameters are packed, in the order @micro_step first uses them, into flat
    buckets of at most reduce-bucket-size elements (and allgather-bucket-size
    for stages 1-2); every parameter starts 64-byte aligned in its bucket and
    a bucket is padded to a multiple of 16 x world-size elements, so that each
    rank's shard is whole and aligned (DeepSpeed's contiguous_gradients).

    Per bucket @zero.bucketK:
    - parameters: replicated (stages 0-2, and stage-3 parameters smaller than
      param-persistence-threshold): the parameter globals live inside the flat
      bucket (`bucket`, `bucket_offset`), so loads are unchanged and the
      optimizer updates them through the bucket. Partitioned (stage 3): the
      bucket is a per-rank shard (`shard_of`) and the parameter globals go
      away; @forward and @micro_step all-gather the bucket before its first
      use in the forward, and again before its first use in the backward, and
      read the parameters as views of the gathered bytes, which die after
      their last use (released).
    - gradients: the per-parameter gradients of a micro-step are packed into
      the flat layout (DeepSpeed's IPG bucket, a temporary); stages 0-1 add
      them to a full accumulator @zero.bucketK.grad, stages 2-3 reduce-scatter
      (average) them and add this rank's shard to a shard accumulator.
    The module gets `zero.partition` (stage, world size, comm dtype) and
    `zero.buckets` (per bucket: its globals and what is sharded), which
    zero-optimizer reads: stage 0 all-reduces the gradients in @apply, stage 1
    reduce-scatters them there, stages 1-3 keep optimizer state for the rank's
    shard only. With world-size 1 no collective is emitted.

    comm-dtype bf16|fp16 (DeepSpeed's communication_data_type, FSDP2's
    reduce_dtype and param_dtype): gradient reductions move the packed
    gradients in that type (pieces that are widenings of it are packed as
    they are) and widen the result into the float32 accumulator; stage-3
    all-gathers move the shard rounded to that type, and the parameters
    become views of the 16-bit bytes: a use that casts the parameter to that
    type reads the view (the same values the float32 gather gave), any other
    use its widening. The gradient norm's scalar stays float32.

    Mixed precision at stages 1-3 on several ranks (every load of a
    replicated bucket's members cast to one 16-bit type: `--precision
    bf16|fp16`, stages 1-2 and stage 3's persistent buckets), as DeepSpeed's
    bf16/fp16 optimizers: the bucket global becomes the rank's float32
    master shard (`shard_of`, like a stage-3 shard) and a `param_copy` global
    `@zero.bucketK.copy` holds the whole 16-bit working bucket on every rank;
    the programs read the members as views of the copy. zero-optimizer
    updates the master shard, writes its 16-bit copy and all-gathers it
    (16-bit bytes), and a `refresh` program rebuilds the copy from the
    masters whenever the state is written from outside the programs.

    Gradient buckets hold 16 bits where that loses nothing or the
    accumulation type says so: a step of one micro-step whose gradients are
    all widenings of one 16-bit type stores them as they are; otherwise the
    accumulator (whole at stages 0-1, the rank's shard at stages 2-3) has
    grad-accum-dtype's type.

    A mesh splits the ranks into groups of consecutive ranks (a node's); the
    collectives over a group, or across the groups, say so (`in group`,
    `in across`). mics-shard-size G (MiCS, FSDP's HYBRID_SHARD): the state
    is sharded over the G ranks of a group and each group holds a whole copy;
    a gradient reduce-scatter runs in the group and the shard is then
    all-reduced across the groups; parameter gathers stay in the group.
    hpz-partition-size G (ZeRO++ hpZ, stage 3): the state stays sharded over
    every rank; the forward's gather over every rank keeps the group's chunk
    of the bucket (local_shard in group), from which the backward gathers it
    back inside the group.
  }];
  let options = [
    Option<"stage", "stage", "int64_t", /*default=*/"0", "ZeRO stage 0, 1, 2 or 3">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1", "data-parallel ranks">,
    Option<"reduceBucketSize", "reduce-bucket-size", "int64_t", /*default=*/"500000000",
           "elements per gradient bucket (DeepSpeed's reduce_bucket_size; -1: auto, H^2 for "
           "hidden size H)">,
    Option<"allgatherBucketSize", "allgather-bucket-size", "int64_t", /*default=*/"500000000",
           "elements per parameter all-gather, stages 1-2 (allgather_bucket_size; -1: auto, "
           "H^2)">,
    Option<"persistenceThreshold", "param-persistence-threshold", "int64_t",
           /*default=*/"100000",
           "stage 3: parameters with fewer elements stay whole on every rank "
           "(stage3_param_persistence_threshold; -1: auto, 10 H)">,
    Option<"commDtype", "comm-dtype", "std::string", /*default=*/"\"fp32\"",
           "the element type collectives move: fp32, bf16 or fp16 "
           "(communication_data_type)">,
    Option<"gradAccumDtype", "grad-accum-dtype", "std::string", /*default=*/"\"auto\"",
           "what gradients accumulate in across micro-steps: fp32, bf16, fp16, or auto "
           "(DeepSpeed's data_types.grad_accum_dtype: the 16-bit type of a mixed-precision "
           "model, float32 for bf16 at stage 0 and for float32 models)">,
    Option<"maxReuseDistance", "max-reuse-distance", "int64_t", /*default=*/"1000000000",
           "stage 3: a forward copy of a partitioned parameter (a 16-bit cast) the backward "
           "reads again is recomputed from a backward gather when more parameter elements "
           "are used between the two (stage3_max_reuse_distance)">,
    Option<"quantizedWeights", "quantized-weights", "bool", /*default=*/"false",
           "ZeRO++ qwZ, stage 3: the gathers of partitioned parameters over every rank (or a "
           "MiCS group) move blockwise int8 values and float32 scales, dequantized on arrival "
           "(zero_quantized_weights)">,
    Option<"quantizedGradients", "quantized-gradients", "bool", /*default=*/"false",
           "ZeRO++ qgZ, stages 1-3: gradient reduce-scatters move blockwise int8 values and "
           "float32 scales through all-to-alls, summed in float32 on arrival; hierarchical "
           "(within the group, then across) under hpZ (zero_quantized_gradients)">,
    Option<"quantizedGradientBits", "quantized-gradient-bits", "int64_t", /*default=*/"8",
           "qgZ's bits per gradient value: 8, or 4 (two a byte, as DeepSpeed's qgZ)">,
    Option<"micsShardSize", "mics-shard-size", "int64_t", /*default=*/"0",
           "MiCS / HSDP, stages 1-3: shard the state over groups of this many consecutive "
           "ranks and replicate it across the groups (mics_shard_size; 0: off)">,
    Option<"hpzPartitionSize", "hpz-partition-size", "int64_t", /*default=*/"0",
           "hpZ, stage 3: the backward re-gathers parameters from a secondary shard over "
           "groups of this many consecutive ranks (zero_hpz_partition_size; 0: off)">,
  ];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroOffload : Pass<"zero-offload", "mlir::ModuleOp"> {
  let summary = "ZeRO-Offload: optimizer state and update in pinned host memory";
  let description = [{
    DeepSpeed's `offload_optimizer: {device: cpu}` (stages 1-3): the optimizer
    moments (`adam_m`, `adam_v` globals) move to the host arena, and every
    optimizer update of `@apply` runs on the host: its device operands (the
    parameter and gradient shards, the step, the lr and the clip/skip
    scalars) are copied to the host first (`zero.transfer`), the updated
    parameter shard is copied back before it is gathered or stored. The
    update is the same kernel on the same values: trajectories are identical
    to the plain plan's on the CPU backend.

    `device=nvme` (ZeRO-Infinity): the moments live in the NVMe arena (a
    swap file per rank under `nvme-path`) instead: the update reads them
    into host temporaries (`zero.transfer` marked `zero.nvme`, a copy from
    the file) and its new moments are written back (a transfer into the
    NVMe global); the rest is the cpu offload's.

    `param=nvme` (stage 3): the partitioned parameter shards live in the NVMe
    arena too. Every program reads a shard from the file into a host
    temporary and copies it to the device before its all-gather (the read
    issued one read ahead, async); `@apply` reads it for the host update and
    writes the new shard back (in chunks, with the moments, when chunked).
  }];
  let options = [
    Option<"device", "device", "std::string", /*default=*/"\"none\"", "none, cpu or nvme">,
    Option<"nvmePath", "nvme-path", "std::string", /*default=*/"\"\"",
           "device=nvme: the directory of the swap files (zrun --nvme-path overrides)">,
    Option<"nvmeBlockSize", "nvme-block-size", "int64_t", /*default=*/"0",
           "device=nvme: bytes a read or write request (0: the runtime's 1 MiB)">,
    Option<"nvmeQueueDepth", "nvme-queue-depth", "int64_t", /*default=*/"0",
           "device=nvme: requests in flight (0: the runtime's 8)">,
    Option<"nvmeChunk", "nvme-chunk", "int64_t", /*default=*/"16777216",
           "device=nvme: elements an update chunk (DeepSpeed's sub_group_size): each "
           "chunk's moments are read while the previous chunk updates, and written back "
           "while the next one does">,
    Option<"param", "param", "std::string", /*default=*/"\"none\"",
           "offload_param: none, cpu or nvme (stage 3: partitioned parameter shards live on "
           "the host, copied to the device before each all-gather, which prefetch moves "
           "ahead; nvme: in the swap file, read into host memory first)">,
  ];
  let dependentDialects = ["zcc::zero::ZeroDialect", "mlir::func::FuncDialect"];
}

def ZeroSchedule : Pass<"zero-schedule", "mlir::ModuleOp"> {
  let summary = "Split collectives into start/wait and, with overlap-comm, overlap them with compute";
  let description = [{
    Every all_reduce, reduce_scatter, all_gather and all_to_all becomes
    `async` (its start) followed by a `zero.wait` that the uses read through.
    - Without overlap-comm each wait follows its start at once.
    - With overlap-comm (DeepSpeed's overlap_comm): a wait moves down to just
      before the first use of the result; a gradient reduce-scatter's wait
      (and the accumulation that reads it) moves down to the next
      reduce-scatter's start or the end, so that a bucket's reduction overlaps
      the backward of the next bucket, with at most two IPG buckets alive
      (qgZ: what follows the quantized gradient's first all-to-all - its
      dequantization, a second level, the accumulation - moves alike); a
      stage-3 parameter all-gather's start moves up (prefetch) to just after
      the wait of an earlier all-gather, as far as the gathers started but
      not yet used stay within prefetch-bucket-size and max-live-parameters
      elements (stage3_prefetch_bucket_size, stage3_max_live_parameters).
    The lit tests show the resulting order.
  }];
  let options = [
    Option<"overlapComm", "overlap-comm", "bool", /*default=*/"false",
           "overlap communication with compute (DeepSpeed's overlap_comm)">,
    Option<"prefetchBucketSize", "prefetch-bucket-size", "int64_t", /*default=*/"50000000",
           "elements of parameters gathered ahead of their use (stage3_prefetch_bucket_size; "
           "-1: auto, 0.9 H^2 for hidden size H)">,
    Option<"maxLiveParameters", "max-live-parameters", "int64_t", /*default=*/"1000000000",
           "elements of gathered parameters alive at once (stage3_max_live_parameters)">,
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
