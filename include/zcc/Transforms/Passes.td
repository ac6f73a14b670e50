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
  let dependentDialects = ["zcc::zero::ZeroDialect"];
}

#endif // ZCC_TRANSFORMS_PASSES_TD
