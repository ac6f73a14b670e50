//===- zcc-opt.cpp - mlir-opt with the zero dialect and passes ------------===//
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "zcc/Conversion/Passes.h"
#include "zcc/Pipelines/Pipelines.h"
#include "zcc/Transforms/Passes.h"
#include "zero/ZeroOps.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<zcc::zero::ZeroDialect, zcc::zrt::ZrtDialect, mlir::func::FuncDialect>();
  zcc::registerCodegenInterfaces(registry);
  mlir::registerTransformsPasses(); // canonicalize, cse, symbol-dce, ...
  zcc::registerZeroPasses();
  zcc::registerConversionPasses();
  zcc::registerTrainingPipeline(); // zcc's whole pipeline, with its options
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "zcc optimizer driver\n", registry));
}
