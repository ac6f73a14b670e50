//===- StateGlobals.cpp - globals the passes add beside the model's -------===//
#include "zcc/Transforms/StateGlobals.h"

#include "zcc/Analysis/MemoryPlan.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <cctype>
#include <cstring>

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

FailureOr<ElementsAttr>
zcc::packBucketInitialValue(ArrayRef<std::pair<zero::GlobalOp, int64_t>> members, int64_t size,
                            StringRef name) {
  assert(!members.empty() && "a bucket has members");
  GlobalOp front = members.front().first;
  MLIRContext *ctx = front.getContext();
  auto f32 = Float32Type::get(ctx);
  auto type = RankedTensorType::get({size}, f32);
  if (llvm::all_of(members, [](std::pair<GlobalOp, int64_t> m) {
        auto splat = dyn_cast_if_present<DenseElementsAttr>(m.first.getInitialValueAttr());
        return splat && splat.isSplat() && splat.getSplatValue<APFloat>().isZero();
      }))
    return cast<ElementsAttr>(DenseElementsAttr::get(type, FloatAttr::get(f32, 0.0)));
  std::vector<char> bytes(size * sizeof(float), 0);
  for (std::pair<GlobalOp, int64_t> m : members) {
    auto [param, offset] = m;
    auto init = param.getInitialValueAttr();
    if (!init)
      return param.emitError("zero-partition: a parameter without an initial value");
    auto data = elementBytes(init, param.getLoc());
    if (failed(data))
      return failure();
    std::memcpy(bytes.data() + offset * sizeof(float), data->data(), data->size());
  }
  auto blob =
      HeapAsmResourceBlob::allocateAndCopyWithAlign(ArrayRef<char>(bytes), alignof(uint64_t));
  std::string key = name.str();
  for (char &c : key)
    if (!std::isalnum((unsigned char)c) && c != '_' && c != '.')
      c = '_';
  return cast<ElementsAttr>(DenseResourceElementsAttr::get(type, key, std::move(blob)));
}
