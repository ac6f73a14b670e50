//===- Hostfile.h - DeepSpeed-style multi-node launch plans ------*- C++ -*-===//
//
// `zrun train ... --hostfile FILE [--include SPEC | --exclude SPEC]
// [--num_nodes N] [--num_gpus N] [--master-port P] [--dry-run]` starts one
// `zrun ... --nproc-per-node n` per node over ssh, as DeepSpeed's launcher
// does. The hostfile has lines `worker-01 slots=8` (# comments). SPEC is
// DeepSpeed's: `host[:slot,slot...]@host...`; a host without slots means
// all of them.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_COMM_HOSTFILE_H
#define ZRT_COMM_HOSTFILE_H

#include "support/Status.h"

#include <string>
#include <vector>

namespace zrt {

struct NodeSlots {
  std::string host;
  std::vector<int> slots; // GPU indices used on the host
};

/// Parses a hostfile's text (|path| for messages).
Status parseHostfile(const std::string &text, const std::string &path,
                     std::vector<NodeSlots> &nodes);

/// Applies --include / --exclude (at most one), then --num_nodes and
/// --num_gpus (-1: all), keeping the hostfile's order.
Status selectSlots(std::vector<NodeSlots> &nodes, const std::string &include,
                   const std::string &exclude, int numNodes, int numGpus);

struct NodeCommand {
  std::string host;
  std::vector<std::string> argv; // ssh HOST <remote shell command>
};

/// One ssh command per node: the first node is the master; node k's ranks
/// start at the sum of the slots before it (ZRUN_RANK_OFFSET), its GPUs
/// are CUDA_VISIBLE_DEVICES. |zrunArgs| is the command line without the
/// launch flags; |cwd| where the remote runs it.
std::vector<NodeCommand> nodeCommands(const std::vector<NodeSlots> &nodes,
                                      const std::vector<std::string> &zrunArgs,
                                      const std::string &cwd, int masterPort);

/// Quotes |s| for a POSIX shell.
std::string shellQuote(const std::string &s);

} // namespace zrt

#endif // ZRT_COMM_HOSTFILE_H
