//===- ZeroConvOps.td - convolutions ------------------------*- tablegen -*-===//
//
// N-D convolution (1-3 spatial axes), channels first, and its two
// gradients: ONNX Conv (PyTorch's nn.Conv1d/2d/3d) with explicit padding
// (the importer resolves auto_pad), stride, dilation and groups. The bias
// is a separate add. ConvTranspose is the input gradient of the convolution
// it transposes.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_CONV_OPS_TD
#define ZERO_CONV_OPS_TD

class Zero_ConvLikeOp<string mnemonic, string summaryText>
    : Zero_Op<mnemonic, [Pure]> {
  let summary = summaryText;
  // strides, dilations: one per spatial axis; pads: the padding before each
  // spatial axis, then after each (ONNX's order).
  let results = (outs Zero_FloatTensor:$result);
  let hasVerifier = 1;
}

def Zero_ConvOp : Zero_ConvLikeOp<"conv", "convolution (cross-correlation), channels first"> {
  let description = [{
    input [N, C, S..] and filter [M, C / groups, K..] give [N, M, O..] with
    O = (S + pads before + pads after - dilation (K - 1) - 1) / stride + 1:
    y[n, m, o] = sum over c in m's group and k of
    x[n, c, o stride + k dilation - pad before] w[m, c, k], zero outside x.
  }];
  let arguments = (ins Zero_FloatTensor:$input, Zero_FloatTensor:$filter,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                       DenseI64ArrayAttr:$pads, Zero_I64Attr:$groups);
  let assemblyFormat = [{
    $input `,` $filter attr-dict `:` functional-type(operands, $result)
  }];
}

def Zero_ConvInputGradOp : Zero_ConvLikeOp<"conv_input_grad",
    "the gradient of zero.conv's input (ConvTranspose's forward)"> {
  let description = [{
    grad [N, M, O..] and filter [M, C / groups, K..] give the input's
    gradient [N, C, S..] (the result type says S, which the forward's output
    size does not determine when the stride does not divide evenly): every
    x[n, c, s] gets the sum of w[m, c, k] grad[n, m, o] over the (o, k) that
    read it.
  }];
  let arguments = (ins Zero_FloatTensor:$grad, Zero_FloatTensor:$filter,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                       DenseI64ArrayAttr:$pads, Zero_I64Attr:$groups);
  let assemblyFormat = [{
    $grad `,` $filter attr-dict `:` functional-type(operands, $result)
  }];
}

def Zero_ConvFilterGradOp : Zero_ConvLikeOp<"conv_filter_grad",
    "the gradient of zero.conv's filter"> {
  let description = [{
    input [N, C, S..] and grad [N, M, O..] give the filter's gradient
    [M, C / groups, K..] (the result type says K).
  }];
  let arguments = (ins Zero_FloatTensor:$input, Zero_FloatTensor:$grad,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$dilations,
                       DenseI64ArrayAttr:$pads, Zero_I64Attr:$groups);
  let assemblyFormat = [{
    $input `,` $grad attr-dict `:` functional-type(operands, $result)
  }];
}

#endif // ZERO_CONV_OPS_TD
