//===- DropoutTest.cpp - the dropout kernel and its generator -------------===//
#include "cpu/Kernels.h"
#include "kernels/Philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

using namespace zrt;

namespace {

/// A dropout call on |x| ([samples, n / samples]) into |y| with |rng|.
KernelCall dropoutCall(std::vector<float> &x, std::vector<float> &y, std::vector<int64_t> &rng,
                       int64_t samples, double ratio, int64_t key) {
  int64_t n = (int64_t)x.size();
  KernelCall c;
  TensorRef in, r, out;
  in.dtype = out.dtype = DType::F32;
  in.shape = out.shape = {samples, n / samples};
  in.data = reinterpret_cast<char *>(x.data());
  out.data = reinterpret_cast<char *>(y.data());
  r.dtype = DType::I64;
  r.shape = {2};
  r.data = reinterpret_cast<char *>(rng.data());
  c.in = {in, r};
  c.out = {out};
  c.ints = {key, samples};
  c.floats = {ratio};
  return c;
}

/// The CPU dropout kernel on |x| at stream position |position|: y.
std::vector<float> dropout(std::vector<float> x, int64_t samples, int64_t position, double ratio,
                           int64_t seed = 42, int64_t key = 12345) {
  std::vector<float> y(x.size(), -1.0f);
  std::vector<int64_t> rng = {seed, position};
  KernelCall c = dropoutCall(x, y, rng, samples, ratio, key);
  const KernelInfo &k = cpuKernel(KernelId::Dropout);
  EXPECT_EQ(k.check(c), "");
  EXPECT_TRUE(k.run(c));
  return y;
}

} // namespace

// Random123's known-answer vectors for philox4x32-10 (kat_vectors).
TEST(Philox, KnownAnswers) {
  PhiloxWords a = philox4x32(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(a.w[0], 0x6627e8d5u);
  EXPECT_EQ(a.w[1], 0xe169c58du);
  EXPECT_EQ(a.w[2], 0xbc57ac4cu);
  EXPECT_EQ(a.w[3], 0x9b00dbd8u);
  PhiloxWords b = philox4x32(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  EXPECT_EQ(b.w[0], 0x408f276du);
  EXPECT_EQ(b.w[1], 0x41c83b0eu);
  EXPECT_EQ(b.w[2], 0xa20bc7c6u);
  EXPECT_EQ(b.w[3], 0x6d5451fdu);
  PhiloxWords c =
      philox4x32(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(c.w[0], 0xd16cfe09u);
  EXPECT_EQ(c.w[1], 0x94fdccebu);
  EXPECT_EQ(c.w[2], 0x5001e420u);
  EXPECT_EQ(c.w[3], 0x24126ea1u);
}

TEST(Dropout, KeepRateWithinThreeSigmaOverAMillionElements) {
  const int64_t n = 1 << 20;
  for (double ratio : {0.1, 0.5}) {
    std::vector<float> y = dropout(std::vector<float>(n, 1.0f), 16, 1000, ratio);
    int64_t kept = 0;
    const float scale = (float)(1.0 / (1.0 - ratio));
    for (float v : y) {
      ASSERT_TRUE(v == 0.0f || v == scale) << v;
      kept += v != 0;
    }
    double p = 1 - ratio, sigma = std::sqrt(n * p * (1 - p));
    EXPECT_LE(std::fabs(kept - n * p), 3 * sigma) << "ratio " << ratio << ": kept " << kept;
  }
}

TEST(Dropout, MasksDoNotDependOnHowSamplesAreSplit) {
  // 8 samples at position 40 = 4 at 40 and 4 at 44 (two ranks) = 2 x 4
  // micro-batches: what makes world sizes 1, 2 and 4 train alike.
  const int64_t perSample = 37; // not a multiple of 4
  std::vector<float> x(8 * perSample);
  for (size_t k = 0; k < x.size(); ++k)
    x[k] = 0.5f + (float)k;
  std::vector<float> whole = dropout(x, 8, 40, 0.3);
  std::vector<float> first(x.begin(), x.begin() + 4 * perSample),
      second(x.begin() + 4 * perSample, x.end());
  std::vector<float> a = dropout(first, 4, 40, 0.3), b = dropout(second, 4, 44, 0.3);
  a.insert(a.end(), b.begin(), b.end());
  EXPECT_EQ(whole, a);
  // Another position, key or seed: another mask.
  EXPECT_NE(whole, dropout(x, 8, 48, 0.3));
  EXPECT_NE(whole, dropout(x, 8, 40, 0.3, 42, 54321));
  EXPECT_NE(whole, dropout(x, 8, 40, 0.3, 7));
}

TEST(Dropout, BadCallsAreRefused) {
  std::vector<float> x(12), y(12);
  std::vector<int64_t> rng = {42, 0};
  KernelCall c = dropoutCall(x, y, rng, 3, 0.1, 1);
  c.ints = {1, 5}; // 5 samples do not divide 12 elements
  const KernelInfo &k = cpuKernel(KernelId::Dropout);
  EXPECT_NE(k.check(c).find("5 samples do not divide"), std::string::npos) << k.check(c);
  c.ints = {1, 3};
  c.floats = {1.0};
  EXPECT_NE(k.check(c).find("ratio"), std::string::npos) << k.check(c);
}
