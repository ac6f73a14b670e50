//===- ElementwiseTest.cpp - the CPU's multi-core elementwise kernels -----===//
//
// Large element-wise kernels (the offloaded AdamW, flat binary ops) split
// their work over a process-wide pool of threads; in-process ranks call them
// from several threads at once. The results must be those of one thread.
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"
#include "cpu/Kernels.h"
#include "train/Npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

using namespace zrt;
using zrt::BF16;

namespace {
/// A view of |v| (float32 or bfloat16 elements) as a tensor of |shape|.
template <typename T> TensorRef ref(std::vector<T> &v, std::vector<int64_t> shape) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, BF16>);
  TensorRef t;
  t.dtype = std::is_same_v<T, float> ? DType::F32 : DType::BF16;
  t.shape = std::move(shape);
  t.data = reinterpret_cast<char *>(v.data());
  return t;
}
} // namespace

TEST(Elementwise, ScalarMultiplyFromSeveralThreads) {
  // 1M elements (pool path) times a scalar, from 4 threads at once.
  const int64_t n = 1 << 20;
  std::vector<std::thread> callers;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      std::vector<float> a(n), s{0.5f + t}, o(n, -1.0f);
      for (int64_t k = 0; k < n; ++k)
        a[k] = (float)(k % 1000) * 0.25f;
      KernelCall c;
      c.in = {ref(a, {n}), ref(s, {})};
      c.out = {ref(o, {n})};
      if (!cpuKernel(KernelId::Mul).run(c))
        return;
      bool same = true;
      for (int64_t k = 0; k < n; ++k)
        same &= o[k] == a[k] * s[0];
      ok[t] = same;
    });
  for (std::thread &t : callers)
    t.join();
  EXPECT_EQ(ok, (std::vector<int>{1, 1, 1, 1}));
}

TEST(Elementwise, AdamWOverThePoolMatchesOneElementAtATime) {
  const int64_t n = (1 << 18) + 7; // several blocks and a ragged end
  std::vector<float> p(n), g(n), m(n), v(n), lr{1e-3f}, step{3.0f}, po(n), mo(n), vo(n);
  for (int64_t k = 0; k < n; ++k) {
    p[k] = std::sin((float)k);
    g[k] = std::cos((float)k * 0.5f);
    m[k] = 0.01f * g[k];
    v[k] = 0.001f * g[k] * g[k];
  }
  KernelCall c;
  c.in = {ref(p, {n}), ref(g, {n}), ref(m, {n}), ref(v, {n}), ref(lr, {}), ref(step, {})};
  c.out = {ref(po, {n}), ref(mo, {n}), ref(vo, {n})};
  c.floats = {0.9, 0.999, 1e-8, 0.01};
  ASSERT_TRUE(cpuKernel(KernelId::Adamw).run(c));
  // The same call on a 3-element slice at the end (the caller alone) gives
  // the same bits for those elements.
  int64_t at = n - 3;
  std::vector<float> p3(p.begin() + at, p.end()), g3(g.begin() + at, g.end()),
      m3(m.begin() + at, m.end()), v3(v.begin() + at, v.end()), po3(3), mo3(3), vo3(3);
  KernelCall c3 = c;
  c3.in = {ref(p3, {3}), ref(g3, {3}), ref(m3, {3}), ref(v3, {3}), ref(lr, {}), ref(step, {})};
  c3.out = {ref(po3, {3}), ref(mo3, {3}), ref(vo3, {3})};
  ASSERT_TRUE(cpuKernel(KernelId::Adamw).run(c3));
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(po3[k], po[at + k]);
    EXPECT_EQ(mo3[k], mo[at + k]);
    EXPECT_EQ(vo3[k], vo[at + k]);
  }
}

TEST(Elementwise, FusedProgramReadsShiftedAndPicksAtTheSeam) {
  // y = -(concat(-x[:, 3:], x[:, :3]) * s) (RoPE's rotate-half, then a
  // broadcast product) as zero-fuse-elementwise writes it: loads at shifted,
  // clamped coordinates and a pick on axis 1 at 3.
  std::vector<float> x(12), s{1, 2, 3, 4, 5, 6}, y(12, -7.0f);
  for (int64_t k = 0; k < 12; ++k)
    x[k] = (float)k;
  const int64_t f32 = 1; // plan::F32
  KernelCall c;
  c.in = {ref(x, {2, 6}), ref(s, {6})};
  c.out = {ref(y, {2, 6})};
  c.ints = {2, 7,
            // (opcode, a, b, c, dtype)
            6, 0, -1, 0, f32,  // 0: x at (i, j + 3), clamped
            4, 0, -1, -1, f32, // 1: -step 0
            6, 0, -1, 2, f32,  // 2: x at (i, j - 3), clamped
            7, 1, 2, 4, f32,   // 3: j < 3 ? step 1 : step 2
            6, 1, -1, -1, f32, // 4: s, broadcast
            2, 3, 4, -1, f32,  // 5: step 3 * step 4
            4, 5, -1, -1, f32, // 6: -step 5
            6,                 // the output stores step 6
            // offsets: the shifts (0, 3) and (0, -3), the seam (axis 1, 3)
            0, 3, 0, -3, 1, 3};
  const KernelInfo &kernel = cpuKernel(KernelId::Elementwise);
  ASSERT_EQ(kernel.check(c), "");
  ASSERT_TRUE(kernel.run(c));
  std::vector<float> want(12);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 6; ++j)
      want[i * 6 + j] = -((j < 3 ? -x[i * 6 + j + 3] : x[i * 6 + j - 3]) * s[j]);
  EXPECT_EQ(y, want);

  // Rejected: a step that reads itself, a load past the offsets, a pick on
  // an axis the result does not have.
  KernelCall bad = c;
  bad.ints[2 + 5 * 6 + 1] = 6;
  EXPECT_NE(kernel.check(bad), "");
  bad = c;
  bad.ints[2 + 5 * 2 + 3] = 5;
  EXPECT_NE(kernel.check(bad), "");
  bad = c;
  bad.ints[2 + 5 * 7 + 1 + 4] = 2;
  EXPECT_NE(kernel.check(bad), "");
  // An output storing a step the program does not have.
  bad = c;
  bad.ints[2 + 5 * 7] = 7;
  EXPECT_NE(kernel.check(bad), "");
  // An empty input: nothing to clamp a coordinate into.
  std::vector<float> none;
  bad = c;
  bad.in[1] = ref(none, {0});
  EXPECT_NE(kernel.check(bad), "");
}

TEST(Elementwise, SiblingProgramsStoreEachResultFromItsStep) {
  // SwiGLU's backward as zero-fuse-elementwise merges it: du = dy silu(g)
  // and dg' = dy u sigmoid(g) from one read of dy, u and g, in bf16.
  std::vector<BF16> dy, u, g;
  for (int64_t k = 0; k < 40; ++k) {
    dy.push_back(BF16(0.25f * (float)(k % 7) - 0.5f));
    u.push_back(BF16(0.1f * (float)(k % 5) - 0.2f));
    g.push_back(BF16(0.3f * (float)(k % 9) - 1.2f));
  }
  std::vector<BF16> du(40), dg(40);
  const int64_t bf16 = 4; // plan::BF16
  KernelCall c;
  c.in = {ref(dy, {4, 10}), ref(u, {4, 10}), ref(g, {4, 10})};
  c.out = {ref(du, {4, 10}), ref(dg, {4, 10})};
  c.ints = {3,  8, 6,  0,  -1,   -1, bf16, // 0: dy
            6,  2, -1, -1, bf16,           // 1: g
            18, 1, -1, -1, bf16,           // 2: silu(g)
            2,  0, 2,  -1, bf16,           // 3: dy silu(g)
            6,  1, -1, -1, bf16,           // 4: u
            2,  0, 4,  -1, bf16,           // 5: dy u
            16, 1, -1, -1, bf16,           // 6: sigmoid(g)
            2,  5, 6,  -1, bf16,           // 7: dy u sigmoid(g)
            3,  7};                        // du stores step 3, dg step 7
  const KernelInfo &kernel = cpuKernel(KernelId::Elementwise);
  ASSERT_EQ(kernel.check(c), "");
  ASSERT_TRUE(kernel.run(c));
  auto round = [](float v) { return float(BF16(v)); };
  for (int64_t k = 0; k < 40; ++k) {
    float gv = float(g[k]);
    float silu = round(gv / (1.0f + std::exp(-gv))), sig = round(1.0f / (1.0f + std::exp(-gv)));
    EXPECT_EQ(float(du[k]), round(float(dy[k]) * silu)) << k;
    EXPECT_EQ(float(dg[k]), round(round(float(dy[k]) * float(u[k])) * sig)) << k;
  }
  // Outputs of different shapes are not one program's.
  std::vector<BF16> small(20);
  KernelCall bad = c;
  bad.out[1] = ref(small, {2, 10});
  EXPECT_NE(kernel.check(bad), "");
}

TEST(Elementwise, GatherGradIntoItsAddendMatchesGatherGradThenAdd) {
  // gather_grad with an addend (zero-fuse-epilogues: a tied embedding's two
  // gradients) gives the bits of gather_grad followed by add, in bf16 (each
  // row's sum rounded before the add) and float32, in place or not. Indices
  // repeat, skip rows, and hit the padding row.
  const int64_t rows = 9, inner = 5, n = 7;
  std::vector<int64_t> idx{3, 1, 3, 7, 3, 0, 7}; // rows 2, 4-6, 8 untouched; 0 is padding
  std::vector<int64_t> idxShape{n};
  for (DType dtype : {DType::BF16, DType::F32}) {
    size_t es = dtypeSize(dtype);
    auto tensor = [&](std::vector<char> &bytes, std::vector<int64_t> shape) {
      TensorRef t;
      t.dtype = dtype;
      t.shape = std::move(shape);
      t.data = bytes.data();
      return t;
    };
    std::vector<char> g(n * inner * es), acc(rows * inner * es), scatter(rows * inner * es),
        sum(rows * inner * es), fused(rows * inner * es);
    TensorRef gt = tensor(g, {n, inner}), at = tensor(acc, {rows, inner});
    auto store = [](const TensorRef &t, int64_t k, float v) {
      if (t.dtype == DType::F32)
        t.as<float>()[k] = v;
      else
        cpu::storeNarrow(t, k, v);
    };
    for (int64_t k = 0; k < n * inner; ++k)
      store(gt, k, std::sin(0.7f * (float)k) * 1.37f);
    for (int64_t k = 0; k < rows * inner; ++k)
      store(at, k, std::cos(0.3f * (float)k) * 3.1f);
    TensorRef it;
    it.dtype = DType::I64;
    it.shape = idxShape;
    it.data = reinterpret_cast<char *>(idx.data());
    KernelCall separate;
    separate.in = {it, gt};
    separate.out = {tensor(scatter, {rows, inner})};
    separate.ints = {0, 0};
    ASSERT_TRUE(cpuKernel(KernelId::GatherGrad).run(separate));
    KernelCall add;
    add.in = {at, separate.out[0]};
    add.out = {tensor(sum, {rows, inner})};
    ASSERT_TRUE(cpuKernel(KernelId::Add).run(add));
    KernelCall one = separate;
    one.in.push_back(at);
    one.out = {tensor(fused, {rows, inner})};
    ASSERT_EQ(cpuKernel(KernelId::GatherGrad).check(one), "");
    ASSERT_TRUE(cpuKernel(KernelId::GatherGrad).run(one));
    EXPECT_EQ(fused, sum) << "not in place, " << dtypeName(dtype);
    one.out = {at}; // in place: the addend's memory is the result's
    ASSERT_TRUE(cpuKernel(KernelId::GatherGrad).run(one));
    EXPECT_EQ(acc, sum) << "in place, " << dtypeName(dtype);
    one.in[2].shape = {rows, inner + 1};
    EXPECT_NE(cpuKernel(KernelId::GatherGrad).check(one), "");
  }
}

TEST(Elementwise, CrossEntropyGradWithTheLossMatchesBothKernels) {
  // cross_entropy_grad with the loss as a second output (zero-fuse-epilogues
  // folds the forward in) gives the forward kernel's loss and the gradient
  // kernel's dlogits, bit for bit; bf16 logits, an ignored row, padding.
  const int64_t rows = 5, stride = 12, classes = 11;
  std::vector<int64_t> labels{3, -100, 10, 0, 7}, shape{rows, stride};
  std::vector<uint16_t> x(rows * stride), dx1(rows * stride), dx2(rows * stride);
  TensorRef xt;
  xt.dtype = DType::BF16;
  xt.shape = shape;
  xt.data = reinterpret_cast<char *>(x.data());
  for (int64_t k = 0; k < rows * stride; ++k)
    cpu::storeNarrow(xt, k, 4.0f * std::sin(1.3f * (float)k));
  TensorRef yt;
  yt.dtype = DType::I64;
  yt.shape = {rows};
  yt.data = reinterpret_cast<char *>(labels.data());
  std::vector<float> dloss{0.75f}, loss1{0}, loss2{0};
  auto out = [&](std::vector<uint16_t> &v) {
    TensorRef t = xt;
    t.data = reinterpret_cast<char *>(v.data());
    return t;
  };
  KernelCall forward;
  forward.in = {xt, yt};
  forward.out = {ref(loss1, {})};
  forward.ints = {-100, classes};
  ASSERT_TRUE(cpuKernel(KernelId::CrossEntropy).run(forward));
  KernelCall grad;
  grad.in = {xt, yt, ref(dloss, {})};
  grad.out = {out(dx1)};
  grad.ints = {-100, classes};
  ASSERT_TRUE(cpuKernel(KernelId::CrossEntropyGrad).run(grad));
  KernelCall both = grad;
  both.out = {out(dx2), ref(loss2, {})};
  ASSERT_EQ(cpuKernel(KernelId::CrossEntropyGrad).check(both), "");
  ASSERT_TRUE(cpuKernel(KernelId::CrossEntropyGrad).run(both));
  EXPECT_EQ(loss2, loss1);
  EXPECT_EQ(dx2, dx1);
  EXPECT_TRUE(std::isfinite(loss1[0]) && loss1[0] > 0);
  labels[2] = 11; // out of range: the same error as the forward's
  EXPECT_FALSE(cpuKernel(KernelId::CrossEntropyGrad).run(both));
}

TEST(Quantize, BlockwiseInt8RoundsHalfToEvenAndDequantizes) {
  // Two blocks of 4: the first's peak 2.54 gives scale 0.02 (x / scale
  // rounds half to even and clamps at 127), the second is all zero.
  std::vector<float> x{2.54f, -1.27f, 0.01f, 0.03f, 0, 0, 0, 0};
  std::vector<int8_t> q(8, 99);
  std::vector<float> scales(2, -1), back(8, -1);
  auto bytes = [](auto &v, DType d, int64_t n) {
    TensorRef t;
    t.dtype = d;
    t.shape = {n};
    t.data = reinterpret_cast<char *>(v.data());
    return t;
  };
  KernelCall c;
  c.in = {bytes(x, DType::F32, 8)};
  c.out = {bytes(q, DType::I8, 8), bytes(scales, DType::F32, 2)};
  c.ints = {4};
  ASSERT_EQ(cpuKernel(KernelId::Quantize).check(c), "");
  ASSERT_TRUE(cpuKernel(KernelId::Quantize).run(c));
  const float scale = 2.54f / 127.0f;
  EXPECT_EQ(scales[0], scale);
  EXPECT_EQ(scales[1], 0.0f);
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(q[k], (int8_t)std::nearbyint(x[k] / scale)) << k;
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], (int8_t)std::nearbyint(-1.27f / scale));
  for (int k = 4; k < 8; ++k)
    EXPECT_EQ(q[k], 0);
  KernelCall d;
  d.in = {bytes(q, DType::I8, 8), bytes(scales, DType::F32, 2)};
  d.out = {bytes(back, DType::F32, 8)};
  d.ints = {4};
  ASSERT_EQ(cpuKernel(KernelId::Dequantize).check(d), "");
  ASSERT_TRUE(cpuKernel(KernelId::Dequantize).run(d));
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(back[k], (float)q[k] * scales[k / 4]) << k;
    EXPECT_NEAR(back[k], x[k], scale / 2 + 1e-7) << k; // within half a step
  }
  // Shapes that do not split into blocks are refused.
  c.ints = {3};
  EXPECT_NE(cpuKernel(KernelId::Quantize).check(c), "");
}

/// A 1-D view of |n| elements of |d| at |p| (the quantization tests).
static TensorRef flatRef(DType d, void *p, int64_t n) {
  TensorRef t;
  t.dtype = d;
  t.shape = {n};
  t.data = static_cast<char *>(p);
  return t;
}

TEST(Quantize, FourBitsPackTwoValuesAByteLowNibbleFirst) {
  // One block of 4: peak 0.7 gives scale 0.1; 0.7 -> 7, -0.25 -> -2 (half to
  // even), 0.05 -> 0 (half to even), -0.7 -> -7: bytes 0xE7 and 0x90.
  std::vector<float> x{0.7f, -0.25f, 0.05f, -0.7f}, back(4, -1);
  std::vector<int8_t> q(2, 99);
  std::vector<float> scales(1, -1);
  KernelCall c;
  c.in = {flatRef(DType::F32, x.data(), 4)};
  c.out = {flatRef(DType::I8, q.data(), 2), flatRef(DType::F32, scales.data(), 1)};
  c.ints = {4, 4};
  ASSERT_EQ(cpuKernel(KernelId::Quantize).check(c), "");
  ASSERT_TRUE(cpuKernel(KernelId::Quantize).run(c));
  const float scale = 0.7f / 7.0f;
  EXPECT_EQ(scales[0], scale);
  const int expect[4] = {(int)std::nearbyint(0.7f / scale), (int)std::nearbyint(-0.25f / scale),
                         (int)std::nearbyint(0.05f / scale), (int)std::nearbyint(-0.7f / scale)};
  EXPECT_EQ((uint8_t)q[0], (uint8_t)((expect[0] & 0xF) | ((expect[1] & 0xF) << 4)));
  EXPECT_EQ((uint8_t)q[1], (uint8_t)((expect[2] & 0xF) | ((expect[3] & 0xF) << 4)));
  KernelCall d;
  d.in = {flatRef(DType::I8, q.data(), 2), flatRef(DType::F32, scales.data(), 1)};
  d.out = {flatRef(DType::F32, back.data(), 4)};
  d.ints = {4, 1, 0, 4};
  ASSERT_EQ(cpuKernel(KernelId::Dequantize).check(d), "");
  ASSERT_TRUE(cpuKernel(KernelId::Dequantize).run(d));
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(back[k], (float)expect[k] * scale) << k;
  EXPECT_EQ(back[3], -7 * scale);
  // A byte count that does not hold the elements at 4 bits is refused.
  c.out[0].shape = {4};
  EXPECT_NE(cpuKernel(KernelId::Quantize).check(c), "");
}

TEST(Quantize, ChunksAreQuantizedInTheReorderedPlace) {
  // 2 x 3 chunks of one block of 2 (qgZ over 2 groups of 3): quantizing with
  // chunks [2, 3] equals quantizing the chunks moved to position g * 2 + a.
  const int64_t outer = 2, inner = 3, chunk = 2, n = outer * inner * chunk;
  std::vector<float> x(n), moved(n);
  for (int64_t k = 0; k < n; ++k)
    x[k] = (float)(k * k % 7) - 3.0f + 0.1f * (float)k;
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t g = 0; g < inner; ++g)
      for (int64_t c = 0; c < chunk; ++c)
        moved[(g * outer + a) * chunk + c] = x[(a * inner + g) * chunk + c];
  std::vector<int8_t> q1(n), q2(n);
  std::vector<float> s1(n / chunk), s2(n / chunk);
  KernelCall c;
  c.in = {flatRef(DType::F32, x.data(), n)};
  c.out = {flatRef(DType::I8, q1.data(), n), flatRef(DType::F32, s1.data(), n / chunk)};
  c.ints = {chunk, 8, outer, inner};
  ASSERT_EQ(cpuKernel(KernelId::Quantize).check(c), "");
  ASSERT_TRUE(cpuKernel(KernelId::Quantize).run(c));
  KernelCall m = c;
  m.in = {flatRef(DType::F32, moved.data(), n)};
  m.out = {flatRef(DType::I8, q2.data(), n), flatRef(DType::F32, s2.data(), n / chunk)};
  m.ints = {chunk, 8};
  ASSERT_TRUE(cpuKernel(KernelId::Quantize).run(m));
  EXPECT_EQ(q1, q2);
  EXPECT_EQ(s1, s2);
  // Chunks that are not whole blocks are refused.
  c.ints = {4, 8, outer, inner};
  EXPECT_NE(cpuKernel(KernelId::Quantize).check(c), "");
}

TEST(Quantize, DequantizeSumsItsPartsInOrderAndAverages) {
  // qgZ: 3 parts (what 3 ranks sent) of 4 elements, blocks of 2: out[k] =
  // (q0[k] s0 + q1[k] s1 + q2[k] s2) / 3 in float32, in part order.
  std::vector<int8_t> q{1, -2, 3, 127, 5, 6, -7, 8, -127, 0, 11, 12};
  std::vector<float> scales{0.5f, 0.25f, 0.1f, 0.3f, 0.7f, 1e-3f};
  std::vector<float> sum(4, -1), avg(4, -1);
  KernelCall d;
  d.in = {flatRef(DType::I8, q.data(), 12), flatRef(DType::F32, scales.data(), 6)};
  d.out = {flatRef(DType::F32, sum.data(), 4)};
  d.ints = {2, 3, 0};
  ASSERT_EQ(cpuKernel(KernelId::Dequantize).check(d), "");
  ASSERT_TRUE(cpuKernel(KernelId::Dequantize).run(d));
  d.out = {flatRef(DType::F32, avg.data(), 4)};
  d.ints = {2, 3, 1};
  ASSERT_TRUE(cpuKernel(KernelId::Dequantize).run(d));
  for (int k = 0; k < 4; ++k) {
    float expect = (float)q[k] * scales[k / 2];
    expect += (float)q[4 + k] * scales[(4 + k) / 2];
    expect += (float)q[8 + k] * scales[(8 + k) / 2];
    EXPECT_EQ(sum[k], expect) << k;
    EXPECT_EQ(avg[k], expect / 3.0f) << k;
  }
  // Parts that do not split the values, or a part not of whole blocks.
  d.ints = {2, 5, 0};
  EXPECT_NE(cpuKernel(KernelId::Dequantize).check(d), "");
  d.ints = {3, 3, 0};
  EXPECT_NE(cpuKernel(KernelId::Dequantize).check(d), "");
  d.ints = {2, 3, 2};
  EXPECT_NE(cpuKernel(KernelId::Dequantize).check(d), "");
}
