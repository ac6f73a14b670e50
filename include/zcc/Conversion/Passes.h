//===- Passes.h - conversion passes ------------------------------*- C++ -*-===//
#ifndef ZCC_CONVERSION_PASSES_H
#define ZCC_CONVERSION_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "zrt/ZrtOps.h"

namespace zcc {

#define GEN_PASS_DECL
#include "zcc/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "zcc/Conversion/Passes.h.inc"

} // namespace zcc

#endif // ZCC_CONVERSION_PASSES_H
