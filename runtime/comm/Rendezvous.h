//===- Rendezvous.h - W processes find each other over TCP -------*- C++ -*-===//
//
// How the ranks of a multi-process run exchange the NCCL unique id (and
// anything else small): rank 0 listens on MASTER_ADDR:MASTER_PORT, every
// other rank connects and says its rank, rank 0 sends the payload to all.
// Everything has a deadline: a rank that never comes, a peer that closes, a
// master that never answers end in an error naming who and what, never in a
// hang.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_COMM_RENDEZVOUS_H
#define ZRT_COMM_RENDEZVOUS_H

#include "support/Status.h"

#include <string>

namespace zrt {

struct RendezvousConfig {
  std::string host = "127.0.0.1"; // MASTER_ADDR
  int port = 29500;               // MASTER_PORT
  int rank = 0, world = 1;
  double timeoutSeconds = 60;
};

/// Rank 0 sends |payload| to every rank; the others receive it into
/// |payload|. Returns once all ranks have it (rank 0) or it arrived.
Status rendezvous(const RendezvousConfig &config, std::string &payload);

/// Where this process stands in a launched job, from the launcher's
/// environment: torchrun/DeepSpeed (RANK, WORLD_SIZE, LOCAL_RANK,
/// MASTER_ADDR, MASTER_PORT), OpenMPI (OMPI_COMM_WORLD_RANK, _SIZE,
/// _LOCAL_RANK) or Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID). False
/// when none is set (a single process: zrun runs the ranks itself).
struct LaunchEnv {
  int rank = 0, world = 1, localRank = 0;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  std::string source; // which convention
};
bool readLaunchEnv(LaunchEnv &env, std::string &error);

/// The rendezvous of this process's job (master address, port, rank, world).
RendezvousConfig rendezvousConfig(const LaunchEnv &env, double timeoutSeconds);

} // namespace zrt

#endif // ZRT_COMM_RENDEZVOUS_H
