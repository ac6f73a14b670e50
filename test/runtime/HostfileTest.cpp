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
  EXPECT_EQ(cmds[0].argv[1], "--"); // the host is never an ssh option
  EXPECT_EQ(cmds[0].argv[2], "worker-01");
  EXPECT_EQ(cmds[0].argv[3],
            "cd /data/run && exec env MASTER_ADDR=worker-01 MASTER_PORT=29555 WORLD_SIZE=3 "
            "ZRUN_RANK_OFFSET=0 CUDA_VISIBLE_DEVICES=1,3 NCCL_NVLS_ENABLE=0 /opt/zrun train "
            "'my plan.zplan' --nproc-per-node 2 --master-port 29555");
  EXPECT_NE(cmds[1].argv[3].find("ZRUN_RANK_OFFSET=2 CUDA_VISIBLE_DEVICES=1 "), std::string::npos);
  EXPECT_EQ(shellQuote("it's"), "'it'\\''s'");
}

TEST(Hostfile, HostNamesThatCouldRunCommandsAreRefused) {
  // Each would have reached the remote shell or ssh's options unquoted.
  for (const char *line :
       {"$(touch${IFS}/tmp/x)w1 slots=1", "-oProxyCommand=touch${IFS}x slots=1", "`id` slots=1",
        "w1;id slots=1", "w1' slots=1", "-w1 slots=1", "w1..x slots=1"}) {
    std::vector<NodeSlots> nodes;
    Status s = parseHostfile(line, "hosts", nodes);
    ASSERT_FALSE(s) << line;
    EXPECT_NE(s.message().find("is not a host name"), std::string::npos) << s.message();
  }
  for (const char *line :
       {"worker-01.cluster.local slots=8", "10.0.0.7 slots=8", "fe80::1 slots=8"}) {
    std::vector<NodeSlots> nodes;
    EXPECT_TRUE(parseHostfile(line, "hosts", nodes)) << line;
  }
  std::vector<NodeSlots> nodes;
  Status s = parseHostfile("w1 slots=999999", "hosts", nodes);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), "hosts:1: slots=999999 is more than the 1024 GPUs a node may have");
}
