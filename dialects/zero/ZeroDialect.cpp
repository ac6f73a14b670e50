//===- ZeroDialect.cpp - zero dialect registration ------------------------===//
#include "zero/ZeroOps.h"

using namespace mlir;
using namespace zcc::zero;

#include "zero/ZeroDialect.cpp.inc"
#include "zero/ZeroEnums.cpp.inc"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#define GET_ATTRDEF_CLASSES
#include "zero/ZeroAttrs.cpp.inc"

void ZeroDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "zero/ZeroOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "zero/ZeroAttrs.cpp.inc"
      >();
}

/// The module's configuration attributes have the dialect's own types
/// (ZeroAttrs.td): a dictionary there, as an older plan's IR wrote, would
/// otherwise read as absent.
LogicalResult ZeroDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  Attribute value = attr.getValue();
  auto expect = [&](auto helper, bool typed, StringRef syntax) -> LogicalResult {
    if (attr.getName() != helper.getNameStr() || typed)
      return success();
    return op->emitError() << "'" << helper.getNameStr() << "' must be " << syntax << ", got "
                           << value;
  };
  for (LogicalResult r : {
           expect(getTrainingAttrHelper(), isa<TrainingAttr>(value),
                  "a #zero.training<...> attribute"),
           expect(getLossScalingAttrHelper(), isa<LossScalingAttr>(value),
                  "a #zero.loss_scaling<...> attribute"),
           expect(getPrecisionAttrHelper(), isa<PrecisionAttr>(value),
                  "a #zero.precision<fp32|bf16|fp16> attribute"),
           expect(getTargetAttrHelper(), isa<TargetAttr>(value),
                  "a #zero.target<cpu|cuda> attribute"),
           expect(getPartitionAttrHelper(), isa<PartitionAttr>(value),
                  "a #zero.partition<...> attribute"),
           expect(getBucketsAttrHelper(),
                  isa<ArrayAttr>(value) &&
                      llvm::all_of(cast<ArrayAttr>(value), llvm::IsaPred<BucketAttr>),
                  "a list of #zero.bucket<...> attributes"),
       })
    if (failed(r))
      return r;
  return success();
}

LogicalResult BucketAttr::verify(function_ref<InFlightDiagnostic()> emitError, ArrayAttr members,
                                 FlatSymbolRefAttr, FlatSymbolRefAttr, int64_t size, bool, bool,
                                 bool, FlatSymbolRefAttr) {
  if (!llvm::all_of(members, llvm::IsaPred<BucketMemberAttr>))
    return emitError() << "a bucket's members are #zero.member<...> attributes";
  if (size < 1)
    return emitError() << "a bucket holds at least one element, got size " << size;
  return success();
}

Operation *ZeroDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                            Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
