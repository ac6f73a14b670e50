//===- Quantize.cpp - blockwise int8 quantization (ZeRO++ qwZ) ------------===//
//
// quantize: in (1-D float32/bfloat16/float16, N) -> values (int8, N), scales
// (float32, N / block). Per block: scale = max |x| / 127, q = x / scale
// rounded half to even (as the GPU's __float2int_rn), in [-127, 127]; a block
// of zeros has scale 0 and q 0. dequantize: values, scales -> out (1-D float,
// N) = q x scale, rounded to out's type. ints[0]: the block size.
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"

#include <cmath>

namespace zrt::cpu {

namespace {

/// The element type and block check shared by both directions.
std::string checkBlocks(const TensorRef &floats, const TensorRef &values, const TensorRef &scales,
                        const std::vector<int64_t> &ints) {
  if (ints.size() != 1 || ints[0] < 1)
    return "expects one attribute, the block size (>= 1)";
  int64_t block = ints[0];
  if (!isFloatStorage(floats.dtype) || values.dtype != DType::I8 || scales.dtype != DType::F32 ||
      floats.shape.size() != 1 || values.shape.size() != 1 || scales.shape.size() != 1 ||
      values.shape[0] != floats.shape[0] || floats.shape[0] % block ||
      scales.shape[0] * block != floats.shape[0])
    return "expects a 1-D float tensor of N elements, int8 values of N and float32 scales of N / " +
           std::to_string(block) + ", got " + describe(floats) + ", " + describe(values) + ", " +
           describe(scales);
  return "";
}

float load(const TensorRef &t, int64_t k) {
  return t.dtype == DType::F32 ? t.as<float>()[k] : loadNarrow(t, k);
}

void store(const TensorRef &t, int64_t k, float v) {
  if (t.dtype == DType::F32)
    t.as<float>()[k] = v;
  else
    storeNarrow(t, k, v);
}

} // namespace

std::string checkQuantize(const KernelCall &c) {
  if (auto e = arity(c, 1, 2); !e.empty())
    return e;
  return checkBlocks(c.in[0], c.out[0], c.out[1], c.ints);
}

Status runQuantize(const KernelCall &c) {
  const TensorRef &in = c.in[0];
  int8_t *q = c.out[0].as<int8_t>();
  float *scales = c.out[1].as<float>();
  const int64_t block = c.ints[0], blocks = in.numel() / block;
  for (int64_t b = 0; b < blocks; ++b) {
    float peak = 0;
    for (int64_t k = b * block; k < (b + 1) * block; ++k)
      peak = std::max(peak, std::fabs(load(in, k)));
    float scale = peak / 127.0f;
    scales[b] = scale;
    for (int64_t k = b * block; k < (b + 1) * block; ++k) {
      float v = scale > 0 ? std::nearbyint(load(in, k) / scale) : 0.0f;
      q[k] = (int8_t)std::min(127.0f, std::max(-127.0f, v));
    }
  }
  return Status::ok();
}

std::string checkDequantize(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  return checkBlocks(c.out[0], c.in[0], c.in[1], c.ints);
}

Status runDequantize(const KernelCall &c) {
  const int8_t *q = c.in[0].as<int8_t>();
  const float *scales = c.in[1].as<float>();
  const int64_t block = c.ints[0], n = c.out[0].numel();
  for (int64_t k = 0; k < n; ++k)
    store(c.out[0], k, (float)q[k] * scales[k / block]);
  return Status::ok();
}

} // namespace zrt::cpu
