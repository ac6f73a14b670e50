//===- RendezvousTest.cpp - TCP rendezvous on loopback --------------------===//
#include "comm/Rendezvous.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <chrono>
#include <cstdlib>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace zrt;

namespace {

/// A port nobody listens on (the kernel picks a free one; we release it).
int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, (sockaddr *)&a, sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, (sockaddr *)&a, &len);
  close(fd);
  return ntohs(a.sin_port);
}

RendezvousConfig config(int port, int rank, int world, double timeout) {
  RendezvousConfig c;
  c.port = port;
  c.rank = rank;
  c.world = world;
  c.timeoutSeconds = timeout;
  return c;
}

} // namespace

TEST(Rendezvous, EveryRankGetsThePayload) {
  int port = freePort(), world = 4;
  std::vector<std::string> got(world);
  std::vector<Status> status(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      std::string payload = r == 0 ? std::string("nccl-unique-id-\0\1\2", 18) : "";
      status[r] = rendezvous(config(port, r, world, 10), payload);
      got[r] = payload;
    });
  for (auto &t : threads)
    t.join();
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(status[r]) << "rank " << r << ": " << status[r].message();
    EXPECT_EQ(got[r], std::string("nccl-unique-id-\0\1\2", 18));
  }
}

TEST(Rendezvous, MissingRankTimesOutNamingIt) {
  int port = freePort();
  std::string p0 = "id", p1;
  Status s1;
  std::thread t([&] { s1 = rendezvous(config(port, 1, 3, 1.0), p1); });
  auto start = std::chrono::steady_clock::now();
  Status s0 = rendezvous(config(port, 0, 3, 1.0), p0); // rank 2 never comes
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  t.join();
  ASSERT_FALSE(s0);
  EXPECT_NE(s0.message().find("rank(s) 2 of 3 never connected"), std::string::npos) << s0.message();
  EXPECT_LT(seconds, 5.0) << "bounded by the timeout";
  EXPECT_FALSE(s1) << "rank 1 must not get an id from a failed rendezvous";
}

TEST(Rendezvous, NoMasterIsAClearErrorInBoundedTime) {
  int port = freePort();
  std::string p;
  auto start = std::chrono::steady_clock::now();
  Status s = rendezvous(config(port, 1, 2, 0.5), p);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("could not reach rank 0"), std::string::npos) << s.message();
  EXPECT_LT(seconds, 3.0);
}

TEST(Rendezvous, DeadPeerDoesNotHangTheMaster) {
  // A process connects, says it is rank 1, and dies before the id comes.
  int port = freePort();
  std::string p0 = "id";
  Status s0;
  std::thread master([&] { s0 = rendezvous(config(port, 0, 2, 2.0), p0); });
  int fd = -1;
  for (int tries = 0; tries < 100 && fd < 0; ++tries) {
    int f = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(f, (sockaddr *)&a, sizeof a) == 0)
      fd = f;
    else {
      close(f);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ASSERT_GE(fd, 0);
  uint32_t hello[2] = {0x7a72756eu, 1};
  ASSERT_EQ(send(fd, hello, sizeof hello, 0), (ssize_t)sizeof hello);
  close(fd); // dies
  master.join();
  ASSERT_FALSE(s0);
  EXPECT_NE(s0.message().find("rank 1 went away"), std::string::npos) << s0.message();
}

TEST(LaunchEnv, TorchrunOpenMpiSlurm) {
  LaunchEnv env;
  std::string error;
  unsetenv("RANK");
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("SLURM_PROCID");
  EXPECT_FALSE(readLaunchEnv(env, error));
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  setenv("MASTER_ADDR", "10.0.0.7", 1);
  setenv("MASTER_PORT", "6000", 1);
  ASSERT_TRUE(readLaunchEnv(env, error)) << error;
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world, 8);
  EXPECT_EQ(env.localRank, 1);
  EXPECT_EQ(env.masterAddr, "10.0.0.7");
  EXPECT_EQ(env.masterPort, 6000);
  EXPECT_EQ(env.source, "OpenMPI");
  setenv("RANK", "9", 1);
  setenv("WORLD_SIZE", "4", 1);
  LaunchEnv bad;
  EXPECT_FALSE(readLaunchEnv(bad, error));
  EXPECT_NE(error.find("rank 9 is not below the world size 4"), std::string::npos) << error;
  for (const char *v : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                        "OMPI_COMM_WORLD_LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"})
    unsetenv(v);
}
