//===- Passes.td - conversion passes -----------------------*- tablegen -*-===//
#ifndef ZCC_CONVERSION_PASSES_TD
#define ZCC_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertZeroToZrt : Pass<"convert-zero-to-zrt", "mlir::ModuleOp"> {
  let summary = "Lower the planned zero module to runtime buffers and kernels";
  let description = [{
    Runs after zero-plan-memory. Every global, argument, constant and value
    becomes a `zrt.buffer` at its planned arena offset (a reshape becomes a
    view: another buffer on the same bytes), and every compute op becomes one
    `zrt.kernel` instruction of the program `@eval`, whose attributes follow
    the kernel ABI of runtime/cpu/Kernels.h. An op without a runtime kernel is
    an error at its ONNX location.
  }];
  let dependentDialects = ["zcc::zrt::ZrtDialect"];
}

#endif // ZCC_CONVERSION_PASSES_TD
