//===- CommunicatorTest.cpp - in-process collectives vs a naive reference -===//
#include "comm/Communicator.h"
#include "exec/CommGroups.h"
#include "support/NarrowFloat.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

using namespace zrt;

namespace {

/// Runs |body(rank, comm)| on W threads of one group.
template <typename F> void onRanks(int world, F body) {
  InProcessGroup group(world);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < world; ++r)
    comms.push_back(group.communicator(r));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] { body(r, *comms[r]); });
  for (auto &t : threads)
    t.join();
}

std::vector<std::vector<float>> randomInputs(int world, int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<std::vector<float>> in(world, std::vector<float>(n));
  for (auto &v : in)
    for (float &x : v)
      x = u(rng);
  return in;
}

/// The naive reference: element k summed over ranks 0..W-1 in double.
std::vector<double> naiveSum(const std::vector<std::vector<float>> &in) {
  std::vector<double> sum(in[0].size(), 0.0);
  for (const auto &v : in)
    for (size_t k = 0; k < v.size(); ++k)
      sum[k] += v[k];
  return sum;
}

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllReduceSumAndAverage) {
  int world = GetParam();
  for (int64_t n : {1, 7, 64, 1001}) {
    auto in = randomInputs(world, n, 1 + n);
    std::vector<double> ref = naiveSum(in);
    std::vector<std::vector<float>> sum(world, std::vector<float>(n)),
        avg(world, std::vector<float>(n));
    onRanks(world, [&](int r, Communicator &c) {
      ASSERT_TRUE(c.allReduce(in[r].data(), sum[r].data(), n, ReduceOp::Sum));
      // In place, as the plans do when they can.
      avg[r] = in[r];
      ASSERT_TRUE(c.allReduce(avg[r].data(), avg[r].data(), n, ReduceOp::Avg));
    });
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(sum[r], sum[0]) << "ranks must agree bit for bit";
      for (int64_t k = 0; k < n; ++k) {
        EXPECT_NEAR(sum[r][k], ref[k], 1e-6) << "n " << n << " rank " << r << " k " << k;
        EXPECT_NEAR(avg[r][k], ref[k] / world, 1e-6);
      }
    }
  }
}

TEST_P(Collectives, ReduceScatterKeepsTheRanksChunk) {
  int world = GetParam();
  int64_t chunk = 33, n = chunk * world;
  auto in = randomInputs(world, n, 7);
  std::vector<double> ref = naiveSum(in);
  std::vector<std::vector<float>> out(world, std::vector<float>(chunk));
  onRanks(world, [&](int r, Communicator &c) {
    ASSERT_TRUE(c.reduceScatter(in[r].data(), out[r].data(), n, ReduceOp::Avg));
  });
  for (int r = 0; r < world; ++r)
    for (int64_t k = 0; k < chunk; ++k)
      EXPECT_NEAR(out[r][k], ref[r * chunk + k] / world, 1e-6);
}

TEST_P(Collectives, AllGatherConcatenatesInRankOrder) {
  int world = GetParam();
  int64_t n = 17;
  auto in = randomInputs(world, n, 11);
  std::vector<std::vector<float>> out(world, std::vector<float>(n * world));
  onRanks(world, [&](int r, Communicator &c) {
    ASSERT_TRUE(c.allGather(in[r].data(), out[r].data(), n));
  });
  for (int r = 0; r < world; ++r)
    for (int q = 0; q < world; ++q)
      for (int64_t k = 0; k < n; ++k)
        EXPECT_EQ(out[r][q * n + k], in[q][k]);
}

/// 16-bit collectives (--comm-dtype): each element summed over ranks 0..W-1
/// in float32, divided for an average, rounded once; gathers move the bits.
template <typename T> void narrowCollectives(int world, CommType type) {
  int64_t chunk = 37, n = chunk * world;
  auto wide = randomInputs(world, n, 5);
  std::vector<std::vector<T>> in(world, std::vector<T>(n));
  for (int r = 0; r < world; ++r)
    for (int64_t k = 0; k < n; ++k)
      in[r][k] = T(wide[r][k] * 3.0f);
  std::vector<std::vector<T>> sum(world, std::vector<T>(n)), avg(world, std::vector<T>(n)),
      shard(world, std::vector<T>(chunk)), gathered(world, std::vector<T>(n * world));
  onRanks(world, [&](int r, Communicator &c) {
    ASSERT_TRUE(c.allReduce(in[r].data(), sum[r].data(), n, type, ReduceOp::Sum));
    avg[r] = in[r];
    ASSERT_TRUE(c.allReduce(avg[r].data(), avg[r].data(), n, type, ReduceOp::Avg));
    ASSERT_TRUE(c.reduceScatter(in[r].data(), shard[r].data(), n, type, ReduceOp::Avg));
    ASSERT_TRUE(c.allGather(in[r].data(), gathered[r].data(), n, type));
  });
  int roundedAway = 0;
  for (int64_t k = 0; k < n; ++k) {
    float acc = 0;
    for (int r = 0; r < world; ++r)
      acc += (float)in[r][k];
    uint16_t s = T(acc).bits, a = T(acc / (float)world).bits;
    roundedAway += (float)T(acc) != acc;
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(sum[r][k].bits, s) << "rank " << r << " k " << k;
      EXPECT_EQ(avg[r][k].bits, a) << "rank " << r << " k " << k;
      if (k / chunk == r)
        EXPECT_EQ(shard[r][k % chunk].bits, a) << "rank " << r << " k " << k;
      for (int q = 0; q < world; ++q)
        EXPECT_EQ(gathered[r][q * n + k].bits, in[q][k].bits);
    }
  }
  // The check has teeth: with several ranks most sums need rounding.
  if (world > 1)
    EXPECT_GT(roundedAway, n / 4);
}

TEST_P(Collectives, BFloat16SumsInFloat32AndRoundsOnce) {
  narrowCollectives<BF16>(GetParam(), CommType::BF16);
}

TEST_P(Collectives, Float16SumsInFloat32AndRoundsOnce) {
  narrowCollectives<F16>(GetParam(), CommType::F16);
}

TEST_P(Collectives, ExchangeGivesEveryRankEveryPointerInOrder) {
  // Back-to-back exchanges: a fast rank must not overwrite a slot a slow one
  // has not read yet.
  int world = GetParam();
  std::vector<std::vector<int>> seen(world);
  onRanks(world, [&](int r, Communicator &c) {
    for (int round = 0; round < 50; ++round) {
      int mine = r * 1000 + round;
      std::vector<char> all;
      ASSERT_TRUE(c.exchange(&mine, sizeof mine, all));
      ASSERT_EQ(all.size(), world * sizeof mine);
      for (int q = 0; q < world; ++q) {
        int v;
        std::memcpy(&v, all.data() + q * sizeof v, sizeof v);
        seen[r].push_back(v);
      }
    }
  });
  for (int r = 0; r < world; ++r)
    for (int round = 0; round < 50; ++round)
      for (int q = 0; q < world; ++q)
        EXPECT_EQ(seen[r][round * world + q], q * 1000 + round);
}

INSTANTIATE_TEST_SUITE_P(Worlds, Collectives, ::testing::Values(1, 2, 3, 4, 8));

TEST_P(Collectives, AllToAllHandsEachRankItsChunkOfEveryInput) {
  // int8 chunks (qgZ's quantized gradients) and float32 ones (their
  // scales), into another buffer and in place.
  int world = GetParam();
  for (int64_t chunk : {1, 5}) {
    int64_t n = chunk * world;
    std::vector<std::vector<int8_t>> in(world, std::vector<int8_t>(n)), out = in, inPlace = in;
    std::vector<std::vector<float>> fin(world, std::vector<float>(n)), fout = fin;
    for (int r = 0; r < world; ++r)
      for (int64_t k = 0; k < n; ++k) {
        in[r][k] = inPlace[r][k] = (int8_t)(r * 16 + k);
        fin[r][k] = r + k / 1000.0f;
      }
    onRanks(world, [&](int r, Communicator &c) {
      ASSERT_TRUE(c.allToAll(in[r].data(), out[r].data(), n, CommType::I8));
      ASSERT_TRUE(c.allToAll(inPlace[r].data(), inPlace[r].data(), n, CommType::I8));
      ASSERT_TRUE(c.allToAll(fin[r].data(), fout[r].data(), n, CommType::F32));
    });
    for (int r = 0; r < world; ++r)
      for (int from = 0; from < world; ++from)
        for (int64_t k = 0; k < chunk; ++k) {
          EXPECT_EQ(out[r][from * chunk + k], in[from][r * chunk + k]) << r << " " << from;
          EXPECT_EQ(inPlace[r][from * chunk + k], in[from][r * chunk + k]) << r << " " << from;
          EXPECT_EQ(fout[r][from * chunk + k], fin[from][r * chunk + k]) << r << " " << from;
        }
  }
}

TEST(Collectives, SubgroupsOfAMeshReduceWithinThemselves) {
  // 8 ranks as 2 "nodes" of 4: the node's ranks, then the same local rank
  // across nodes. Reducing within the node and then across nodes is the
  // world's sum (hierarchical all-reduce); each subgroup only its members'.
  const int world = 8, perNode = 4;
  int64_t n = 12;
  auto in = randomInputs(world, n, 3);
  std::vector<double> ref = naiveSum(in);
  std::vector<std::vector<float>> node(world, std::vector<float>(n)),
      both(world, std::vector<float>(n));
  std::vector<int> nodeRank(world), crossRank(world);
  onRanks(world, [&](int r, Communicator &c) {
    std::vector<int> nodeRanks, crossRanks;
    for (int k = 0; k < perNode; ++k)
      nodeRanks.push_back(r / perNode * perNode + k);
    for (int k = 0; k < world / perNode; ++k)
      crossRanks.push_back(k * perNode + r % perNode);
    std::unique_ptr<Communicator> inNode, across;
    ASSERT_TRUE(c.subgroup(nodeRanks, inNode));
    ASSERT_TRUE(c.subgroup(crossRanks, across));
    nodeRank[r] = inNode->rank();
    crossRank[r] = across->rank();
    ASSERT_EQ(inNode->size(), perNode);
    ASSERT_EQ(across->size(), world / perNode);
    ASSERT_TRUE(inNode->allReduce(in[r].data(), node[r].data(), n, ReduceOp::Sum));
    ASSERT_TRUE(across->allReduce(node[r].data(), both[r].data(), n, ReduceOp::Sum));
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(nodeRank[r], r % perNode);
    EXPECT_EQ(crossRank[r], r / perNode);
    EXPECT_EQ(both[r], both[0]) << "every rank the same bits";
    for (int64_t k = 0; k < n; ++k) {
      double mine = 0;
      for (int q = r / perNode * perNode; q < (r / perNode + 1) * perNode; ++q)
        mine += in[q][k];
      EXPECT_NEAR(node[r][k], mine, 1e-6) << "rank " << r << " k " << k;
      EXPECT_NEAR(both[r][k], ref[k], 1e-5) << "rank " << r << " k " << k;
    }
  }
}

TEST(Collectives, CommGroupsSplitThePlansMesh) {
  // What the executors use: a plan of 8 ranks in groups of 4. Its GROUP
  // collectives span a node's ranks (index r % 4), ACROSS the ranks at the
  // same place in every group (index r / 4); a gather in each shows which.
  plan::Plan p;
  p.set_world_size(8);
  p.set_group_size(4);
  EXPECT_EQ(groupRanks(8, 4, plan::Collective::GROUP, 5), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(groupRanks(8, 4, plan::Collective::ACROSS, 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(groupRanks(8, 4, plan::Collective::WORLD, 5).size(), 8u);
  std::vector<std::vector<float>> inGroup(8, std::vector<float>(4)),
      acrossGroups(8, std::vector<float>(2));
  onRanks(8, [&](int r, Communicator &c) {
    CommGroups groups(p, r, &c);
    EXPECT_EQ(groups.size(plan::Collective::GROUP), 4);
    EXPECT_EQ(groups.rank(plan::Collective::GROUP), r % 4);
    EXPECT_EQ(groups.size(plan::Collective::ACROSS), 2);
    EXPECT_EQ(groups.rank(plan::Collective::ACROSS), r / 4);
    Communicator *g = nullptr, *a = nullptr;
    ASSERT_TRUE(groups.get(plan::Collective::GROUP, g));
    ASSERT_TRUE(groups.get(plan::Collective::ACROSS, a));
    float mine = (float)r;
    ASSERT_TRUE(g->allGather(&mine, inGroup[r].data(), 1));
    ASSERT_TRUE(a->allGather(&mine, acrossGroups[r].data(), 1));
  });
  for (int r = 0; r < 8; ++r) {
    for (int k = 0; k < 4; ++k)
      EXPECT_EQ(inGroup[r][k], (float)(r / 4 * 4 + k)) << "rank " << r;
    for (int k = 0; k < 2; ++k)
      EXPECT_EQ(acrossGroups[r][k], (float)(k * 4 + r % 4)) << "rank " << r;
  }
  // A plan without a mesh has only the world.
  plan::Plan flat;
  flat.set_world_size(2);
  onRanks(2, [&](int r, Communicator &c) {
    CommGroups groups(flat, r, &c);
    Communicator *g = nullptr;
    ASSERT_TRUE(groups.get(plan::Collective::GROUP, g));
    EXPECT_EQ(g, &c);
  });
}

TEST(Collectives, SubgroupRequestsAreChecked) {
  onRanks(2, [&](int r, Communicator &c) {
    std::unique_ptr<Communicator> sub;
    Status notMine = c.subgroup({1 - r}, sub);
    ASSERT_FALSE(notMine);
    EXPECT_NE(notMine.message().find("not in"), std::string::npos) << notMine.message();
    Status unordered = c.subgroup({1, 0}, sub);
    ASSERT_FALSE(unordered);
    EXPECT_NE(unordered.message().find("ascend"), std::string::npos) << unordered.message();
  });
}

TEST(Collectives, AbortReachesRanksWaitingInASubgroup) {
  // Rank 3 fails; ranks 0-2 wait in their node's all-reduce, which rank 3
  // never joins: the world's abort must end it.
  std::vector<bool> failed(4, false);
  onRanks(4, [&](int r, Communicator &c) {
    std::unique_ptr<Communicator> node;
    ASSERT_TRUE(c.subgroup({0, 1, 2, 3}, node));
    std::vector<float> x(8, 1.0f);
    if (r == 3) {
      c.abort("rank 3 failed");
      failed[r] = true;
      return;
    }
    Status s = node->allReduce(x.data(), x.data(), 8, ReduceOp::Sum);
    failed[r] = !s;
    if (!s)
      EXPECT_NE(s.message().find("rank 3 failed"), std::string::npos) << s.message();
  });
  for (int r = 0; r < 4; ++r)
    EXPECT_TRUE(failed[r]) << "rank " << r;
}

TEST(Collectives, AbortEndsEveryWaitingRank) {
  // Rank 1 fails before its collective; the others must not wait forever.
  std::vector<bool> failed(4, false);
  onRanks(4, [&](int r, Communicator &c) {
    std::vector<float> x(8, 1.0f);
    if (r == 1) {
      c.abort("rank 1 failed");
      failed[r] = true;
      return;
    }
    Status s = c.allReduce(x.data(), x.data(), 8, ReduceOp::Sum);
    failed[r] = !s;
    if (!s)
      EXPECT_NE(s.message().find("rank 1 failed"), std::string::npos) << s.message();
  });
  for (int r = 0; r < 4; ++r)
    EXPECT_TRUE(failed[r]) << "rank " << r;
}

} // namespace
