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
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1; // the typed configuration attributes
  // The dialect's discardable attributes: metadata the importer and the
  // passes attach to the module, globals, ops and function arguments, read by
  // later passes, the plan writer and the report. Declared here once: ODS
  // generates a typed helper for each (ZeroDialect::<Name>AttrHelper: the
  // name, get, set, present), which the code uses instead of spelling
  // "zero.<name>" (scripts/check_sources.py fails on such a string).
  let discardableAttrs = (ins
    // The module: what was imported (zcc's front end).
    "::mlir::StringAttr":$source,               // the ONNX file's name
    "::mlir::IntegerAttr":$opset,               // its default-domain opset
    "::mlir::IntegerAttr":$trainable_count,     // trainable initializers
    "::mlir::IntegerAttr":$frozen_count,        // frozen initializers
    "::mlir::DictionaryAttr":$aux_loss,         // --aux-loss: output name -> coefficient
    "::mlir::DictionaryAttr":$export_record,    // zcc-export's record (names, transposes)
    // The module: the training configuration (zero-training-config).
    "::zcc::zero::TrainingAttr":$training,      // optimizer, schedule, clipping, accumulation
    "::zcc::zero::PrecisionAttr":$precision,    // fp32, bf16, fp16
    "::zcc::zero::TargetAttr":$target,          // cpu, cuda
    "::zcc::zero::LossScalingAttr":$loss_scaling, // fp16's loss scaling
    "::mlir::StringAttr":$auto,                 // zcc --auto: the chosen candidate
    "::mlir::IntegerAttr":$memory_budget,       // --memory-budget, bytes a rank
    "::mlir::IntegerAttr":$host_memory_budget,  // --host-memory-budget
    // The module: what the passes did (reports and the plan read these).
    "::zcc::zero::PartitionAttr":$partition,    // ZeRO's partition (stage, world, shards, mesh)
    "::mlir::ArrayAttr":$buckets,               // the flat buckets, a #zero.bucket<...> each
    "::mlir::UnitAttr":$gradients_written,      // the backward writes whole gradients
    "::mlir::DictionaryAttr":$optimizer_in_backward, // which parameters update in the backward
    "::mlir::DictionaryAttr":$recompute,        // zero-recompute's choices
    "::mlir::DictionaryAttr":$offload,          // ZeRO-Offload's devices
    "::mlir::IntegerAttr":$fused_attention,     // attentions fused
    "::mlir::IntegerAttr":$moe_blocks,          // mixture-of-experts blocks routed dropless
    "::mlir::IntegerAttr":$padded_gemms,        // GEMMs padded to the tensor cores' sizes
    "::mlir::DenseI64ArrayAttr":$transposed_elements, // transposed elements before, after
    // The module: the memory plan (zero-plan-memory), bytes.
    "::mlir::IntegerAttr":$device_arena_bytes,
    "::mlir::IntegerAttr":$state_arena_bytes,
    "::mlir::IntegerAttr":$constant_arena_bytes,
    "::mlir::IntegerAttr":$input_arena_bytes,
    "::mlir::IntegerAttr":$host_arena_bytes,
    "::mlir::IntegerAttr":$host_state_bytes,
    "::mlir::IntegerAttr":$nvme_arena_bytes,
    // Globals and ops: placement. nvme is a unit on a global or transfer
    // (in NVMe swap files) and the swap files' settings (a dictionary) on
    // the module.
    "::mlir::Attribute":$nvme,
    "::mlir::UnitAttr":$host,                   // a global in pinned host memory
    "::mlir::UnitAttr":$on_host,                // an op that runs on the host
    "::mlir::IntegerAttr":$nvme_chunk,          // an NVMe global's update chunk, elements
    "::mlir::UnitAttr":$value_not_read,         // an initializer whose value nothing reads
    "::mlir::IntegerAttr":$offset,              // a global's or input's arena offset
    "::mlir::DenseI64ArrayAttr":$offsets,       // an op's results' arena offsets
    "::mlir::DenseI64ArrayAttr":$in_state,      // results placed in the state arena
    "::mlir::DenseI64ArrayAttr":$arenas,        // each result's arena
    // Function arguments and results: the plan's named inputs and outputs.
    "::mlir::StringAttr":$input,
    "::mlir::StringAttr":$output,
    "::mlir::UnitAttr":$loss                    // the result that is the loss
  );
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
