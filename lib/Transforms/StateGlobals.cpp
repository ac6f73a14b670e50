//===- StateGlobals.cpp - globals the passes add beside the model's -------===//
#include "zcc/Transforms/StateGlobals.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace zcc::zero;

std::string zcc::uniqueGlobalName(ModuleOp module, StringRef base) {
  std::string name = base.str();
  for (int k = 1; module.lookupSymbol(name); ++k)
    name = (base + "." + Twine(k)).str();
  return name;
}

GlobalOp zcc::createMemberSlice(ModuleOp module, GlobalOp member, StringRef suffix, GlobalRole role,
                                GlobalOp bucket) {
  OpBuilder b(member);
  b.setInsertionPointAfter(member);
  auto type = RankedTensorType::get(member.getTensorType().getShape(),
                                    bucket.getTensorType().getElementType());
  auto slice = GlobalOp::create(
      b, member.getLoc(), uniqueGlobalName(module, (member.getSymName() + suffix).str()), role,
      /*trainable=*/false, type,
      DenseElementsAttr::get(type, FloatAttr::get(type.getElementType(), 0.0)));
  slice.setBucketAttr(FlatSymbolRefAttr::get(bucket.getSymNameAttr()));
  slice.setBucketOffsetAttr(member.getBucketOffsetAttr());
  return slice;
}
