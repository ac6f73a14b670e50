//===- ZeroAttrs.td - the zero dialect's attributes --------*- tablegen -*-===//
//
// The training configuration zero-training-config and zero-mixed-precision
// record on the module, typed: what the plan writer and the report read
// (zero.precision, zero.target, zero.training, zero.loss_scaling;
// ZeroDialect.td declares where they go).
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_ATTRS_TD
#define ZERO_ATTRS_TD

include "ZeroDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Zero_Precision : I32EnumAttr<"Precision", "the step's compute precision", [
  I32EnumAttrCase<"fp32", 0>,
  I32EnumAttrCase<"bf16", 1>, // bfloat16 compute, float32 masters
  I32EnumAttrCase<"fp16", 2>  // float16 compute, float32 masters, loss scaling
]> {
  let cppNamespace = "::zcc::zero";
  let genSpecializedAttr = 0;
}
def Zero_PrecisionAttr : EnumAttr<Zero_Dialect, Zero_Precision, "precision"> {
  let assemblyFormat = "`<` $value `>`";
}

def Zero_Target : I32EnumAttr<"Target", "where the plan runs by default", [
  I32EnumAttrCase<"cpu", 0>,
  I32EnumAttrCase<"cuda", 1>
]> {
  let cppNamespace = "::zcc::zero";
  let genSpecializedAttr = 0;
}
def Zero_TargetAttr : EnumAttr<Zero_Dialect, Zero_Target, "target"> {
  let assemblyFormat = "`<` $value `>`";
}

/// A float64 parameter (stored as zero::F64, which MLIR's uniquer can hash),
/// read as a double and printed so that it reads back bit for bit.
def Zero_F64Parameter : AttrOrTypeParameter<"::zcc::zero::F64", "a float64"> {
  let cppAccessorType = "double";
  let parser = [{ [&]() -> ::mlir::FailureOr<::zcc::zero::F64> {
    double value;
    if ($_parser.parseFloat(value))
      return ::mlir::failure();
    return ::zcc::zero::F64{value};
  }() }];
  let printer = [{ $_printer.printFloat(::llvm::APFloat($_self)); }];
}

class Zero_Attr<string name, string attrMnemonic> : AttrDef<Zero_Dialect, name> {
  let mnemonic = attrMnemonic;
  let assemblyFormat = "`<` struct(params) `>`";
}

def Zero_ScheduleAttr : Zero_Attr<"Schedule", "schedule"> {
  let summary = "a learning-rate schedule (DeepSpeed's scheduler section)";
  let description = [{
    `name` is DeepSpeed's scheduler type or zcc's `--lr-schedule`; zrun's
    trainer evaluates it (runtime/train/Schedule.h). Step counts of -1 are
    "auto": zrun resolves them from `--steps`.
  }];
  let parameters = (ins
    StringRefParameter<"scheduler type">:$name,
    Zero_F64Parameter:$lr,
    "int64_t":$warmup_steps,
    "int64_t":$total_steps,
    Zero_F64Parameter:$warmup_min_lr,
    "bool":$warmup_log,
    Zero_F64Parameter:$warmup_min_ratio,
    Zero_F64Parameter:$cos_min_ratio
  );
}

def Zero_TrainingAttr : Zero_Attr<"Training", "training"> {
  let summary = "the optimizer step's settings (zero-training-config)";
  let description = [{
    What zcc's flags and a DeepSpeed config decided for the optimizer step:
    the micro-steps accumulated, the optimizer (adamw or sgd) with its
    hyperparameters, gradient clipping (0: off) and the schedule, if any.
    The plan carries it to zrun (plan.proto's Training).
  }];
  let parameters = (ins
    "int64_t":$grad_accum_steps,
    StringRefParameter<"adamw or sgd">:$optimizer,
    Zero_F64Parameter:$lr,
    Zero_F64Parameter:$beta1,
    Zero_F64Parameter:$beta2,
    Zero_F64Parameter:$eps,
    Zero_F64Parameter:$weight_decay,
    Zero_F64Parameter:$grad_clip,
    OptionalParameter<"::zcc::zero::ScheduleAttr">:$schedule
  );
}

def Zero_LossScalingAttr : Zero_Attr<"LossScaling", "loss_scaling"> {
  let summary = "fp16's loss scaling (DeepSpeed's fp16 section)";
  let description = [{
    A static scale where `loss_scale` > 0; otherwise dynamic: the scale
    starts at 2^initial_scale_power, doubles after `loss_scale_window` steps
    without overflow and halves after `hysteresis` overflows, never below
    `min_loss_scale`.
  }];
  let parameters = (ins
    Zero_F64Parameter:$loss_scale,
    "int64_t":$initial_scale_power,
    "int64_t":$loss_scale_window,
    "int64_t":$hysteresis,
    "bool":$consecutive_hysteresis,
    Zero_F64Parameter:$min_loss_scale
  );
}

def Zero_PartitionAttr : Zero_Attr<"Partition", "partition"> {
  let summary = "ZeRO's partition of the step (zero-partition)";
  let description = [{
    What zero-partition decided, for the passes after it, the plan writer
    and the report: the stage and ranks, the bucket caps in elements, the
    element type collectives move, the mesh (groups of `group_size` ranks,
    the optimizer state sharded over `state_shards`, hpZ's secondary
    partition) and ZeRO++'s quantized collectives.
  }];
  let parameters = (ins
    "int64_t":$stage,
    "int64_t":$world_size,
    "int64_t":$reduce_bucket_size,
    "int64_t":$allgather_bucket_size,
    "int64_t":$persistence_threshold,
    "::mlir::Type":$comm_type,
    "int64_t":$group_size,
    "int64_t":$state_shards,
    "bool":$hpz,
    "bool":$quantized_weights,
    "bool":$quantized_gradients,
    "int64_t":$quantized_gradient_bits
  );
}

def Zero_BucketMemberAttr : Zero_Attr<"BucketMember", "member"> {
  let summary = "a parameter's place in its flat bucket";
  let parameters = (ins
    "::mlir::StringAttr":$name, // the parameter's global (and the plan's name)
    "int64_t":$offset,          // its first element in the bucket
    "::mlir::Type":$type        // its tensor type
  );
}

def Zero_BucketAttr : Zero_Attr<"Bucket", "bucket"> {
  let summary = "a flat bucket of parameters and its gradient (zero-partition)";
  let description = [{
    One of `zero.buckets`' entries: the members (`#zero.member<...>`) in
    order, the globals of the parameters and of the gradients (none where
    zero-optimizer-in-backward updates each parameter in the micro-step),
    the bucket's elements, whether the parameter global holds only this
    rank's shard (a stage-3 partition, or sharded masters beside the 16-bit
    working copy `copy`), whether the gradient does (stages 2-3), and at
    stage 3 whether the backward gathers the bucket again.
  }];
  let parameters = (ins
    "::mlir::ArrayAttr":$members,
    "::mlir::FlatSymbolRefAttr":$param,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$grad,
    "int64_t":$size,
    "bool":$param_sharded,
    "bool":$grad_sharded,
    "bool":$backward_gather,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$copy
  );
  let extraClassDeclaration = [{
    /// The members, typed.
    auto getMemberList() const { return getMembers().getAsRange<BucketMemberAttr>(); }
  }];
  let genVerifyDecl = 1;
}

#endif // ZERO_ATTRS_TD
