//===- ZeroDialect.td - the training-step dialect ----------*- tablegen -*-===//
//
// The `zero` dialect represents a whole training step on ranked tensors with
// static shapes: module-level state (globals), compute ops that cover MLP and
// transformer graphs, and (in later passes) distribution and memory ops.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_DIALECT_TD
#define ZERO_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Zero_Dialect : Dialect {
  let name = "zero";
  let cppNamespace = "::zcc::zero";
  let summary = "Training-step dialect of zcc (forward, backward, optimizer, ZeRO)";
  let description = [{
    Value semantics on statically shaped ranked tensors. State lives in
    module-level `zero.global` symbols that functions read with `zero.load`
    and write with `zero.store`; later passes change where a global is stored
    (sharded, bucketed, offloaded), never what it means.
  }];
  let hasConstantMaterializer = 1;
}

// Role of a global in the training state (what checkpoints, exports and reports read).
def Zero_GlobalRole : I32EnumAttr<"GlobalRole", "role of a global in the training state", [
    I32EnumAttrCase<"param", 0>,
    I32EnumAttrCase<"buffer", 1>,
    I32EnumAttrCase<"grad", 2>,
    I32EnumAttrCase<"master", 3>,
    I32EnumAttrCase<"adam_m", 4>,
    I32EnumAttrCase<"adam_v", 5>,
    I32EnumAttrCase<"loss_scale", 6>,
    I32EnumAttrCase<"step", 7>,
    I32EnumAttrCase<"param_copy", 8>
  ]> {
  let cppNamespace = "::zcc::zero";
}

// Comparison predicate of zero.cmp.
def Zero_CmpPredicate : I32EnumAttr<"CmpPredicate", "elementwise comparison", [
    I32EnumAttrCase<"eq", 0>,
    I32EnumAttrCase<"ne", 1>,
    I32EnumAttrCase<"lt", 2>,
    I32EnumAttrCase<"le", 3>,
    I32EnumAttrCase<"gt", 4>,
    I32EnumAttrCase<"ge", 5>
  ]> {
  let cppNamespace = "::zcc::zero";
}

// Reduction kind of zero.reduce.
def Zero_ReduceKind : I32EnumAttr<"ReduceKind", "reduction kind", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"mean", 1>,
    I32EnumAttrCase<"max", 2>,
    I32EnumAttrCase<"min", 3>,
    I32EnumAttrCase<"prod", 4>,
    // sum of x * x, each square in f32 (the gradient norm: one pass over
    // the gradients, no squared copy)
    I32EnumAttrCase<"sum_squares", 5>
  ]> {
  let cppNamespace = "::zcc::zero";
}

// GELU approximation (ONNX Gelu / PyTorch F.gelu `approximate`).
def Zero_GeluApprox : I32EnumAttr<"GeluApprox", "GELU approximation", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"tanh", 1>
  ]> {
  let cppNamespace = "::zcc::zero";
}

#endif // ZERO_DIALECT_TD
