//===- OnnxUtils.cpp - reading ONNX protobuf fields -----------------------===//
#include "OnnxUtils.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/Support/Endian.h"

#include <cstring>

using namespace zcc::onnx_import;

const onnx::AttributeProto *zcc::onnx_import::findAttr(const onnx::NodeProto &node,
                                                       const std::string &name) {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t zcc::onnx_import::attrInt(const onnx::NodeProto &node, const std::string &name,
                                  int64_t dflt) {
  const auto *a = findAttr(node, name);
  return a ? a->i() : dflt;
}

float zcc::onnx_import::attrFloat(const onnx::NodeProto &node, const std::string &name,
                                  float dflt) {
  const auto *a = findAttr(node, name);
  return a ? a->f() : dflt;
}

std::string zcc::onnx_import::attrString(const onnx::NodeProto &node, const std::string &name,
                                         const std::string &dflt) {
  const auto *a = findAttr(node, name);
  return a ? a->s() : dflt;
}

std::optional<std::vector<int64_t>> zcc::onnx_import::attrInts(const onnx::NodeProto &node,
                                                               const std::string &name) {
  const auto *a = findAttr(node, name);
  if (!a)
    return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

int64_t zcc::onnx_import::elementSize(int32_t t) {
  switch (t) {
  case kFloat:
  case kInt32:
  case kUint32:
    return 4;
  case kDouble:
  case kInt64:
  case kUint64:
    return 8;
  case kFloat16:
  case kBfloat16:
  case kInt16:
  case kUint16:
    return 2;
  case kInt8:
  case kUint8:
  case kBool:
    return 1;
  default:
    return 0;
  }
}

bool zcc::onnx_import::tensorBytes(const onnx::TensorProto &t, std::string &bytes,
                                   std::string &error) {
  int64_t numel = checkedNumel(llvm::SmallVector<int64_t>(t.dims().begin(), t.dims().end()));
  if (numel < 0) {
    error = "tensor '" + t.name() + "' has a negative or impossibly large dimension";
    return false;
  }
  int64_t esize = elementSize(t.data_type());
  if (!esize) {
    error = std::string("tensor '") + t.name() + "' has unsupported element type " +
            onnxTypeName(t.data_type());
    return false;
  }
  if (t.has_raw_data()) {
    bytes = t.raw_data();
  } else {
    bytes.clear();
    auto put = [&](const void *p, size_t n) { bytes.append((const char *)p, n); };
    switch (t.data_type()) {
    case kFloat:
      for (float v : t.float_data())
        put(&v, 4);
      break;
    case kDouble:
      for (double v : t.double_data())
        put(&v, 8);
      break;
    case kInt64:
      for (int64_t v : t.int64_data())
        put(&v, 8);
      break;
    case kUint32:
    case kUint64:
      for (uint64_t v : t.uint64_data())
        put(&v, esize);
      break;
    default: // int32_data holds int32, int16, int8, bool, float16, bfloat16
      for (int32_t v : t.int32_data())
        put(&v, esize);
      break;
    }
  }
  if ((int64_t)bytes.size() != numel * esize) {
    error = "tensor '" + t.name() + "' holds " + std::to_string(bytes.size()) +
            " bytes of data, but its shape and type need " + std::to_string(numel * esize);
    return false;
  }
  return true;
}

static double halfToDouble(uint16_t bits, bool bf16) {
  llvm::APFloat v(bf16 ? llvm::APFloat::BFloat() : llvm::APFloat::IEEEhalf(),
                  llvm::APInt(16, bits));
  return v.convertToDouble();
}

bool zcc::onnx_import::decodeHostTensor(int32_t type, llvm::ArrayRef<int64_t> shape,
                                        const std::string &bytes, HostTensor &out,
                                        std::string &error) {
  out = HostTensor(type, shape);
  int64_t n = out.numel(), esize = elementSize(type);
  if (!esize || (int64_t)bytes.size() != n * esize) {
    error = "tensor data has the wrong size";
    return false;
  }
  const char *p = bytes.data();
  using namespace llvm::support;
  for (int64_t k = 0; k < n; ++k, p += esize) {
    switch (type) {
    case kFloat: {
      uint32_t b = endian::read32le(p);
      float v;
      memcpy(&v, &b, 4);
      out.f[k] = v;
      break;
    }
    case kDouble: {
      uint64_t b = endian::read64le(p);
      double v;
      memcpy(&v, &b, 8);
      out.f[k] = v;
      break;
    }
    case kFloat16:
      out.f[k] = halfToDouble(endian::read16le(p), false);
      break;
    case kBfloat16:
      out.f[k] = halfToDouble(endian::read16le(p), true);
      break;
    case kInt64:
    case kUint64:
      out.i[k] = (int64_t)endian::read64le(p);
      break;
    case kInt32:
      out.i[k] = (int32_t)endian::read32le(p);
      break;
    case kUint32:
      out.i[k] = endian::read32le(p);
      break;
    case kInt16:
      out.i[k] = (int16_t)endian::read16le(p);
      break;
    case kUint16:
      out.i[k] = endian::read16le(p);
      break;
    case kInt8:
      out.i[k] = (int8_t)*p;
      break;
    case kUint8:
      out.i[k] = (uint8_t)*p;
      break;
    case kBool:
      out.i[k] = *p != 0;
      break;
    default:
      error = std::string("unsupported element type ") + onnxTypeName(type);
      return false;
    }
  }
  return true;
}

bool zcc::onnx_import::toHostTensor(const onnx::TensorProto &t, HostTensor &out,
                                    std::string &error) {
  std::string bytes;
  if (!tensorBytes(t, bytes, error))
    return false;
  llvm::SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  return decodeHostTensor(t.data_type(), shape, bytes, out, error);
}
