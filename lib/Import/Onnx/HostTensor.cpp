//===- HostTensor.cpp - constant tensors and shape rules of the importer ===//
//
// What the importer and the constant folder share: HostTensor (a small
// host-side tensor of any ONNX numeric type), ONNX type names, axis and
// broadcast rules, and the shape rules of the view ops (Reshape, Flatten,
// Squeeze, Unsqueeze, Transpose) and Slice.
//
//===----------------------------------------------------------------------===//
#include "HostTensor.h"
#include "OnnxUtils.h"
#include "support/Shape.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace zcc::onnx_import;
using llvm::ArrayRef;
using llvm::SmallVector;

bool zcc::onnx_import::isFloatType(int32_t t) {
  return t == kFloat || t == kDouble || t == kFloat16 || t == kBfloat16;
}

const char *zcc::onnx_import::onnxTypeName(int32_t t) {
  switch (t) {
  case kFloat:
    return "float";
  case kUint8:
    return "uint8";
  case kInt8:
    return "int8";
  case kUint16:
    return "uint16";
  case kInt16:
    return "int16";
  case kInt32:
    return "int32";
  case kInt64:
    return "int64";
  case kString:
    return "string";
  case kBool:
    return "bool";
  case kFloat16:
    return "float16";
  case kDouble:
    return "double";
  case kUint32:
    return "uint32";
  case kUint64:
    return "uint64";
  case kBfloat16:
    return "bfloat16";
  default:
    return "unknown";
  }
}

HostTensor::HostTensor(int32_t type, ArrayRef<int64_t> shape) : type(type), shape(shape) {
  if (isFloat())
    f.assign(numel(), 0.0);
  else
    i.assign(numel(), 0);
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

void HostTensor::set(int64_t k, double v) {
  if (isFloat())
    f[k] = v;
  else
    i[k] = type == kBool ? (v != 0) : (int64_t)v;
}

std::vector<int64_t> HostTensor::toInts() const {
  if (!isFloat())
    return i;
  std::vector<int64_t> out(f.size());
  for (size_t k = 0; k < f.size(); ++k)
    out[k] = (int64_t)f[k];
  return out;
}

HostTensor HostTensor::cast(int32_t newType) const {
  HostTensor out(newType, shape);
  for (int64_t k = 0, n = numel(); k < n; ++k) {
    if (isFloat() && out.isFloat())
      out.f[k] = newType == kFloat ? (double)(float)f[k] : f[k];
    else if (isFloat())
      out.i[k] = newType == kBool ? (f[k] != 0) : (int64_t)f[k];
    else if (out.isFloat())
      out.f[k] = (double)i[k];
    else
      out.i[k] = newType == kBool ? (i[k] != 0) : i[k];
  }
  return out;
}

bool zcc::onnx_import::normalizeAxis(int64_t &axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return false;
  if (axis < 0)
    axis += rank;
  return true;
}

bool zcc::onnx_import::broadcastShape(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                                      llvm::SmallVectorImpl<int64_t> &out) {
  return zrt::broadcastShapes(a, b, out);
}

bool zcc::onnx_import::inferViewShape(const onnx::NodeProto &node, ArrayRef<int64_t> in,
                                      const std::vector<int64_t> *arg,
                                      llvm::SmallVectorImpl<int64_t> &out, std::string &error) {
  const std::string &op = node.op_type();
  int64_t rank = in.size();
  out.clear();
  if (op == "Reshape") {
    if (!arg) {
      error = "Reshape needs a target shape";
      return false;
    }
    bool allowZero = attrInt(node, "allowzero", 0);
    int64_t known = 1, inferAt = -1;
    for (size_t d = 0; d < arg->size(); ++d) {
      int64_t t = (*arg)[d];
      if (t == 0 && !allowZero) {
        if ((int64_t)d >= rank) {
          error = "target dimension " + std::to_string(d) + " is 0 (copy) but the input has rank " +
                  std::to_string(rank);
          return false;
        }
        t = in[d];
      }
      if (t == -1) {
        if (inferAt >= 0) {
          error = "the target shape has more than one -1";
          return false;
        }
        inferAt = d;
      } else if (t < 0 || llvm::MulOverflow(known, t, known) || known > kMaxTensorElements) {
        error = "invalid target dimension " + std::to_string((*arg)[d]);
        return false;
      }
      out.push_back(t);
    }
    int64_t numel = checkedNumel(in);
    if (inferAt >= 0) {
      if (known == 0 || numel % known) {
        error = "cannot infer the -1 dimension";
        return false;
      }
      out[inferAt] = numel / known;
    }
    if (checkedNumel(out) != numel) {
      error = "the target shape changes the element count";
      return false;
    }
    return true;
  }
  if (op == "Flatten") {
    int64_t axis = attrInt(node, "axis", 1);
    if (axis < 0)
      axis += rank;
    if (axis < 0 || axis > rank) {
      error = "axis " + std::to_string(attrInt(node, "axis", 1)) + " is out of range";
      return false;
    }
    int64_t lead = checkedNumel(in.take_front(axis));
    out.push_back(lead);
    out.push_back(checkedNumel(in.drop_front(axis)));
    return true;
  }
  // Squeeze / Unsqueeze: axes from the attribute (opset < 13) or the input.
  std::vector<int64_t> axes;
  if (auto a = attrInts(node, "axes"))
    axes = *a;
  else if (arg)
    axes = *arg;
  if (op == "Squeeze") {
    SmallVector<bool> drop(rank, false);
    if (axes.empty())
      for (int64_t d = 0; d < rank; ++d)
        drop[d] = in[d] == 1;
    for (int64_t a : axes) {
      if (!normalizeAxis(a, rank) || in[a] != 1) {
        error = "cannot squeeze axis " + std::to_string(a) + ": out of range or not of size 1";
        return false;
      }
      drop[a] = true;
    }
    for (int64_t d = 0; d < rank; ++d)
      if (!drop[d])
        out.push_back(in[d]);
    return true;
  }
  int64_t outRank = rank + axes.size();
  SmallVector<bool> inserted(outRank, false);
  for (int64_t a : axes) {
    if (!normalizeAxis(a, outRank) || inserted[a]) {
      error = "unsqueeze axes are out of range or repeated";
      return false;
    }
    inserted[a] = true;
  }
  for (int64_t d = 0, j = 0; d < outRank; ++d)
    out.push_back(inserted[d] ? 1 : in[j++]);
  return true;
}

bool zcc::onnx_import::computeSlice(ArrayRef<int64_t> shape, ArrayRef<int64_t> starts,
                                    ArrayRef<int64_t> ends, const std::vector<int64_t> *axes,
                                    const std::vector<int64_t> *steps, SliceParams &p,
                                    std::string &error) {
  int64_t rank = shape.size();
  p.start.assign(rank, 0);
  p.step.assign(rank, 1);
  p.count.assign(shape.begin(), shape.end());
  if (starts.size() != ends.size() || (axes && axes->size() != starts.size()) ||
      (steps && steps->size() != starts.size())) {
    error = "starts, ends, axes and steps must have the same length";
    return false;
  }
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t axis = axes ? (*axes)[k] : (int64_t)k;
    if (!normalizeAxis(axis, rank)) {
      error = "slice axis " + std::to_string(axes ? (*axes)[k] : k) + " is out of range";
      return false;
    }
    int64_t dim = shape[axis], step = steps ? (*steps)[k] : 1;
    if (step == 0) {
      error = "slice step must not be 0";
      return false;
    }
    // Clamp first so that adding dim cannot overflow.
    int64_t s = std::clamp<int64_t>(starts[k], -dim - 1, dim + 1);
    int64_t e = std::clamp<int64_t>(ends[k], -dim - 1, dim + 1);
    if (s < 0)
      s += dim;
    if (e < 0)
      e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      p.count[axis] = e > s ? 1 + (e - s - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      int64_t stride = step == INT64_MIN ? INT64_MAX : -step;
      p.count[axis] = s > e ? 1 + (s - e - 1) / stride : 0;
    }
    p.start[axis] = s;
    p.step[axis] = step;
  }
  return true;
}
