//===- HostfileTest.cpp - DeepSpeed hostfiles, --include / --exclude ------===//
#include "comm/Hostfile.h"

#include <gtest/gtest.h>

using namespace zrt;

namespace {
std::vector<NodeSlots> hosts() {
  std::vector<NodeSlots> nodes;
  EXPECT_TRUE(parseHostfile("# a cluster\nworker-01 slots=4\nworker-02 slots=4  # spare\n\n"
                            "worker-03 slots=2\n",
                            "hostfile", nodes));
  return nodes;
}
std::string describe(const std::vector<NodeSlots> &nodes) {
  std::string s;
  for (const NodeSlots &n : nodes) {
    s += n.host + ":";
    for (int g : n.slots)
      s += std::to_string(g);
    s += " ";
  }
  return s;
}
} // namespace

TEST(Hostfile, Parses) {
  EXPECT_EQ(describe(hosts()), "worker-01:0123 worker-02:0123 worker-03:01 ");
}

TEST(Hostfile, ErrorsNameTheLine) {
  std::vector<NodeSlots> nodes;
  Status s = parseHostfile("worker-01 slots=4\nworker-02 gpus=4\n", "hf", nodes);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), "hf:2: expected 'HOST slots=N', got 'worker-02 gpus=4'");
  nodes.clear();
  s = parseHostfile("a slots=1\na slots=2\n", "hf", nodes);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), "hf:2: host a is listed twice (line 1)");
  nodes.clear();
  EXPECT_FALSE(parseHostfile("# nothing\n", "hf", nodes));
}

TEST(Hostfile, IncludeExcludeAndCounts) {
  auto nodes = hosts();
  ASSERT_TRUE(selectSlots(nodes, "worker-01:0,2@worker-03", "", -1, -1));
  EXPECT_EQ(describe(nodes), "worker-01:02 worker-03:01 ");
  nodes = hosts();
  ASSERT_TRUE(selectSlots(nodes, "", "worker-02@worker-01:3", -1, 2));
  EXPECT_EQ(describe(nodes), "worker-01:01 worker-03:01 ");
  nodes = hosts();
  ASSERT_TRUE(selectSlots(nodes, "", "", 2, -1));
  EXPECT_EQ(describe(nodes), "worker-01:0123 worker-02:0123 ");
  nodes = hosts();
  Status s = selectSlots(nodes, "worker-01", "worker-02", -1, -1);
  EXPECT_FALSE(s);
  nodes = hosts();
  s = selectSlots(nodes, "worker-03:5", "", -1, -1);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), "--include: worker-03 has no slot 5 (slots=2)");
  nodes = hosts();
  s = selectSlots(nodes, "", "", -1, 3);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), "--num_gpus 3: worker-03 has 2 selected slots");
}

TEST(Hostfile, NodeCommandsOffsetTheRanks) {
  auto nodes = hosts();
  ASSERT_TRUE(selectSlots(nodes, "worker-01:1,3@worker-03:1", "", -1, -1));
  auto cmds = nodeCommands(nodes, {"/opt/zrun", "train", "my plan.zplan"}, "/data/run", 29555);
  ASSERT_EQ(cmds.size(), 2u);
  EXPECT_EQ(cmds[0].argv[0], "ssh");
  EXPECT_EQ(cmds[0].argv[1], "worker-01");
  EXPECT_EQ(cmds[0].argv[2],
            "cd /data/run && env MASTER_ADDR=worker-01 MASTER_PORT=29555 WORLD_SIZE=3 "
            "ZRUN_RANK_OFFSET=0 CUDA_VISIBLE_DEVICES=1,3 NCCL_NVLS_ENABLE=0 /opt/zrun train "
            "'my plan.zplan' --nproc-per-node 2 --master-port 29555");
  EXPECT_NE(cmds[1].argv[2].find("ZRUN_RANK_OFFSET=2 CUDA_VISIBLE_DEVICES=1 "), std::string::npos);
  EXPECT_EQ(shellQuote("it's"), "'it'\\''s'");
}
