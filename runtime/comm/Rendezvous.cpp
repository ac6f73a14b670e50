//===- Rendezvous.cpp - W processes find each other over TCP --------------===//
#include "comm/Rendezvous.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace zrt {
namespace {

constexpr uint32_t kMagic = 0x7a72756eu; // "zrun"

using Clock = std::chrono::steady_clock;

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0)
      close(fd);
  }
};

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return (int)std::max<int64_t>(0, left.count());
}

/// Sends or receives exactly |n| bytes before |deadline|.
bool transfer(int fd, char *data, size_t n, bool send, Clock::time_point deadline) {
  size_t done = 0;
  while (done < n) {
    pollfd p{fd, (short)(send ? POLLOUT : POLLIN), 0};
    int r = poll(&p, 1, msLeft(deadline));
    if (r <= 0)
      return false;
    ssize_t k = send ? ::send(fd, data + done, n - done, MSG_NOSIGNAL)
                     : ::recv(fd, data + done, n - done, 0);
    if (k <= 0)
      return false;
    done += (size_t)k;
  }
  return true;
}

Status resolve(const std::string &host, int port, sockaddr_in &addr) {
  std::memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1)
    return Status::ok();
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res)
    return errorf("MASTER_ADDR ", host, ": cannot resolve the host name");
  addr.sin_addr = ((sockaddr_in *)res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return Status::ok();
}

Status master(const RendezvousConfig &c, const std::string &payload, Clock::time_point deadline) {
  sockaddr_in addr;
  ZRT_RETURN_IF_ERROR(resolve(c.host, c.port, addr));
  Fd listener;
  listener.fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(listener.fd, (sockaddr *)&addr, sizeof addr) != 0 || listen(listener.fd, 128) != 0)
    return errorf("rank 0 cannot listen on ", c.host, ":", c.port, " (", std::strerror(errno),
                  "); is MASTER_PORT in use?");
  std::vector<Fd> peers(c.world);
  int joined = 1;
  while (joined < c.world) {
    pollfd p{listener.fd, POLLIN, 0};
    if (poll(&p, 1, msLeft(deadline)) <= 0) {
      std::string missing;
      for (int r = 1; r < c.world; ++r)
        if (peers[r].fd < 0)
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      return errorf("rendezvous on ", c.host, ":", c.port, " timed out after ", c.timeoutSeconds,
                    " s: rank(s) ", missing, " of ", c.world, " never connected");
    }
    int fd = accept(listener.fd, nullptr, nullptr);
    if (fd < 0)
      continue;
    Fd conn;
    conn.fd = fd;
    uint32_t hello[2];
    if (!transfer(fd, (char *)hello, sizeof hello, false, deadline) || hello[0] != kMagic)
      continue; // not one of ours, or it went away: keep waiting for the rest
    int r = (int)hello[1];
    if (r <= 0 || r >= c.world)
      return errorf("rendezvous: a process says it is rank ", r, ", but the world size is ",
                    c.world, " (WORLD_SIZE differs between the processes?)");
    if (peers[r].fd >= 0)
      return errorf("rendezvous: two processes say they are rank ", r);
    std::swap(peers[r].fd, conn.fd);
    ++joined;
  }
  uint32_t n = (uint32_t)payload.size();
  for (int r = 1; r < c.world; ++r) {
    char ack = 0;
    if (!transfer(peers[r].fd, (char *)&n, sizeof n, true, deadline) ||
        !transfer(peers[r].fd, const_cast<char *>(payload.data()), n, true, deadline) ||
        !transfer(peers[r].fd, &ack, 1, false, deadline))
      return errorf("rendezvous: rank ", r, " went away before it had the id");
  }
  return Status::ok();
}

Status worker(const RendezvousConfig &c, std::string &payload, Clock::time_point deadline) {
  sockaddr_in addr;
  ZRT_RETURN_IF_ERROR(resolve(c.host, c.port, addr));
  Fd conn;
  // The master may not listen yet: retry until the deadline.
  while (true) {
    conn.fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(conn.fd, (sockaddr *)&addr, sizeof addr) == 0)
      break;
    close(conn.fd);
    conn.fd = -1;
    if (msLeft(deadline) == 0)
      return errorf("rank ", c.rank, " could not reach rank 0 at ", c.host, ":", c.port, " within ",
                    c.timeoutSeconds,
                    " s (MASTER_ADDR/MASTER_PORT, or rank 0 "
                    "did not start)");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  uint32_t hello[2] = {kMagic, (uint32_t)c.rank}, n = 0;
  if (!transfer(conn.fd, (char *)hello, sizeof hello, true, deadline) ||
      !transfer(conn.fd, (char *)&n, sizeof n, false, deadline))
    return errorf("rank ", c.rank, ": rank 0 at ", c.host, ":", c.port,
                  " closed the rendezvous or did not answer within ", c.timeoutSeconds, " s");
  if (n > (1u << 20))
    return errorf("rank ", c.rank, ": the rendezvous payload is implausibly large (", n, " bytes)");
  payload.assign(n, '\0');
  char ack = 1;
  if (!transfer(conn.fd, payload.data(), n, false, deadline) ||
      !transfer(conn.fd, &ack, 1, true, deadline))
    return errorf("rank ", c.rank, ": rank 0 went away during the rendezvous");
  return Status::ok();
}

} // namespace

Status rendezvous(const RendezvousConfig &c, std::string &payload) {
  if (c.world < 1 || c.rank < 0 || c.rank >= c.world)
    return errorf("rendezvous: rank ", c.rank, " is not in a world of ", c.world);
  if (c.world == 1)
    return Status::ok();
  auto deadline = Clock::now() + std::chrono::milliseconds((int64_t)(c.timeoutSeconds * 1000));
  return c.rank == 0 ? master(c, payload, deadline) : worker(c, payload, deadline);
}

RendezvousConfig rendezvousConfig(const LaunchEnv &env, double timeoutSeconds) {
  RendezvousConfig rc;
  rc.host = env.masterAddr;
  rc.port = env.masterPort;
  rc.rank = env.rank;
  rc.world = env.world;
  rc.timeoutSeconds = timeoutSeconds;
  return rc;
}

bool readLaunchEnv(LaunchEnv &env, std::string &error) {
  auto get = [](const char *name) -> const char * {
    const char *v = std::getenv(name);
    return v && *v ? v : nullptr;
  };
  auto number = [&](const char *name, int &out) {
    const char *v = get(name);
    if (!v)
      return false;
    char *end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (*end || x < 0 || x > 1 << 20) {
      error = std::string(name) + "='" + v + "' is not a non-negative integer";
      return false;
    }
    out = (int)x;
    return true;
  };
  const char *rankVars[][4] = {
      {"RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OpenMPI"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "Slurm"}};
  for (auto &vars : rankVars) {
    if (!get(vars[0]))
      continue;
    if (!number(vars[0], env.rank) || !number(vars[1], env.world)) {
      if (error.empty())
        error = std::string(vars[0]) + " is set but " + vars[1] + " is not";
      return false;
    }
    if (!number(vars[2], env.localRank))
      env.localRank = env.rank;
    env.source = vars[3];
    if (const char *a = get("MASTER_ADDR"))
      env.masterAddr = a;
    if (get("MASTER_PORT") && !number("MASTER_PORT", env.masterPort))
      return false;
    if (env.rank >= env.world) {
      error = "rank " + std::to_string(env.rank) + " is not below the world size " +
              std::to_string(env.world);
      return false;
    }
    return true;
  }
  return false;
}

} // namespace zrt
