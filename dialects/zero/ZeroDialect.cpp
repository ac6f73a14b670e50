//===- ZeroDialect.cpp - zero dialect registration ------------------------===//
#include "zero/ZeroOps.h"

using namespace mlir;
using namespace zcc::zero;

#include "zero/ZeroDialect.cpp.inc"
#include "zero/ZeroEnums.cpp.inc"

void ZeroDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "zero/ZeroOps.cpp.inc"
      >();
}

Operation *ZeroDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                            Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
