//===- OnnxUtils.h - reading ONNX protobuf fields ----------------*- C++ -*-===//
#ifndef ZCC_LIB_IMPORT_ONNX_ONNXUTILS_H
#define ZCC_LIB_IMPORT_ONNX_ONNXUTILS_H

#include "HostTensor.h"
#include "onnx/onnx_pb.h"

#include <optional>
#include <string>

namespace zcc::onnx_import {

const onnx::AttributeProto *findAttr(const onnx::NodeProto &node, const std::string &name);
int64_t attrInt(const onnx::NodeProto &node, const std::string &name, int64_t dflt);
float attrFloat(const onnx::NodeProto &node, const std::string &name, float dflt);
std::string attrString(const onnx::NodeProto &node, const std::string &name,
                       const std::string &dflt);
std::optional<std::vector<int64_t>> attrInts(const onnx::NodeProto &node, const std::string &name);

/// Reads the raw little-endian bytes of |tensor| from its typed fields or
/// raw_data (external data is resolved by the caller, which knows the model's
/// folder). Returns false and sets |error| on a malformed tensor.
bool tensorBytes(const onnx::TensorProto &tensor, std::string &bytes, std::string &error);

/// Size in bytes of one element of |onnxType|, 0 if unsupported.
int64_t elementSize(int32_t onnxType);

/// Decodes little-endian |bytes| of |type| and |shape| into a HostTensor.
bool decodeHostTensor(int32_t type, llvm::ArrayRef<int64_t> shape, const std::string &bytes,
                      HostTensor &out, std::string &error);

/// Converts a TensorProto that holds its data inline into a HostTensor.
bool toHostTensor(const onnx::TensorProto &tensor, HostTensor &out, std::string &error);

} // namespace zcc::onnx_import

#endif // ZCC_LIB_IMPORT_ONNX_ONNXUTILS_H
