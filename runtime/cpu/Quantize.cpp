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

/// Quantized element k of |q| (|bits| per element).
int quantized(const int8_t *q, int64_t k, int64_t bits) {
  if (bits == 8)
    return q[k];
  int8_t b = q[k / 2];
  int nibble = k % 2 ? ((uint8_t)b >> 4) : (b & 0xF); // two's complement in 4 bits
  return nibble >= 8 ? nibble - 16 : nibble;
}

/// Where the quantized element |at| (of n) is read from when the input is
/// outer x inner chunks quantized in inner x outer order.
int64_t quantizeSource(int64_t at, int64_t n, int64_t outer, int64_t inner) {
  if (outer * inner <= 1)
    return at;
  const int64_t chunk = n / (outer * inner);
  const int64_t g = at / (outer * chunk), a = at / chunk % outer;
  return (a * inner + g) * chunk + at % chunk;
}

} // namespace

std::string checkQuantize(const KernelCall &c) {
  if (auto e = arity(c, 1, 2); !e.empty())
    return e;
  const std::vector<int64_t> &i = c.ints;
  if (i.size() != 1 && i.size() != 2 && i.size() != 4)
    return "expects the block size, optionally then the bits and the chunks A, G";
  if (i.size() == 4 && (i[2] < 1 || i[3] < 1 || c.in[0].numel() % (i[2] * i[3]) || i[0] < 1 ||
                        c.in[0].numel() / (i[2] * i[3]) % i[0]))
    return "expects chunks A, G that split the input into A x G chunks of whole blocks";
  return checkBlocks(c.in[0], c.out[0], c.out[1], i[0], 1, i.size() >= 2 ? i[1] : 8);
}

Status runQuantize(const KernelCall &c) {
  const TensorRef &in = c.in[0];
  int8_t *q = c.out[0].as<int8_t>();
  float *scales = c.out[1].as<float>();
  const int64_t block = c.ints[0], n = in.numel(), blocks = n / block;
  const int64_t bits = c.ints.size() >= 2 ? c.ints[1] : 8;
  const int64_t outer = c.ints.size() == 4 ? c.ints[2] : 1,
                inner = c.ints.size() == 4 ? c.ints[3] : 1;
  const float levels = bits == 8 ? 127.0f : 7.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    // A block lies in one chunk: its source is contiguous.
    const int64_t from = quantizeSource(b * block, n, outer, inner) - b * block;
    float peak = 0;
    for (int64_t k = b * block; k < (b + 1) * block; ++k)
      peak = std::max(peak, std::fabs(load(in, from + k)));
    float scale = peak / levels;
    scales[b] = scale;
    for (int64_t k = b * block; k < (b + 1) * block; ++k) {
      float v = scale > 0 ? std::nearbyint(load(in, from + k) / scale) : 0.0f;
      int8_t value = (int8_t)std::min(levels, std::max(-levels, v));
      if (bits == 8)
        q[k] = value;
      else if (k % 2 == 0)
        q[k / 2] = (int8_t)(value & 0xF);
      else
        q[k / 2] = (int8_t)((uint8_t)q[k / 2] | (uint8_t)((value & 0xF) << 4));
    }
  }
  return Status::ok();
}

std::string checkDequantize(const KernelCall &c) {
  if (auto e = arity(c, 2, 1); !e.empty())
    return e;
  const std::vector<int64_t> &i = c.ints;
  if ((i.size() != 1 && i.size() != 3 && i.size() != 4) || (i.size() > 1 && i[2] != 0 && i[2] != 1))
    return "expects the block size, optionally then parts, average (0 or 1) and the bits";
  return checkBlocks(c.out[0], c.in[0], c.in[1], i[0], i.size() > 1 ? i[1] : 1,
                     i.size() == 4 ? i[3] : 8);
}

Status runDequantize(const KernelCall &c) {
  const int8_t *q = c.in[0].as<int8_t>();
  const float *scales = c.in[1].as<float>();
  const int64_t block = c.ints[0], n = c.out[0].numel();
  const int64_t parts = c.ints.size() > 1 ? c.ints[1] : 1;
  const bool average = c.ints.size() > 1 && c.ints[2];
  const int64_t bits = c.ints.size() == 4 ? c.ints[3] : 8;
  for (int64_t k = 0; k < n; ++k) {
    float acc = (float)quantized(q, k, bits) * scales[k / block];
    for (int64_t p = 1; p < parts; ++p) {
      int64_t at = p * n + k;
      acc += (float)quantized(q, at, bits) * scales[at / block];
    }
    store(c.out[0], k, average ? acc / (float)parts : acc);
  }
  return Status::ok();
}

} // namespace zrt::cpu
