//===- ZeroMoeOps.td - mixtures of experts, dropless -------*- tablegen -*-===//
//
// The ops of dropless expert routing (docs/models.md, "Mixture of experts"):
// a static plan holds N x k routed rows whatever the routing; only where each
// expert's rows start is data. zero-moe-dispatch writes them in place of the
// dense dispatch an exported model computes.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_MOE_OPS_TD
#define ZERO_MOE_OPS_TD

def Zero_MoeRouteOp : Zero_Op<"moe_route", [Pure]> {
  let summary = "each token's k expert choices sorted into expert order (dropless)";
  let description = [{
    `experts` [N, k] holds each token's k chosen experts, in [0, num_experts).
    The N k routed rows are ordered by expert, stably (token-major within an
    expert): `tokens` [N k] is the token of each row, `positions` [N, k] the
    row of slot s of token t (the inverse), `offsets` [num_experts + 1] where
    each expert's rows start (offsets[E] = N k). The shapes are static; only
    the values depend on the routing. An expert outside [0, num_experts) is a
    run-time error, as an index out of range is.

    With `capacity` C > 0 (GShard's and Switch's capacity factor, zcc
    --moe-capacity-factor), each expert has exactly C rows: `tokens` [E C]
    and offsets e C. Choices fill them in priority order (every token's first
    choice before any second choice, tokens in order within a choice, as
    DeepSpeed's gating does); a choice past its expert's C rows is dropped:
    its position is E C (one past the rows), and an expert's unused rows hold
    token N (one past the tokens). zero-moe-dispatch gathers from tables
    with a zero row at those indices, so a dropped choice adds nothing.

    Expert parallelism (zcc --moe-ep-size P, the all-gather dispatch of
    docs/zero.md): `experts` [M, k] are every token of the EP group's
    choices among `all_experts` experts, and `first_expert` [1] (data: each
    rank's own, from zero.local_shard) is the first of this rank's
    `num_experts`. Only choices of experts first .. first + num_experts - 1
    get a row (expert e - first); the others' positions are R, the number of
    rows `tokens` [R] holds (static: M min(k, num_experts), what any routing
    needs). The rows past offsets[num_experts] are unused and hold token M.
  }];
  let arguments = (ins Zero_IndexTensor:$experts, Optional<Zero_IndexTensor>:$first_expert,
                       Zero_I64Attr:$num_experts,
                       DefaultValuedAttr<Zero_I64Attr, "0">:$capacity,
                       DefaultValuedAttr<Zero_I64Attr, "0">:$all_experts);
  let results = (outs Zero_IndexTensor:$tokens, Zero_IndexTensor:$positions,
                      Zero_IndexTensor:$offsets);
  let assemblyFormat = "$experts (`first` $first_expert^ `:` type($first_expert))? attr-dict `:` "
                       "type($experts) `->` type(results)";
  let hasVerifier = 1;
}

def Zero_GroupedMatmulOp : Zero_Op<"grouped_matmul", [Pure]> {
  let summary = "one matrix product per expert over rows grouped by expert";
  let description = [{
    `lhs` [M, K] holds rows grouped by expert: rows offsets[e] to offsets[e + 1]
    are expert e's (`zero.moe_route`'s offsets). `rhs` [E, K, N] holds a
    matrix per expert ([E, N, K] with `transpose_rhs`, as Hugging Face stores
    `gate_up_proj` and `down_proj`). Row r of expert e of the result [M, N] is
    lhs[r] rhs[e] (rhs[e]^T with `transpose_rhs`). Rows past offsets[E]
    (expert parallelism's unused rows) are zero.
  }];
  let arguments = (ins Zero_FloatTensor:$lhs, Zero_FloatTensor:$rhs, Zero_IndexTensor:$offsets,
                       UnitAttr:$transpose_rhs);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs `,` $offsets attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
}

def Zero_GroupedMatmulRhsGradOp : Zero_Op<"grouped_matmul_rhs_grad", [Pure]> {
  let summary = "the gradient of zero.grouped_matmul's expert matrices";
  let description = [{
    For `lhs` [M, K] and the result's gradient `grad` [M, N], expert e's
    matrix gradient: the sum over its rows r of lhs[r]^T grad[r], [K, N]
    ([N, K] with `transpose_rhs`); the result is [E, K, N] (or [E, N, K]), E
    from `offsets` [E + 1]. An expert without rows gets zeros.
  }];
  let arguments = (ins Zero_FloatTensor:$lhs, Zero_FloatTensor:$grad, Zero_IndexTensor:$offsets,
                       UnitAttr:$transpose_rhs);
  let results = (outs Zero_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $grad `,` $offsets attr-dict `:` functional-type(operands, $result)";
  let hasVerifier = 1;
}

#endif // ZERO_MOE_OPS_TD
