//===- MoeTest.cpp - the CPU's dropless mixture-of-experts kernels --------===//
//
// moe_route (each token's k experts sorted into expert order), grouped_matmul
// and grouped_matmul_rhs_grad against per-row references, and the errors a
// routing outside the experts or offsets out of order give.
//
//===----------------------------------------------------------------------===//
#include "cpu/KernelSupport.h"
#include "cpu/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace zrt;

namespace {
template <typename T> TensorRef ref(std::vector<T> &v, std::vector<int64_t> shape) {
  TensorRef t;
  t.dtype = std::is_same_v<T, float> ? DType::F32 : DType::I64;
  t.shape = std::move(shape);
  t.data = reinterpret_cast<char *>(v.data());
  return t;
}

std::string run(KernelId id, KernelCall &c) {
  std::string check = cpuKernel(id).check(c);
  if (!check.empty())
    return "check: " + check;
  Status s = cpuKernel(id).run(c);
  return s ? "" : s.message();
}

float value(int64_t i) { return (float)((i * 37) % 23) * 0.125f - 1.0f; }
} // namespace

TEST(Moe, RouteSortsRowsByExpertStably) {
  // 4 tokens, k = 2, 3 experts: (0,2) (2,1) (0,1) (2,0).
  std::vector<int64_t> experts = {0, 2, 2, 1, 0, 1, 2, 0}, tokens(8), positions(8), offsets(4);
  KernelCall c;
  c.in = {ref(experts, {4, 2})};
  c.out = {ref(tokens, {8}), ref(positions, {4, 2}), ref(offsets, {4})};
  c.ints = {3, 0};
  ASSERT_EQ(run(KernelId::MoeRoute, c), "");
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 3, 5, 8}));
  // Expert 0: tokens 0, 2, 3; expert 1: 1, 2; expert 2: 0, 1, 3 (token order within each).
  EXPECT_EQ(tokens, (std::vector<int64_t>{0, 2, 3, 1, 2, 0, 1, 3}));
  for (int64_t i = 0; i < 8; ++i) { // positions invert the order
    EXPECT_EQ(tokens[positions[i]], i / 2);
    EXPECT_GE(positions[i], offsets[experts[i]]);
    EXPECT_LT(positions[i], offsets[experts[i] + 1]);
  }
}

TEST(Moe, RouteWithCapacityDropsLateChoices) {
  // 4 tokens, k = 2, 3 experts, 2 rows an expert: (0,2) (2,1) (0,1) (2,0). First choices
  // 0 2 0 2 fill experts 0 and 2; second choices 2 1 1 0 find expert 2 and 0 full (dropped).
  std::vector<int64_t> experts = {0, 2, 2, 1, 0, 1, 2, 0}, tokens(6), positions(8), offsets(4);
  KernelCall c;
  c.in = {ref(experts, {4, 2})};
  c.out = {ref(tokens, {6}), ref(positions, {4, 2}), ref(offsets, {4})};
  c.ints = {3, 2};
  ASSERT_EQ(run(KernelId::MoeRoute, c), "");
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(tokens, (std::vector<int64_t>{0, 2, 1, 2, 1, 3}));
  EXPECT_EQ(positions, (std::vector<int64_t>{0, 6, 4, 2, 1, 3, 5, 6}));
}

TEST(Moe, RouteRefusesAnExpertOutOfRange) {
  std::vector<int64_t> experts = {0, 3}, tokens(2), positions(2), offsets(4);
  KernelCall c;
  c.in = {ref(experts, {1, 2})};
  c.out = {ref(tokens, {2}), ref(positions, {1, 2}), ref(offsets, {4})};
  c.ints = {3, 0};
  EXPECT_EQ(run(KernelId::MoeRoute, c), "moe_route: token 0 chose expert 3, outside the 3 experts");
}

TEST(Moe, GroupedMatmulAndRhsGradMatchPerRowProducts) {
  const int64_t m = 7, k = 5, n = 3, e = 3;
  std::vector<int64_t> offsets = {0, 3, 3, 7}; // expert 1 has no rows
  std::vector<float> x(m * k), w(e * n * k), g(m * n), y(m * n), dw(e * n * k);
  for (int64_t i = 0; i < (int64_t)x.size(); ++i)
    x[i] = value(i);
  for (int64_t i = 0; i < (int64_t)w.size(); ++i)
    w[i] = value(i + 100);
  for (int64_t i = 0; i < (int64_t)g.size(); ++i)
    g[i] = value(i + 200);
  auto expertOf = [&](int64_t r) { return r < 3 ? 0 : 2; };
  KernelCall c; // transpose_rhs: w [E, N, K]
  c.in = {ref(x, {m, k}), ref(w, {e, n, k}), ref(offsets, {e + 1})};
  c.out = {ref(y, {m, n})};
  c.ints = {1};
  ASSERT_EQ(run(KernelId::GroupedMatmul, c), "");
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      float want = 0;
      for (int64_t i = 0; i < k; ++i)
        want += x[r * k + i] * w[(expertOf(r) * n + j) * k + i];
      EXPECT_NEAR(y[r * n + j], want, 1e-5f) << "row " << r << " column " << j;
    }
  KernelCall d; // dW[e] = sum over its rows of g^T x, [N, K]
  d.in = {ref(x, {m, k}), ref(g, {m, n}), ref(offsets, {e + 1})};
  d.out = {ref(dw, {e, n, k})};
  d.ints = {1};
  std::fill(dw.begin(), dw.end(), NAN);
  ASSERT_EQ(run(KernelId::GroupedMatmulRhsGrad, d), "");
  for (int64_t ex = 0; ex < e; ++ex)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < k; ++i) {
        float want = 0;
        for (int64_t r = offsets[ex]; r < offsets[ex + 1]; ++r)
          want += g[r * n + j] * x[r * k + i];
        EXPECT_NEAR(dw[(ex * n + j) * k + i], want, 1e-5f) << "expert " << ex;
      }
}

TEST(Moe, RouteForOneRankKeepsItsExpertsOnly) {
  // Expert parallelism: 4 tokens, k = 2, 4 experts over 2 ranks; this rank has
  // experts 2 and 3 (first expert 2). Choices (0,2) (3,1) (2,3) (1,0): rows
  // for 2: tokens 0, 2; for 3: tokens 1, 2. R = 4 min(2, 2) = 8 rows, 4 used.
  std::vector<int64_t> experts = {0, 2, 3, 1, 2, 3, 1, 0}, first = {2}, tokens(8), positions(8),
                       offsets(3);
  KernelCall c;
  c.in = {ref(experts, {4, 2}), ref(first, {1})};
  c.out = {ref(tokens, {8}), ref(positions, {4, 2}), ref(offsets, {3})};
  c.ints = {2, 0, 4};
  ASSERT_EQ(run(KernelId::MoeRoute, c), "");
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(tokens, (std::vector<int64_t>{0, 2, 1, 2, 4, 4, 4, 4}));    // unused rows: token 4
  EXPECT_EQ(positions, (std::vector<int64_t>{8, 0, 2, 8, 1, 3, 8, 8})); // others': row 8
  // A first expert that starts no slice of the rank's size, and an id past all experts.
  first = {1};
  EXPECT_EQ(run(KernelId::MoeRoute, c),
            "moe_route: this rank's first expert 1 does not start one of the 2 slices of 2 of "
            "the 4 experts");
  first = {2};
  experts[3] = 4;
  EXPECT_EQ(run(KernelId::MoeRoute, c), "moe_route: token 1 chose expert 4, outside the 4 experts");
  // Tokens that chose this rank's one expert twice need more rows than the plan's 4.
  experts = {2, 2, 2, 2, 2, 2, 0, 1};
  std::vector<int64_t> four(4), two(2);
  c.out = {ref(four, {4}), ref(positions, {4, 2}), ref(two, {2})};
  c.ints = {1, 0, 4};
  EXPECT_EQ(run(KernelId::MoeRoute, c),
            "moe_route: 6 choices of this rank's experts, more than the 4 rows a token choosing "
            "each expert once can need (a token chose an expert twice)");
}

TEST(Moe, GroupedMatmulZeroesTheRowsPastTheOffsets) {
  // 5 rows, 2 experts using 3 of them (a rank's route leaves 2 unused).
  std::vector<int64_t> offsets = {0, 1, 3};
  std::vector<float> x(5 * 2, 1.0f), w(2 * 2 * 3, 0.5f), y(5 * 3, 7.0f);
  KernelCall c;
  c.in = {ref(x, {5, 2}), ref(w, {2, 2, 3}), ref(offsets, {3})};
  c.out = {ref(y, {5, 3})};
  c.ints = {0, 1};
  ASSERT_EQ(run(KernelId::GroupedMatmul, c), "");
  for (int64_t i = 0; i < 15; ++i)
    EXPECT_EQ(y[i], i < 9 ? 1.0f : 0.0f) << "element " << i;
}

TEST(Moe, GroupedMatmulRefusesOffsetsOutOfOrder) {
  std::vector<int64_t> offsets = {0, 5, 2};
  std::vector<float> x(4 * 2), w(2 * 2 * 3), y(4 * 3);
  KernelCall c;
  c.in = {ref(x, {4, 2}), ref(w, {2, 2, 3}), ref(offsets, {3})};
  c.out = {ref(y, {4, 3})};
  c.ints = {0};
  EXPECT_EQ(run(KernelId::GroupedMatmul, c),
            "grouped_matmul: expert 1's rows [5, 2) are not in order (offsets must come from "
            "moe_route)");
  offsets = {0, 2, 5};
  EXPECT_EQ(run(KernelId::GroupedMatmul, c),
            "grouped_matmul: the offsets cover rows [0, 5), not within the 4 rows");
}
