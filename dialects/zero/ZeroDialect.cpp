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
    return op->emitError() << "'" << helper.getNameStr() << "' must be a " << syntax
                           << " attribute, got " << value;
  };
  for (LogicalResult r : {
           expect(getTrainingAttrHelper(), isa<TrainingAttr>(value), "#zero.training<...>"),
           expect(getLossScalingAttrHelper(), isa<LossScalingAttr>(value),
                  "#zero.loss_scaling<...>"),
           expect(getPrecisionAttrHelper(), isa<PrecisionAttr>(value),
                  "#zero.precision<fp32|bf16|fp16>"),
           expect(getTargetAttrHelper(), isa<TargetAttr>(value), "#zero.target<cpu|cuda>"),
           expect(getPartitionAttrHelper(), isa<PartitionAttr>(value), "#zero.partition<...>"),
       })
    if (failed(r))
      return r;
  return success();
}

Operation *ZeroDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                            Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
