//===- ZeroOps.td - zero dialect operations ----------------*- tablegen -*-===//
//
// Compute ops follow ONNX/NumPy semantics where they overlap (broadcasting,
// Gather, MatMul batch dims) so that the importer is a direct translation, and
// carry only static attributes: every shape is known after import.
//
// Size: one definition per op, as MLIR dialects keep their ops in one file.
// Splitting it by family (state, layout, elementwise, fused,
// collectives) into included .td files is open in issue 51 (the dialect's
// discardable attributes are declared in ZeroDialect.td, its attributes in
// ZeroAttrs.td).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_OPS_TD
#define ZERO_OPS_TD

include "ZeroDialect.td"
include "ZeroAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Zero_Op<string mnemonic, list<Trait> traits = []>
    : Op<Zero_Dialect, mnemonic, traits>;

def Zero_FloatTensor : RankedTensorOf<[AnyFloat]>;
// What an all-gather moves: floats, or qwZ's blockwise int8 values.
def Zero_GatherTensor : RankedTensorOf<[AnyFloat, I8, I64]>; // int64: expert choices (EP)
def Zero_BoolTensor : RankedTensorOf<[I1]>;
def Zero_IndexTensor : RankedTensorOf<[I32, I64]>;

// A 64-bit integer attribute read as int64_t (MLIR's I64Attr reads uint64_t;
// axes and ignore indices are signed).
def Zero_I64Attr : TypedSignlessIntegerAttrBase<I64, "int64_t", "64-bit integer attribute"> {
  let convertFromStorage = "$_self.getValue().getSExtValue()";
}

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

def Zero_GlobalOp : Zero_Op<"global", [Symbol]> {
  let summary = "module-level training state";
  let description = [{
    A named tensor of the training state: a parameter, a frozen buffer, or
    (after later passes) a gradient, master weight or optimizer moment. The
    optional initial value holds the imported initializer.

    ```mlir
    zero.global @fc1.weight param trainable : tensor<128x64xf32> = dense_resource<w> : tensor<128x64xf32>
    ```

    After zero-partition:
    - `bucket = @b, bucket_offset = K`: the global's bytes are elements
      [K, K + numel) of the flat global @b (a parameter inside its ZeRO
      bucket); it keeps its own initial value.
    - `shard_of = N`: a per-rank shard. The initial value holds all N
      elements; rank r of W keeps elements [r*N/W, (r+1)*N/W), and the global's
      type is that shard's.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Zero_GlobalRole:$role,
                       UnitAttr:$trainable, TypeAttrOf<AnyRankedTensor>:$type,
                       OptionalAttr<ElementsAttr>:$initial_value,
                       OptionalAttr<FlatSymbolRefAttr>:$bucket,
                       OptionalAttr<Zero_I64Attr>:$bucket_offset,
                       OptionalAttr<Zero_I64Attr>:$shard_of);
  let assemblyFormat = [{
    $sym_name $role (`trainable` $trainable^)? attr-dict `:` $type
    (`=` $initial_value^)?
  }];
  let hasVerifier = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$name, "GlobalRole":$role, "bool":$trainable,
      "::mlir::Type":$type, "::mlir::ElementsAttr":$initial_value), [{
    build($_builder, $_state, name, role, trainable, ::llvm::cast<::mlir::RankedTensorType>(type),
          initial_value, ::mlir::FlatSymbolRefAttr(), ::mlir::IntegerAttr(),
          ::mlir::IntegerAttr());
  }]>];
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def Zero_LoadOp : Zero_Op<"load", [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
                                    MemoryEffects<[MemRead]>]> {
  let summary = "read a global";
  let arguments = (ins FlatSymbolRefAttr:$global);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$global attr-dict `:` type($result)";
}

def Zero_StoreOp : Zero_Op<"store", [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
                                      MemoryEffects<[MemWrite]>]> {
  let summary = "write a global";
  let arguments = (ins AnyRankedTensor:$value, FlatSymbolRefAttr:$global);
  let assemblyFormat = "$value `,` $global attr-dict `:` type($value)";
}

def Zero_FillOp : Zero_Op<"fill", [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
                                    MemoryEffects<[MemWrite]>]> {
  let summary = "set every element of a global to a value (e.g. reset gradients)";
  let arguments = (ins FlatSymbolRefAttr:$global, F64Attr:$value);
  let assemblyFormat = "$global `,` $value attr-dict";
}

//===----------------------------------------------------------------------===//
// Constants, casts and shape manipulation
//===----------------------------------------------------------------------===//

def Zero_ConstantOp : Zero_Op<"constant", [ConstantLike, Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "constant tensor";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Zero_CastOp : Zero_Op<"cast", [Pure, SameOperandsAndResultShape]> {
  let summary = "element type conversion (ONNX Cast)";
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
}

def Zero_ElementwiseOp : Zero_Op<"elementwise", [Pure]> {
  let summary = "a fused tree of elementwise ops, slices and concatenations: one generated kernel";
  let description = [{
    Formed by zero-fuse-elementwise (--target cuda) from a tree of elementwise
    arithmetic, unary functions (exp, SiLU, sigmoid, GELU, ...), float casts,
    unit-stride slices and concatenations whose intermediate values nothing
    outside the tree reads. `program` is a list of steps, four integers each:
    (opcode, a, b, c), the opcodes of zrt::ElementwiseOpcode
    (runtime/kernels/KernelId.h). A load (6) reads input a at the result
    element's coordinates shifted by `offsets[c..c+rank)` (c = -1: no
    shift), clamped into the input, which broadcasts NumPy-style; slices
    and concatenations become these shifts. A pick (7) is a concatenation's
    seam: step a where the coordinate on axis `offsets[c]` is below
    `offsets[c+1]`, else step b. The other steps read earlier steps a (and
    b; -1 for none, and c is -1). `step_types[i]` is the element type step
    i's value had as a tensor: each step computes in f32 and rounds to it,
    so the fused kernel computes what the separate ones did. The last step
    is the result; with several results (sibling trees over shared inputs
    merged into one kernel: each input read once), `outputs` names the step
    each result stores, and the results share one shape. `ptx` holds the
    kernel generated for it through MLIR's GPU -> NVVM -> PTX path (sm_90),
    entry `zcc_elementwise(inputs..., results..., n)`.
  }];
  let arguments = (ins Variadic<Zero_FloatTensor>:$inputs, DenseI64ArrayAttr:$program,
                       TypeArrayAttr:$step_types,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$offsets,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$outputs,
                       OptionalAttr<StrAttr>:$ptx);
  let results = (outs Variadic<Zero_FloatTensor>:$results);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $results)";
  let extraClassDeclaration = [{
    /// The step result |k| stores (the last step for a single result).
    int64_t outputStep(unsigned k) {
      return getOutputs().empty() ? (int64_t)getProgram().size() / 4 - 1 : getOutputs()[k];
    }
    /// The results' shape (they share one) and the first result's type.
    ::mlir::RankedTensorType getType() {
      return ::mlir::cast<::mlir::RankedTensorType>(getResult(0).getType());
    }
  }];
  let hasVerifier = 1;
}

def Zero_CastManyOp : Zero_Op<"cast_many", [Pure]> {
  let summary = "element type conversion of several tensors at once";
  let description = [{
    `results[i] = cast(inputs[i])`, every input of one float type and every
    result of one float type: formed by zero-group-casts from a run of
    casts (mixed precision's per-parameter fp32 -> bf16 copies), so that the
    GPU converts them in one launch rather than one per parameter.
  }];
  let arguments = (ins Variadic<Zero_FloatTensor>:$inputs);
  let results = (outs Variadic<Zero_FloatTensor>:$results);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
}

def Zero_CastConcatOp : Zero_Op<"cast_concat", [Pure]> {
  let summary = "several tensors converted and laid end to end in one flat tensor";
  let description = [{
    `concat(reshape(cast(inputs[i]), [-1]) for i, axis 0)`: the inputs are
    float tensors of any shape (each of one type or already of the result's),
    the result a 1-D float tensor of their total element count. Formed by
    zero-group-casts where mixed precision's per-parameter bf16 gradients
    are widened and packed into a gradient bucket: one launch, and no
    float32 copy of each gradient before the bucket.
  }];
  let arguments = (ins Variadic<Zero_FloatTensor>:$inputs);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
}

def Zero_ReshapeOp : Zero_Op<"reshape", [Pure]> {
  let summary = "reinterpret the shape; element count unchanged";
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Zero_TransposeOp : Zero_Op<"transpose", [Pure, InferTypeOpAdaptor]> {
  let summary = "permute dimensions: result dim i is input dim permutation[i]";
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input $permutation attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

def Zero_ExpandOp : Zero_Op<"expand", [Pure]> {
  let summary = "broadcast to the result shape (NumPy rules, ONNX Expand)";
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Zero_SliceOp : Zero_Op<"slice", [Pure, InferTypeOpAdaptor]> {
  let summary = "strided slice with static, normalized bounds";
  let description = [{
    For every dimension d: elements start[d], start[d]+stride[d], ... below
    limit[d]. Bounds are non-negative and within the dimension, strides >= 1
    (the importer normalizes ONNX's negative and clamped indices).
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit, DenseI64ArrayAttr:$stride);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `[` $start `:` $limit `:` $stride `]` attr-dict `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
}

def Zero_ConcatOp : Zero_Op<"concat", [Pure, InferTypeOpAdaptor]> {
  let summary = "concatenate along an axis";
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, Zero_I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $result)";
  let hasFolder = 1;
}

def Zero_SplitOp : Zero_Op<"split", [Pure, InferTypeOpAdaptor]> {
  let summary = "split along an axis into pieces of the given sizes";
  let arguments = (ins AnyRankedTensor:$input, Zero_I64Attr:$axis, DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($results)";
}

def Zero_GatherOp : Zero_Op<"gather", [Pure, InferTypeOpAdaptor]> {
  let summary = "take slices along an axis at integer indices (ONNX Gather; embedding lookup)";
  let description = [{
    `padding_idx` (optional) is PyTorch's nn.Embedding padding index, which
    ONNX cannot express: the lookup is unchanged, but the row at that index
    receives no gradient through this gather (zcc --padding-idx).
  }];
  let arguments = (ins AnyRankedTensor:$input, Zero_IndexTensor:$indices, Zero_I64Attr:$axis,
                       OptionalAttr<Zero_I64Attr>:$padding_idx);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `[` $indices `]` attr-dict `:` functional-type(operands, $result)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// Element k of the result depends only on element k of each (broadcast)
// operand: the memory planner may write the result into an operand that dies
// (same type), and selective recompute counts the op as cheap. A new
// elementwise op gets both by carrying the trait (ZeroOps.h).
def Zero_ElementwiseTrait : NativeOpTrait<"Elementwise"> {
  let cppNamespace = "::zcc::zero::OpTrait";
}

class Zero_UnaryOp<string mnemonic, Type ty, list<Trait> traits = []>
    : Zero_Op<mnemonic, traits # [Pure, SameOperandsAndResultType, Zero_ElementwiseTrait]> {
  let arguments = (ins ty:$input);
  let results = (outs ty:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Zero_NegOp : Zero_UnaryOp<"neg", Zero_FloatTensor> { let summary = "-x"; }
def Zero_AbsOp : Zero_UnaryOp<"abs", Zero_FloatTensor> { let summary = "|x|"; }
def Zero_ExpOp : Zero_UnaryOp<"exp", Zero_FloatTensor> { let summary = "e^x"; }
def Zero_LogOp : Zero_UnaryOp<"log", Zero_FloatTensor> { let summary = "ln x"; }
def Zero_SqrtOp : Zero_UnaryOp<"sqrt", Zero_FloatTensor> { let summary = "sqrt(x)"; }
def Zero_RsqrtOp : Zero_UnaryOp<"rsqrt", Zero_FloatTensor> { let summary = "1/sqrt(x)"; }
def Zero_ReciprocalOp : Zero_UnaryOp<"reciprocal", Zero_FloatTensor> { let summary = "1/x"; }
def Zero_TanhOp : Zero_UnaryOp<"tanh", Zero_FloatTensor> { let summary = "tanh(x)"; }
def Zero_ErfOp : Zero_UnaryOp<"erf", Zero_FloatTensor> { let summary = "erf(x)"; }
def Zero_SigmoidOp : Zero_UnaryOp<"sigmoid", Zero_FloatTensor> { let summary = "1/(1+e^-x)"; }
def Zero_ReluOp : Zero_UnaryOp<"relu", Zero_FloatTensor> { let summary = "max(x, 0)"; }
def Zero_SiluOp : Zero_UnaryOp<"silu", Zero_FloatTensor> { let summary = "x*sigmoid(x) (SwiGLU's gate)"; }
def Zero_CosOp : Zero_UnaryOp<"cos", Zero_FloatTensor> { let summary = "cos(x)"; }
def Zero_SinOp : Zero_UnaryOp<"sin", Zero_FloatTensor> { let summary = "sin(x)"; }
def Zero_NotOp : Zero_UnaryOp<"not", Zero_BoolTensor> { let summary = "logical not"; }

def Zero_GeluOp : Zero_Op<"gelu", [Pure, SameOperandsAndResultType, Zero_ElementwiseTrait]> {
  let summary = "GELU, exact (erf) or tanh-approximated";
  let arguments = (ins Zero_FloatTensor:$input, Zero_GeluApprox:$approximate);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$input $approximate attr-dict `:` type($result)";
}

def Zero_DropoutOp : Zero_Op<"dropout", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "training-mode dropout with a counter-based mask";
  let description = [{
    `result = input * keep / (1 - ratio)`, element e kept by Philox4x32-10
    (runtime/kernels/Philox.h) keyed by `rng` = [seed, position] (micro_step's
    "dropout_rng" input: zrun's --seed and the stream position of the
    micro-batch's first sample), the node's `key`, and e's sample (the
    tensor's elements split into `samples` equal runs) and place in it. The
    same (rng, key) gives the same mask: the gradient is this op on the
    incoming gradient, and a recomputed dropout equals the first. Not an
    elementwise op for the passes that move ops across layouts: the mask
    follows the element order.
  }];
  let arguments = (ins Zero_FloatTensor:$input, RankedTensorOf<[I64]>:$rng, F64Attr:$ratio,
                       Zero_I64Attr:$key, Zero_I64Attr:$samples);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$input `,` $rng attr-dict `:` type($input) `,` type($rng)";
  let hasVerifier = 1;
}

def Zero_TrainOrEvalOp : Zero_Op<"train_or_eval", [Pure, SameOperandsAndResultType]> {
  let summary = "the training value in @micro_step, the evaluation value in @forward";
  let description = [{
    PyTorch's `module.training` branch: a layer that computes differently when
    it trains (BatchNormalization's batch statistics against its running
    ones). zero-autodiff keeps `training` in @micro_step and `evaluation` in
    @forward (zcc::zero::selectMode); no later pass sees this op.
  }];
  let arguments = (ins Zero_FloatTensor:$training, Zero_FloatTensor:$evaluation);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$training `,` $evaluation attr-dict `:` type($result)";
}

// Binary ops broadcast their operands with NumPy rules; both operands have
// the same element type (the importer inserts casts where ONNX allowed none).
class Zero_BinaryOp<string mnemonic, list<Trait> traits = []>
    : Zero_Op<mnemonic, traits # [Pure, InferTypeOpAdaptor, Zero_ElementwiseTrait]> {
  let arguments = (ins AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, $result)";
}

def Zero_AddOp : Zero_BinaryOp<"add", [Commutative]> { let summary = "a + b"; let hasFolder = 1; }
def Zero_SubOp : Zero_BinaryOp<"sub"> { let summary = "a - b"; let hasFolder = 1; }
def Zero_MulOp : Zero_BinaryOp<"mul", [Commutative]> { let summary = "a * b"; let hasFolder = 1; }
def Zero_DivOp : Zero_BinaryOp<"div"> { let summary = "a / b"; let hasFolder = 1; }
def Zero_PowOp : Zero_BinaryOp<"pow"> { let summary = "a ^ b"; }
def Zero_MaxOp : Zero_BinaryOp<"max", [Commutative]> { let summary = "max(a, b)"; }
def Zero_MinOp : Zero_BinaryOp<"min", [Commutative]> { let summary = "min(a, b)"; }
def Zero_AndOp : Zero_BinaryOp<"and", [Commutative]> { let summary = "logical and (i1)"; }
def Zero_OrOp : Zero_BinaryOp<"or", [Commutative]> { let summary = "logical or (i1)"; }

def Zero_CmpOp : Zero_Op<"cmp", [Pure, InferTypeOpAdaptor]> {
  let summary = "elementwise comparison with broadcasting; i1 result";
  let arguments = (ins Zero_CmpPredicate:$predicate, AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs Zero_BoolTensor:$result);
  let assemblyFormat = "$predicate $lhs `,` $rhs attr-dict `:` functional-type(operands, $result)";
}

def Zero_WhereOp : Zero_Op<"where", [Pure, InferTypeOpAdaptor, Zero_ElementwiseTrait]> {
  let summary = "select lhs where condition is true, else rhs (broadcasting)";
  let arguments = (ins Zero_BoolTensor:$condition, AnyRankedTensor:$lhs, AnyRankedTensor:$rhs);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$condition `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, $result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions, reductions and normalizations
//===----------------------------------------------------------------------===//

def Zero_MatmulOp : Zero_Op<"matmul", [Pure, InferTypeOpAdaptor]> {
  let summary = "batched matrix product with broadcast batch dimensions";
  let description = [{
    Operands have rank >= 2; the last two dims are the matrix (optionally
    transposed), leading dims broadcast as in NumPy's matmul.
  }];
  let arguments = (ins Zero_FloatTensor:$lhs, Zero_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, $result)";
  let hasCanonicalizer = 1;
}

def Zero_MatmulBiasOp : Zero_Op<"matmul_bias", [Pure]> {
  let summary = "matmul plus a bias along the result's last dimension";
  let description = [{
    `matmul(lhs, rhs) + bias` with `bias` of shape [N] (N the result's last
    dimension), formed by zero-fuse-epilogues after differentiation: one
    kernel (a cuBLASLt bias epilogue) instead of a GEMM and a broadcast add.
  }];
  let arguments = (ins Zero_FloatTensor:$lhs, Zero_FloatTensor:$rhs, Zero_FloatTensor:$bias,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs `,` $bias attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
}

def Zero_MatmulAddOp : Zero_Op<"matmul_add", [Pure]> {
  let summary = "matmul plus an addend of the result's shape (a residual or gradient sum)";
  let description = [{
    `matmul(lhs, rhs) + addend` with `addend` of the result's type, formed by
    zero-fuse-epilogues (--target cuda) from the residual stream's adds after
    a projection and the backward's sums of input gradients: on the GPU one
    cuBLASLt GEMM with beta = 1 (the addend read as C, the sum rounded once);
    on the CPU the product rounded, then added as the add kernel does. The
    result may take the addend's bytes (zero-plan-memory) when the addend
    dies here.
  }];
  let arguments = (ins Zero_FloatTensor:$lhs, Zero_FloatTensor:$rhs, Zero_FloatTensor:$addend,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs `,` $addend attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
}

def Zero_MatmulBiasGeluOp : Zero_Op<"matmul_bias_gelu", [Pure]> {
  let summary = "a linear layer with a tanh-GELU after it, and the pre-activation kept";
  let description = [{
    `pre = matmul(lhs, rhs) + bias` and `result = gelu(pre)` (tanh
    approximation: GPT-2's gelu_new), `pre` kept for the backward's
    gelu_grad. Formed by zero-fuse-epilogues (--target cuda): on the GPU one
    cuBLASLt GEMM with the GELU_AUX_BIAS epilogue (the GELU computed on the
    float accumulator, `pre` written as the auxiliary output); on the CPU
    matmul_bias and gelu as the unfused ops compute them.
  }];
  let arguments = (ins Zero_FloatTensor:$lhs, Zero_FloatTensor:$rhs, Zero_FloatTensor:$bias,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Zero_FloatTensor:$result, Zero_FloatTensor:$pre);
  let assemblyFormat = "$lhs `,` $rhs `,` $bias attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Zero_MatmulGeluGradOp : Zero_Op<"matmul_gelu_grad", [Pure]> {
  let summary = "gelu_grad(pre, matmul(lhs, rhs)): the GEMM into a tanh-GELU's input gradient";
  let description = [{
    `gelu_grad(pre, matmul(lhs, rhs))` (tanh approximation), `pre` of the
    product's shape: the backward of a linear layer that feeds a GELU.
    Formed by zero-fuse-epilogues (--target cuda): on the GPU one cuBLASLt
    GEMM with the DGELU epilogue (GELU's derivative at `pre` applied to the
    float accumulator); on the CPU matmul and gelu_grad as the unfused ops.
  }];
  let arguments = (ins Zero_FloatTensor:$lhs, Zero_FloatTensor:$rhs, Zero_FloatTensor:$pre,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs `,` $pre attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Zero_MatmulBgradOp : Zero_Op<"matmul_bgrad", [Pure]> {
  let summary = "a linear layer's weight and bias gradients from one GEMM";
  let description = [{
    `weight = transpose(lhs) rhs` and `bias = sum(rhs, rows)` for a 2-D
    `lhs` [R, K] (the layer's input) and `rhs` [R, N] (the output's
    gradient): formed by zero-fuse-epilogues from `matmul {transpose_lhs}`
    and `reduce sum [0]` of the same gradient. On the GPU the column sums
    come from cuBLASLt's bias-gradient epilogue (BGRADA), which reduces the
    operand as the GEMM reads it; on the CPU they are the separate reduce's
    additions. `bias` is [N] or [1, N] (the reduce's keepdims).
  }];
  let arguments = (ins Zero_FloatTensor:$lhs, Zero_FloatTensor:$rhs);
  let results = (outs Zero_FloatTensor:$weight, Zero_FloatTensor:$bias);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Zero_ReduceOp : Zero_Op<"reduce", [Pure, InferTypeOpAdaptor]> {
  let summary = "reduce over axes (sum, mean, max, min, prod, sum_squares)";
  let arguments = (ins Zero_ReduceKind:$kind, AnyRankedTensor:$input,
                       DenseI64ArrayAttr:$axes, BoolAttr:$keepdims);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$kind $input $axes attr-dict `:` type($input) `->` type($result)";
}

def Zero_SoftmaxOp : Zero_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "softmax along an axis";
  let arguments = (ins Zero_FloatTensor:$input, Zero_I64Attr:$axis);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Zero_BiasSoftmaxOp : Zero_Op<"bias_softmax", [Pure]> {
  let summary = "softmax(input + bias) along the last axis, in one pass";
  let description = [{
    Attention's scores to probabilities (zero-recognize-patterns): the
    additive mask `bias` (broadcast to the input's shape, of its element
    type), the softmax along the last axis, and with `nan_to_zero` the NaN
    guard PyTorch's exported scaled_dot_product_attention puts after it
    (`where(isnan(p), 0, p)`). Its gradient is softmax_grad of its result.
  }];
  let arguments = (ins Zero_FloatTensor:$input, Zero_FloatTensor:$bias, UnitAttr:$nan_to_zero);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$input `,` $bias attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
}

def Zero_AttentionOp : Zero_Op<"attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "softmax(q k^T * scale + bias) v in one pass (flash attention)";
  let description = [{
    zero-fuse-attention's form of scaled dot-product attention. q is
    [B, Sq, H, D], k and v [B, Sk, Hk, D]: the layout the projections produce,
    heads not transposed out. Hk divides H (grouped-query attention: query
    head h reads k/v head h / (H / Hk), nothing repeats k and v); `bias` [B or 1, H or 1, Sq, Sk] is the additive
    mask. The result is [B, Sq, H, D]; `lse` [B, H, Sq] (float32) is each
    row's log-sum-exp of the scaled, biased scores, which the backward reads
    instead of the probabilities (+inf for a row whose scores are all -inf,
    so that its probabilities recompute to 0). With `nan_to_zero` such a row's
    output is 0 (PyTorch's exported NaN guard), else NaN.

    Without `bias`, the mask is structural (zero-fuse-attention proves a
    constant mask to be one): with `causal` (Sq = Sk), query i sees keys
    j <= i, and with `window` w also only j > i - w (a sliding window: the
    last w positions, itself included). Nothing of size Sq x Sk exists.

    With `softcap` c (logit soft-capping, Gemma 2's `attn_logit_softcapping`)
    each scaled score s becomes c tanh(s / c) before the mask is added; it
    takes a structural mask only (the backward recovers tanh from the
    probabilities, which a bias would hide).

    With `positions` [B, S] (integers; causal only, zcc --per-document): the
    sequences are packed documents, and position i is token positions[b, i]
    of its document (0 at a document's first token, one more at each next:
    Hugging Face's position_ids packing). Query i then sees only keys
    j >= i - positions[b, i], its own document's (with causal and window).
  }];
  let arguments = (ins Zero_FloatTensor:$q, Zero_FloatTensor:$k, Zero_FloatTensor:$v,
                       Optional<Zero_FloatTensor>:$bias, Optional<Zero_IndexTensor>:$positions,
                       F64Attr:$scale, UnitAttr:$nan_to_zero,
                       UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs Zero_FloatTensor:$result, RankedTensorOf<[F32]>:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`bias` $bias^)? (`positions` $positions^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Zero_AttentionPackedOp : Zero_Op<"attention_packed", [Pure, AttrSizedOperandSegments]> {
  let summary = "zero.attention on the packed projection qkv [B, S, 3, H, D]";
  let description = [{
    zero.attention whose q, k, v are qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]:
    the fused QKV projection as it comes out of its GEMM, so that no split
    copies it apart (and the backward writes one dqkv, no concat).
  }];
  let arguments = (ins Zero_FloatTensor:$qkv, Optional<Zero_FloatTensor>:$bias,
                       Optional<Zero_IndexTensor>:$positions, F64Attr:$scale,
                       UnitAttr:$nan_to_zero, UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs Zero_FloatTensor:$result, RankedTensorOf<[F32]>:$lse);
  let assemblyFormat = [{
    $qkv (`bias` $bias^)? (`positions` $positions^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Zero_LogSoftmaxOp : Zero_Op<"log_softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "log-softmax along an axis";
  let arguments = (ins Zero_FloatTensor:$input, Zero_I64Attr:$axis);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Zero_LayerNormOp : Zero_Op<"layer_norm", [Pure]> {
  let summary = "layer normalization over the trailing dims from `axis`";
  let description = [{
    y = (x - mean) / sqrt(var + epsilon) * scale + bias, statistics over dims
    [axis, rank); scale and bias have the shape of those dims.
  }];
  let arguments = (ins Zero_FloatTensor:$input, Zero_FloatTensor:$scale,
                       Optional<Zero_FloatTensor>:$bias, Zero_I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? attr-dict `:` functional-type(operands, $result)
  }];
  let hasVerifier = 1;
}

def Zero_RmsNormOp : Zero_Op<"rms_norm", [Pure]> {
  let summary = "RMS normalization over the trailing dims from `axis` (Llama)";
  let description = [{ y = x / sqrt(mean(x^2) + epsilon) * scale. }];
  let arguments = (ins Zero_FloatTensor:$input, Zero_FloatTensor:$scale,
                       Zero_I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$input `,` $scale attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
}

def Zero_CrossEntropyOp : Zero_Op<"cross_entropy", [Pure]> {
  let summary = "mean cross-entropy of logits against integer labels";
  let description = [{
    logits [N..., C] against labels [N...]; positions whose label equals
    ignore_index are left out of the sum and of the count (PyTorch
    F.cross_entropy with reduction='mean'). The result is a scalar.
    With `classes` (zero-pad-gemms' padded vocabulary), only the first
    `classes` of the C columns are logits; the rest are padding and ignored.
  }];
  let arguments = (ins Zero_FloatTensor:$logits, Zero_IndexTensor:$labels, Zero_I64Attr:$ignore_index,
                       OptionalAttr<Zero_I64Attr>:$classes);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward ops (where a fused backward is the sane choice) and optimizers
//===----------------------------------------------------------------------===//

def Zero_GeluGradOp : Zero_Op<"gelu_grad", [Pure, SameOperandsAndResultType, Zero_ElementwiseTrait]> {
  let summary = "dx of GELU given x and dy";
  let arguments = (ins Zero_FloatTensor:$input, Zero_FloatTensor:$grad,
                       Zero_GeluApprox:$approximate);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad $approximate attr-dict `:` type($result)";
}

def Zero_SoftmaxGradOp : Zero_Op<"softmax_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "dx of softmax given its output y and dy: y * (dy - sum(dy * y))";
  let arguments = (ins Zero_FloatTensor:$output, Zero_FloatTensor:$grad, Zero_I64Attr:$axis);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$output `,` $grad attr-dict `:` type($result)";
}

def Zero_LogSoftmaxGradOp : Zero_Op<"log_softmax_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "dx of log-softmax given its output y and dy: dy - exp(y) * sum(dy)";
  let arguments = (ins Zero_FloatTensor:$output, Zero_FloatTensor:$grad, Zero_I64Attr:$axis);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$output `,` $grad attr-dict `:` type($result)";
}

def Zero_LayerNormGradOp : Zero_Op<"layer_norm_grad", [Pure]> {
  let summary = "dx, dscale, dbias of layer_norm given x, scale and dy";
  let description = [{
    With `residual` (zero-fuse-elementwise: the backward's residual-stream
    add), dinput is dx rounded to its type plus residual, rounded again: what
    the separate add computed.
  }];
  let arguments = (ins Zero_FloatTensor:$input, Zero_FloatTensor:$scale, Zero_FloatTensor:$grad,
                       Optional<Zero_FloatTensor>:$residual, Zero_I64Attr:$axis,
                       F64Attr:$epsilon);
  let results = (outs Zero_FloatTensor:$dinput, Zero_FloatTensor:$dscale,
                      Zero_FloatTensor:$dbias);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad (`residual` $residual^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Zero_RmsNormGradOp : Zero_Op<"rms_norm_grad", [Pure]> {
  let summary = "dx, dscale of rms_norm given x, scale and dy";
  let description = [{
    With `residual` (zero-fuse-elementwise: the backward's residual-stream
    add), dinput is dx rounded to its type plus residual, rounded again: what
    the separate add computed.
  }];
  let arguments = (ins Zero_FloatTensor:$input, Zero_FloatTensor:$scale, Zero_FloatTensor:$grad,
                       Optional<Zero_FloatTensor>:$residual, Zero_I64Attr:$axis,
                       F64Attr:$epsilon);
  let results = (outs Zero_FloatTensor:$dinput, Zero_FloatTensor:$dscale);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad (`residual` $residual^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Zero_CrossEntropyGradOp : Zero_Op<"cross_entropy_grad", [Pure]> {
  let summary = "dlogits of the mean cross-entropy, scaled by the scalar dloss";
  let description = [{
    (softmax(logits) - onehot(labels)) * dloss / count on rows whose label is
    not ignore_index, 0 on ignored rows. With `classes`, the columns from
    `classes` on are padding: their gradient is 0. With a second result (a
    scalar; zero-fuse-epilogues folds the forward's zero.cross_entropy of the
    same logits into it), also the mean cross-entropy, with the forward's
    arithmetic and bits: one pass over the logits instead of two.
  }];
  let arguments = (ins Zero_FloatTensor:$logits, Zero_IndexTensor:$labels,
                       RankedTensorOf<[F32]>:$grad, Zero_I64Attr:$ignore_index,
                       OptionalAttr<Zero_I64Attr>:$classes);
  let results = (outs Zero_FloatTensor:$result, Optional<RankedTensorOf<[F32]>>:$loss);
  let assemblyFormat = "$logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)";
}

def Zero_AttentionGradOp : Zero_Op<"attention_grad", [Pure, AttrSizedOperandSegments]> {
  let summary = "dq, dk, dv of zero.attention given its inputs, result, lse and dresult";
  let description = [{
    The flash-attention backward: the probabilities are recomputed from q, k,
    the mask (bias, or causal and window as zero.attention has them) and lse;
    the bias gets no gradient (zero-fuse-attention fuses only masks that do
    not depend on a trainable parameter).
  }];
  let arguments = (ins Zero_FloatTensor:$q, Zero_FloatTensor:$k, Zero_FloatTensor:$v,
                       Optional<Zero_FloatTensor>:$bias, Zero_FloatTensor:$out,
                       RankedTensorOf<[F32]>:$lse, Zero_FloatTensor:$grad,
                       Optional<Zero_IndexTensor>:$positions, F64Attr:$scale,
                       UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs Zero_FloatTensor:$dq, Zero_FloatTensor:$dk, Zero_FloatTensor:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`bias` $bias^)? `,` $out `,` $lse `,` $grad (`positions` $positions^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Zero_AttentionPackedGradOp : Zero_Op<"attention_packed_grad", [Pure, AttrSizedOperandSegments]> {
  let summary = "dqkv of zero.attention_packed";
  let arguments = (ins Zero_FloatTensor:$qkv, Optional<Zero_FloatTensor>:$bias,
                       Zero_FloatTensor:$out, RankedTensorOf<[F32]>:$lse, Zero_FloatTensor:$grad,
                       Optional<Zero_IndexTensor>:$positions,
                       F64Attr:$scale, UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs Zero_FloatTensor:$dqkv);
  let assemblyFormat = [{
    $qkv (`bias` $bias^)? `,` $out `,` $lse `,` $grad (`positions` $positions^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Zero_GatherGradOp : Zero_Op<"gather_grad", [Pure]> {
  let summary = "gradient of gather: scatter-add dy into zeros of the input's shape";
  let description = [{
    The embedding backward: rows indexed several times accumulate (in index
    order, in float32, rounded once). With `addend` (of the result's type;
    zero-fuse-epilogues folds `add(x, gather_grad(..))` into it, a tied
    embedding's two gradients): the rows an index touches are addend + their
    rounded sum, rounded again (the bits of the separate add); the others are
    the addend's. The result may take the addend's memory (in place).
  }];
  let arguments = (ins Zero_IndexTensor:$indices, Zero_FloatTensor:$grad,
                       Optional<Zero_FloatTensor>:$addend, Zero_I64Attr:$axis,
                       OptionalAttr<Zero_I64Attr>:$padding_idx);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $grad (`,` $addend^)? attr-dict `:` functional-type(operands, $result)
  }];
  let hasVerifier = 1;
}

def Zero_SliceGradOp : Zero_Op<"slice_grad", [Pure]> {
  let summary = "gradient of slice: dy placed at the sliced positions of zeros";
  let arguments = (ins Zero_FloatTensor:$grad, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$stride);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$grad `[` $start `:` $stride `]` attr-dict `:` type($grad) `->` type($result)";
}

def Zero_AdamWOp : Zero_Op<"adamw", [Pure, AttrSizedOperandSegments, AttrSizedResultSegments,
    AllTypesMatch<["param", "m", "v", "new_param", "new_m", "new_v"]>]> {
  let summary = "one AdamW step (PyTorch semantics: bias correction, decoupled decay)";
  let description = [{
    With t = step (the count after this update), lr a runtime scalar:
      p <- p * (1 - lr * weight_decay)
      m <- beta1 * m + (1 - beta1) * g;  v <- beta2 * v + (1 - beta2) * g^2
      p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
    Results: the new parameter, m and v. With `skip` (a scalar i1, true after
    an fp16 overflow) the results are the inputs, unchanged: PyTorch's
    found_inf, so that a skipped step needs no host round trip. The gradient
    may be 16-bit (a bf16 gradient bucket, zero-partition): read as float.
    With a fourth result type (16-bit, the parameter's shape), the new
    parameter is also written rounded to it: mixed precision's copy for the
    next step (zero-fuse-optimizer), one pass over memory fewer than a cast.
    With `grad_sum_squares` (a scalar f32 result), the sum of the squared
    gradient is formed as the gradient is read (zero-fuse-optimizer, where the
    norm is only reported): the value of `zero.reduce sum_squares` of the
    gradient, summed in another order. With `scale` (a scalar f32), the
    gradient read is g * scale, rounded to float as a separate multiply
    would be (clipping's or the loss scale's coefficient; zero-fuse-optimizer).
    With the unit attribute `async` (zero-optimizer-in-backward), the update
    runs beside what follows it (a second stream on the GPU) until a
    `zero.wait` on its last result, which keeps its gradient alive; nothing
    reads its results before that wait.
  }];
  let arguments = (ins Zero_FloatTensor:$param, Zero_FloatTensor:$grad, Zero_FloatTensor:$m,
                       Zero_FloatTensor:$v, RankedTensorOf<[F32]>:$lr,
                       RankedTensorOf<[F32]>:$step, Optional<Zero_BoolTensor>:$skip,
                       Optional<RankedTensorOf<[F32]>>:$grad_scale,
                       F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$epsilon, F64Attr:$weight_decay);
  let results = (outs Zero_FloatTensor:$new_param, Zero_FloatTensor:$new_m,
                      Zero_FloatTensor:$new_v, Optional<Zero_FloatTensor>:$new_param_copy,
                      Optional<RankedTensorOf<[F32]>>:$grad_sum_squares);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $lr `,` $step (`skip` $skip^ `:` type($skip))?
    (`scale` $grad_scale^ `:` type($grad_scale))? attr-dict
    `:` type($param) `,` type($grad) `,` type($lr) `,` type($step)
    (`copy` type($new_param_copy)^)? (`sum_squares` type($grad_sum_squares)^)?
  }];
  let builders = [OpBuilder<(ins "mlir::Value":$param, "mlir::Value":$grad, "mlir::Value":$m,
      "mlir::Value":$v, "mlir::Value":$lr, "mlir::Value":$step, "double":$beta1,
      "double":$beta2, "double":$epsilon, "double":$weight_decay,
      CArg<"mlir::Value", "{}">:$skip, CArg<"mlir::Type", "{}">:$copyType,
      CArg<"bool", "false">:$sumSquares, CArg<"mlir::Value", "{}">:$gradScale), [{
    build($_builder, $_state, param.getType(), param.getType(), param.getType(), copyType,
          sumSquares ? mlir::Type(mlir::RankedTensorType::get({}, $_builder.getF32Type()))
                     : mlir::Type(),
          param, grad, m, v, lr, step, skip, gradScale, $_builder.getF64FloatAttr(beta1),
          $_builder.getF64FloatAttr(beta2), $_builder.getF64FloatAttr(epsilon),
          $_builder.getF64FloatAttr(weight_decay));
  }]>];
  let hasVerifier = 1;
}

def Zero_SgdOp : Zero_Op<"sgd", [Pure,
    AllTypesMatch<["param", "grad", "momentum_buffer", "new_param", "new_momentum_buffer"]>]> {
  let summary = "one SGD step with momentum (torch.optim.SGD, dampening 0)";
  let description = [{
      d <- g + weight_decay * p
      b <- momentum * b + d          (b starts at 0, so the first b is d)
      d <- nesterov ? d + momentum * b : b
      p <- p - lr * d
    With `skip` (a scalar i1) the results are the inputs, unchanged.
  }];
  let arguments = (ins Zero_FloatTensor:$param, Zero_FloatTensor:$grad,
                       Zero_FloatTensor:$momentum_buffer, RankedTensorOf<[F32]>:$lr,
                       Optional<Zero_BoolTensor>:$skip,
                       F64Attr:$momentum, F64Attr:$weight_decay, UnitAttr:$nesterov);
  let results = (outs Zero_FloatTensor:$new_param, Zero_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $lr (`skip` $skip^ `:` type($skip))? attr-dict
    `:` type($param) `,` type($lr)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data-parallel communication (zero-partition inserts these)
//===----------------------------------------------------------------------===//

def Zero_CollectiveReduce : I32EnumAttr<"CollectiveReduce", "reduction of a collective", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"avg", 1>
  ]> {
  let cppNamespace = "::zcc::zero";
}

// The collectives read and write the other ranks (CommunicationResource,
// ZeroOps.h): not Pure, so that -cse keeps a stage-3 backward re-gather
// apart from the forward gather of the same shard.
// The ranks a collective spans (zero-partition's device mesh, issue 22):
// every rank; the ranks of this rank's group of consecutive ranks (a node's,
// under hpZ or MiCS / HSDP); or the ranks at this rank's place in every group.
// world_size is the size of that set.
def Zero_CommGroup : I32EnumAttr<"CommGroup", "the ranks a collective spans", [
    I32EnumAttrCase<"world", 0>,
    I32EnumAttrCase<"group", 1>,
    I32EnumAttrCase<"across", 2>
  ]> {
  let cppNamespace = "::zcc::zero";
}
defvar Zero_CommGroupAttr = DefaultValuedAttr<Zero_CommGroup, "::zcc::zero::CommGroup::world">;

def Zero_CommunicationResource : Resource<"::zcc::zero::CommunicationResource">;
defvar Zero_Communicates = MemoryEffects<[MemRead<Zero_CommunicationResource>,
                                          MemWrite<Zero_CommunicationResource>]>;

def Zero_AllReduceOp : Zero_Op<"all_reduce", [Zero_Communicates, SameOperandsAndResultType]> {
  let summary = "sum or average over the data-parallel ranks; every rank gets the result";
  let arguments = (ins Zero_FloatTensor:$input, Zero_CollectiveReduce:$reduce,
                       Zero_I64Attr:$world_size, UnitAttr:$async, Zero_CommGroupAttr:$group);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$reduce $input (`in` $group^)? attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Zero_ReduceScatterOp : Zero_Op<"reduce_scatter", [Zero_Communicates]> {
  let summary = "reduce over the ranks; rank r keeps chunk r of the flat result";
  let description = [{
    A 1-D tensor of N elements (N a multiple of world_size) becomes this
    rank's N/world_size elements of the sum (or average) over ranks.
  }];
  let arguments = (ins Zero_FloatTensor:$input, Zero_CollectiveReduce:$reduce,
                       Zero_I64Attr:$world_size, UnitAttr:$async, Zero_CommGroupAttr:$group);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat =
      "$reduce $input (`in` $group^)? attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Zero_AllGatherOp : Zero_Op<"all_gather", [Zero_Communicates]> {
  let summary = "concatenate every rank's 1-D shard in rank order";
  let arguments = (ins Zero_GatherTensor:$input, Zero_I64Attr:$world_size, UnitAttr:$async,
                       Zero_CommGroupAttr:$group);
  let results = (outs Zero_GatherTensor:$result);
  let assemblyFormat = "$input (`in` $group^)? attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Zero_AllToAllOp : Zero_Op<"all_to_all", [Zero_Communicates, SameOperandsAndResultType]> {
  let summary = "chunk j of rank r's 1-D input becomes chunk r of rank j's output";
  let description = [{
    The input is world_size chunks of N / world_size elements; chunk j goes to
    rank j, and rank r's output is every rank's chunk r in rank order.
    ZeRO++ qgZ moves blockwise-quantized gradients with it, each rank then
    summing the chunks it received (zero.dequantize with parts).
  }];
  let arguments = (ins Zero_GatherTensor:$input, Zero_I64Attr:$world_size, UnitAttr:$async,
                       Zero_CommGroupAttr:$group);
  let results = (outs Zero_GatherTensor:$result);
  let assemblyFormat = "$input (`in` $group^)? attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Zero_QuantizeOp : Zero_Op<"quantize", [Pure]> {
  let summary = "blockwise symmetric int8 or int4 quantization of a 1-D tensor (ZeRO++ qwZ, qgZ)";
  let description = [{
    Per block of `block_size` consecutive elements: scale = max |x| / L
    (float32; L = 127 for 8 bits, 7 for 4), q = round-half-even(x / scale)
    in [-L, L] (0 where the block is all zero). The length is a multiple of
    the block size. 4 bits pack two values a byte, element 2i in the low
    nibble: `values` has N * bits / 8 bytes.
    With `chunks = [A, G]` the input is A x G chunks of whole blocks and
    is quantized in G x A order (chunk a * G + g at position g * A + a):
    qgZ's reordering before its hierarchical all-to-all, read in place.
  }];
  let arguments = (ins Zero_FloatTensor:$input, Zero_I64Attr:$block_size,
                       DefaultValuedAttr<I64Attr, "8">:$bits,
                       OptionalAttr<DenseI64ArrayAttr>:$chunks);
  let results = (outs RankedTensorOf<[I8]>:$values, RankedTensorOf<[F32]>:$scales);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($values) `,` type($scales)";
  let hasVerifier = 1;
}

def Zero_DequantizeOp : Zero_Op<"dequantize", [Pure]> {
  let summary = "q x scale of its block: zero.quantize's inverse, up to rounding";
  let description = [{
    With `parts` > 1 the N values are that many quantized tensors of
    N / parts elements (what zero.all_to_all delivered from each rank), and
    the result is their sum in float32, in part order (their mean with
    `average`), rounded once to the result type: qgZ's reduction.
  }];
  let arguments = (ins RankedTensorOf<[I8]>:$values, RankedTensorOf<[F32]>:$scales,
                       Zero_I64Attr:$block_size, DefaultValuedAttr<I64Attr, "1">:$parts,
                       UnitAttr:$average, DefaultValuedAttr<I64Attr, "8">:$bits);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat =
      "$values `,` $scales attr-dict `:` type($values) `,` type($scales) `->` type($result)";
  let hasVerifier = 1;
}

def Zero_LocalShardOp : Zero_Op<"local_shard", [Pure]> {
  let summary = "this rank's chunk of a replicated 1-D tensor (no communication)";
  let arguments = (ins Zero_GatherTensor:$input, Zero_I64Attr:$world_size,
                       Zero_CommGroupAttr:$group);
  let results = (outs Zero_GatherTensor:$result);
  let assemblyFormat = "$input (`in` $group^)? attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Zero_TransferOp : Zero_Op<"transfer", [Pure, SameOperandsAndResultType]> {
  let summary = "a copy between device memory and pinned host memory (offload)";
  let description = [{
    zero-offload moves what the host optimizer reads to host memory and its
    results back: `to_host` places the result in the host arena, otherwise
    the device arena. Lowered to a plan copy (an async cudaMemcpy on the GPU).
    Marked `zero.nvme` (zero-offload to nvme), it reads an NVMe global into a
    host temporary, or writes a host value that is stored into one (its
    result then takes the global's bytes); with the unit attribute `async`
    it completes at a `zero.wait` on its result, whose input (the value
    copied) stays alive and unmodified until then.
  }];
  let arguments = (ins AnyRankedTensor:$input, BoolAttr:$to_host);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Zero_WaitOp : Zero_Op<"wait", [Pure, AllTypesMatch<["started", "result"]>]> {
  let summary = "the result of an `async` collective or adamw, once it has completed";
  let description = [{
    zero-schedule splits every collective into its start (the collective op,
    marked `async`) and this wait: uses of the result go through the wait, so
    the distance between the two is the overlap with compute. The collective
    reads `input` until the wait, which keeps it alive (and unmodified).
    The result is the started collective's buffer (no copy). An async
    `zero.adamw` (zero-optimizer-in-backward) is waited for on its last
    result, with its gradient as `input`.
  }];
  let arguments = (ins Zero_GatherTensor:$started, Zero_GatherTensor:$input);
  let results = (outs Zero_GatherTensor:$result);
  let assemblyFormat = "$started `,` $input attr-dict `:` type($started) `,` type($input)";
  let hasVerifier = 1;
}

include "ZeroMoeOps.td"
include "ZeroConvOps.td"

#endif // ZERO_OPS_TD
