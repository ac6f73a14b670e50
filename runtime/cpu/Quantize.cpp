//===- Quantize.cpp - blockwise int8/int4 quantization (ZeRO++ qwZ, qgZ) --===//
//
// quantize: in (1-D float32/bfloat16/float16, N) -> values (int8, N x bits /
// 8), scales (float32, N / block). Per block: scale = max |x| / L (L = 127
// for 8 bits, 7 for 4), q = x / scale rounded half to even (as the GPU's
// __float2int_rn), in [-L, L]; a block of zeros has scale 0 and q 0. 4 bits
// pack element 2i in the low nibble of byte i, 2i + 1 in the high one.
// ints: the block size, then optionally the bits (8), then optionally A and
// G: the input read as A x G chunks in G x A order (qgZ's reordering; chunk
// a * G + g quantized at position g * A + a).
// dequantize: values, scales -> out (1-D float, N / parts): the sum over the
// parts p (N / parts elements each, in order, float32) of q x scale, divided
// by parts when averaging, rounded once to out's type. ints: the block size,
// then optionally parts, average (0/1) and bits; parts 1: q x scale.
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"
#include "kernels/Quantization.h"

#include <cmath>

namespace zrt::cpu {

namespace {

/// The element type and block check shared by both directions: |floats|
/// one of |parts| equal parts of the quantized tensor.
std::string checkBlocks(const TensorRef &floats, const TensorRef &values, const TensorRef &scales,
                        int64_t block, int64_t parts, int64_t bits) {
  if (block < 1 || parts < 1 || (bits != 8 && bits != 4) || (bits == 4 && block % 2))
    return "expects a block size >= 1 (even for 4 bits), parts >= 1 and 8 or 4 bits";
  if (!isFloatStorage(floats.dtype) || values.dtype != DType::I8 || scales.dtype != DType::F32 ||
      floats.shape.size() != 1 || values.shape.size() != 1 || scales.shape.size() != 1 ||
      floats.shape[0] % block || values.shape[0] != floats.shape[0] * parts * bits / 8 ||
      scales.shape[0] * block != floats.shape[0] * parts)
    return "expects " + std::to_string(parts) + " part(s) of a 1-D float tensor of N elements, " +
           std::to_string(bits) + "-bit values (N x " + std::to_string(bits) +
           " / 8 bytes) and float32 scales of N / " + std::to_string(block) + " each, got " +
           describe(floats) + ", " + describe(values) + ", " + describe(scales);
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
  if (c.ints.size() != 1 && c.ints.size() != 2 && c.ints.size() != 4)
    return "expects the block size, optionally then the bits and the chunks A, G";
  const QuantizeAttrs a = QuantizeAttrs::of(c.ints);
  const int64_t n = c.in[0].numel();
  if (a.outer < 1 || a.inner < 1 || n % (a.outer * a.inner) ||
      (a.block >= 1 && n / (a.outer * a.inner) % a.block))
    return "expects chunks A, G that split the input into A x G chunks of whole blocks";
  return checkBlocks(c.in[0], c.out[0], c.out[1], a.block, 1, a.bits);
}

Status runQuantize(const KernelCall &c) {
  const TensorRef &in = c.in[0];
  int8_t *q = c.out[0].as<int8_t>();
  float *scales = c.out[1].as<float>();
  const QuantizeAttrs a = QuantizeAttrs::of(c.ints);
  const int64_t block = a.block, n = in.numel(), blocks = n / block;
  const float levels = quantizeLevels(a.bits);
  std::vector<int8_t> level(block);
  for (int64_t b = 0; b < blocks; ++b) {
    // A block lies in one chunk: its source is contiguous.
    const int64_t from = quantizeSource(b * block, n, a.outer, a.inner);
    float peak = 0;
    for (int64_t k = 0; k < block; ++k)
      peak = std::max(peak, std::fabs(load(in, from + k)));
    float scale = peak / levels;
    scales[b] = scale;
    for (int64_t k = 0; k < block; ++k) {
      float v = scale > 0 ? std::nearbyint(load(in, from + k) / scale) : 0.0f;
      level[k] = (int8_t)std::min(levels, std::max(-levels, v));
    }
    if (a.bits == 8)
      std::copy(level.begin(), level.end(), q + b * block);
    else
      for (int64_t k = 0; k < block; k += 2)
        q[(b * block + k) / 2] = packNibbles(level[k], level[k + 1]);
  }
  return Status::ok();
}

std::string checkDequantize(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  const std::vector<int64_t> &i = c.ints;
  if ((i.size() != 1 && i.size() != 3 && i.size() != 4) || (i.size() > 1 && i[2] != 0 && i[2] != 1))
    return "expects the block size, optionally then parts, average (0 or 1) and the bits";
  const DequantizeAttrs a = DequantizeAttrs::of(i);
  return checkBlocks(c.out[0], c.in[0], c.in[1], a.block, a.parts, a.bits);
}

Status runDequantize(const KernelCall &c) {
  const int8_t *q = c.in[0].as<int8_t>();
  const float *scales = c.in[1].as<float>();
  const DequantizeAttrs a = DequantizeAttrs::of(c.ints);
  const int64_t n = c.out[0].numel();
  for (int64_t k = 0; k < n; ++k) {
    float acc = (float)quantizedValue(q, k, a.bits) * scales[k / a.block];
    for (int64_t p = 1; p < a.parts; ++p) {
      int64_t at = p * n + k;
      acc += (float)quantizedValue(q, at, a.bits) * scales[at / a.block];
    }
    store(c.out[0], k, a.average ? acc / (float)a.parts : acc);
  }
  return Status::ok();
}

} // namespace zrt::cpu
