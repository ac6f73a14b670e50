//===- ModelShape.h - what a pass may infer from the model -------*- C++ -*-===//
//
// DeepSpeed's "auto" sizes (HuggingFace's integration fills them from the
// model's hidden size): the passes that take a size resolve -1 through here.
//
//===----------------------------------------------------------------------===//
#ifndef ZCC_ANALYSIS_MODELSHAPE_H
#define ZCC_ANALYSIS_MODELSHAPE_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>

namespace zcc {

/// The model's hidden size H: the most common length of its 1-D trainable
/// parameters (norm weights and biases are H long in GPT-2, Llama and BERT
/// shapes); ties go to the larger; 1 if there are none.
int64_t hiddenSize(mlir::ModuleOp module);

/// |value| itself when >= 0; -1 means "auto": perH2 * H^2 + perH * H (at
/// least 1), HuggingFace's rule (reduce_bucket_size H^2,
/// stage3_prefetch_bucket_size 0.9 H^2, stage3_param_persistence_threshold
/// 10 H).
int64_t autoSize(int64_t value, mlir::ModuleOp module, double perH2, double perH);

} // namespace zcc

#endif // ZCC_ANALYSIS_MODELSHAPE_H
