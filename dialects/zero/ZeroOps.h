//===- ZeroOps.h - zero dialect ----------------------------------*- C++ -*-===//
#ifndef ZCC_DIALECTS_ZERO_ZEROOPS_H
#define ZCC_DIALECTS_ZERO_ZEROOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "zero/ZeroEnums.h.inc"

namespace zcc::zero {
/// A float64 attribute parameter (ZeroAttrs.td's Zero_F64Parameter): MLIR's
/// uniquer hashes parameters with llvm::hash_value, which has no double
/// overload; this hashes the bits (so -0.0 and 0.0 are two values, as in
/// FloatAttr).
struct F64 {
  double value;
  F64(double v) : value(v) {}               // NOLINT: builders take doubles
  operator double() const { return value; } // NOLINT: and getters return them
  bool operator==(const F64 &o) const {
    return llvm::bit_cast<uint64_t>(value) == llvm::bit_cast<uint64_t>(o.value);
  }
};
inline llvm::hash_code hash_value(F64 f) {
  return llvm::hash_value(llvm::bit_cast<uint64_t>(f.value));
}
} // namespace zcc::zero

#define GET_ATTRDEF_CLASSES
#include "zero/ZeroAttrs.h.inc"
#include "zero/ZeroDialect.h.inc"

namespace zcc::zero {
namespace OpTrait {
/// Ops whose result element k depends only on element k of each (broadcast)
/// operand (ZeroOps.td: Zero_ElementwiseTrait). No verifier: binary ops
/// broadcast, which MLIR's own Elementwise trait would refuse.
template <typename ConcreteType>
class Elementwise : public mlir::OpTrait::TraitBase<ConcreteType, Elementwise> {};
} // namespace OpTrait

/// Whether |op| carries the Elementwise trait.
inline bool isElementwise(mlir::Operation *op) { return op->hasTrait<OpTrait::Elementwise>(); }

/// What the data-parallel collectives read and write besides their operands:
/// the other ranks. Two gathers of the same shard are two communications
/// (a stage-3 forward gather and its backward re-gather, between which the
/// gathered parameters were released): CSE must not merge them, and an
/// unused collective is still one every rank issues.
struct CommunicationResource : public mlir::SideEffects::Resource::Base<CommunicationResource> {
  llvm::StringRef getName() final { return "<zero.communication>"; }
};

/// The zero dialect of |op|'s context, whose generated helpers read and
/// write the dialect's discardable attributes typed (ZeroDialect.td's
/// discardableAttrs): attrs(global).getOffsetAttrHelper().getAttr(global).
/// The names alone (function argument attributes, dictionary entries):
/// ZeroDialect::OffsetAttrHelper::getNameStr().
/// Loads the dialect where a module holding no zero op was read from text
/// (which the passes, multithreaded, never see: their modules hold zero ops).
inline ZeroDialect &attrs(mlir::Operation *op) {
  if (auto *dialect = op->getContext()->getLoadedDialect<ZeroDialect>())
    return *dialect;
  return *op->getContext()->getOrLoadDialect<ZeroDialect>();
}
} // namespace zcc::zero

#define GET_OP_CLASSES
#include "zero/ZeroOps.h.inc"

namespace zcc::zero {

/// Returns the NumPy broadcast of |lhs| and |rhs|, or failure if a pair of
/// dimensions is neither equal nor 1.
mlir::FailureOr<llvm::SmallVector<int64_t>> broadcastShapes(llvm::ArrayRef<int64_t> lhs,
                                                            llvm::ArrayRef<int64_t> rhs);

/// Returns true if |from| broadcasts to exactly |to| (ONNX Expand accepts a
/// target shape that is itself broadcast against the input; callers pass the
/// final shape).
bool isBroadcastableTo(llvm::ArrayRef<int64_t> from, llvm::ArrayRef<int64_t> to);

/// The micro-steps a training step accumulates (zero-training-config's
/// `zero.training` grad_accum_steps), or 0 where the module does not say.
int64_t gradAccumSteps(mlir::Operation *module);

/// The output length of a convolution along one axis (0 when the dilated
/// kernel does not fit the padded axis).
int64_t convOutputSize(int64_t size, int64_t kernel, int64_t stride, int64_t dilation,
                       int64_t before, int64_t after);

/// Makes |func| an inference function: every zero.dropout becomes its input,
/// and the "dropout_rng" input they read is removed.
void eraseDropout(mlir::Operation *func);

/// Resolves |func|'s zero.train_or_eval ops to their training or evaluation
/// operand. For evaluation, also drops dropout (eraseDropout) and the
/// zero.stores of buffers (running statistics update only when training);
/// the ops that then compute nothing are erased.
void selectMode(mlir::Operation *func, bool training);

} // namespace zcc::zero

#endif // ZCC_DIALECTS_ZERO_ZEROOPS_H
