//===- ZrtOps.td - the plan dialect ------------------------*- tablegen -*-===//
//
// zrt mirrors plan.proto: buffers at static offsets in arenas, and programs
// that are straight-line lists of runtime instructions over them. It is what
// convert-zero-to-zrt produces and what the plan writer serializes.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_OPS_TD
#define ZRT_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def Zrt_Dialect : Dialect {
  let name = "zrt";
  let cppNamespace = "::zcc::zrt";
  let summary = "Runtime plan dialect: buffers, programs and instructions";
  // The module's arena sizes in bytes a rank (convert-zero-to-zrt, from
  // zero-plan-memory's), which the plan writer and the report read; typed
  // helpers generated as for the zero dialect's (ZrtDialect::<Name>AttrHelper).
  let discardableAttrs = (ins
    "::mlir::IntegerAttr":$device_arena_bytes,
    "::mlir::IntegerAttr":$state_arena_bytes,
    "::mlir::IntegerAttr":$constant_arena_bytes,
    "::mlir::IntegerAttr":$input_arena_bytes,
    "::mlir::IntegerAttr":$host_arena_bytes,
    "::mlir::IntegerAttr":$nvme_arena_bytes,
    "::mlir::IntegerAttr":$host_state_bytes  // the host arena's state part
  );
}

class Zrt_Op<string mnemonic, list<Trait> traits = []>
    : Op<Zrt_Dialect, mnemonic, traits>;

def Zrt_Arena : I32EnumAttr<"Arena", "memory arena of a buffer", [
    I32EnumAttrCase<"device", 1>,
    I32EnumAttrCase<"state", 2>,
    I32EnumAttrCase<"constant", 3>,
    I32EnumAttrCase<"input", 4>,
    I32EnumAttrCase<"host", 5>,
    I32EnumAttrCase<"nvme", 6>
  ]> {
  let cppNamespace = "::zcc::zrt";
}

/// What a zrt.collective does (the zero dialect's collective ops, one case
/// each; plan.proto's Collective.Kind is the plan's form of it).
def Zrt_CollectiveKind : I32EnumAttr<"CollectiveKind", "what a collective does", [
    I32EnumAttrCase<"all_reduce", 0>,
    I32EnumAttrCase<"reduce_scatter", 1>,
    I32EnumAttrCase<"all_gather", 2>,
    I32EnumAttrCase<"all_to_all", 3>,
    I32EnumAttrCase<"local_shard", 4>
  ]> {
  let cppNamespace = "::zcc::zrt";
}

def Zrt_BufferOp : Zrt_Op<"buffer", [Symbol]> {
  let summary = "a tensor at a static offset of an arena";
  let description = [{
    Views (`view`) share storage: they name the bytes of an owning buffer at
    the same offset with another shape. Owning state and constant buffers
    carry their initial contents. A sharded state buffer (`shard_of = N`)
    holds one rank's 1-D shard; its initial value has all N elements.

    ```mlir
    zrt.buffer @t3 device [8192] : tensor<16x128xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Zrt_Arena:$arena, I64Attr:$offset,
                       TypeAttrOf<AnyRankedTensor>:$type,
                       OptionalAttr<ElementsAttr>:$initial_value, UnitAttr:$trainable,
                       UnitAttr:$view, OptionalAttr<StrAttr>:$role,
                       OptionalAttr<I64Attr>:$shard_of);
  let assemblyFormat = [{
    $sym_name $arena `[` $offset `]` (`trainable` $trainable^)? (`view` $view^)? attr-dict
    `:` $type (`=` $initial_value^)?
  }];
  let hasVerifier = 1;
}

def Zrt_ProgramOp : Zrt_Op<"program", [Symbol, NoTerminator, SingleBlock]> {
  let summary = "a straight-line program (eval, micro_step, apply, init)";
  let description = [{
    `inputs` maps graph input names to the buffers the trainer fills;
    `outputs` maps output names (the loss is "loss") to result buffers.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, DictionaryAttr:$inputs,
                       DictionaryAttr:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `inputs` $inputs `outputs` $outputs $body attr-dict";
}

def Zrt_CopyOp : Zrt_Op<"copy", [HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "copy one buffer into another of the same size (a store to state)";
  let arguments = (ins FlatSymbolRefAttr:$source, FlatSymbolRefAttr:$target);
  let assemblyFormat = "$source `->` $target attr-dict";
}

def Zrt_KernelOp : Zrt_Op<"kernel", [HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "launch a library kernel on buffers";
  let description = [{
    One runtime instruction. `name` selects the kernel (runtime/cpu/Kernels.h
    documents each kernel's operands and `ints`/`floats` attributes). With
    the unit attribute `async`, it runs beside what follows until a `wait`
    on its last output (plan.proto's Kernel.async).
  }];
  let arguments = (ins StrAttr:$name, FlatSymbolRefArrayAttr:$inputs,
                       FlatSymbolRefArrayAttr:$outputs,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$ints,
                       DefaultValuedAttr<DenseF64ArrayAttr, "{}">:$floats);
  let assemblyFormat = "$name $inputs `->` $outputs attr-dict";
  let hasVerifier = 1;
}

def Zrt_CollectiveOp : Zrt_Op<"collective", [HasParent<"ProgramOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a data-parallel collective over the plan's ranks";
  let description = [{
    `kind`: all_reduce, reduce_scatter, all_gather, all_to_all, or
    local_shard (this rank's chunk, no communication). `reduce`: 0 sum, 1 average. `group`:
    the ranks it spans (zero.CommGroup: 0 every rank, 1 this rank's group of
    the mesh, 2 this rank's place across the groups).
  }];
  let arguments = (ins Zrt_CollectiveKind:$kind, FlatSymbolRefAttr:$input,
                       FlatSymbolRefAttr:$output,
                       DefaultValuedAttr<I64Attr, "0">:$reduce, UnitAttr:$async,
                       DefaultValuedAttr<I64Attr, "0">:$group);
  let assemblyFormat = "$kind $input `->` $output (`async` $async^)? attr-dict";
}

def Zrt_WaitOp : Zrt_Op<"wait", [HasParent<"ProgramOp">]> {
  let summary = "wait for the async collective or kernel that writes `output`";
  let arguments = (ins FlatSymbolRefAttr:$output);
  let assemblyFormat = "$output attr-dict";
}

#endif // ZRT_OPS_TD
