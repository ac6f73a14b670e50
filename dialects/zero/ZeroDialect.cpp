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
  auto expect = [&](auto helper, auto typed, StringRef syntax) -> LogicalResult {
    if (attr.getName() != helper.getNameStr() || typed)
      return success();
    return op->emitError() << "'" << helper.getNameStr() << "' must be a " << syntax
                           << " attribute, got " << attr.getValue();
  };
  return success(succeeded(expect(getTrainingAttrHelper(), isa<TrainingAttr>(attr.getValue()),
                                  "#zero.training<...>")) &&
                 succeeded(expect(getLossScalingAttrHelper(), isa<LossScalingAttr>(attr.getValue()),
                                  "#zero.loss_scaling<...>")));
}

Operation *ZeroDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                            Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
