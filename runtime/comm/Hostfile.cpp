//===- Hostfile.cpp - DeepSpeed-style multi-node launch plans -------------===//
#include "comm/Hostfile.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

namespace zrt {
namespace {

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool parseInt(const std::string &s, int &out) {
  if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  out = std::atoi(s.c_str());
  return true;
}

/// DeepSpeed's `host[:a,b]@host` into host -> slots (empty: all).
Status parseSpec(const std::string &flag, const std::string &spec,
                 std::vector<std::pair<std::string, std::vector<int>>> &out) {
  std::stringstream nodes(spec);
  std::string node;
  while (std::getline(nodes, node, '@')) {
    node = trim(node);
    if (node.empty())
      return errorf(flag, " '", spec, "': an empty host (expected host[:slot,slot]@host)");
    size_t colon = node.find(':');
    std::vector<int> slots;
    if (colon != std::string::npos) {
      std::stringstream list(node.substr(colon + 1));
      std::string item;
      while (std::getline(list, item, ',')) {
        int slot;
        if (!parseInt(trim(item), slot))
          return errorf(flag, " '", spec, "': slot '", item, "' of ", node.substr(0, colon),
                        " is not a GPU index");
        slots.push_back(slot);
      }
      node = node.substr(0, colon);
    }
    out.push_back({node, slots});
  }
  return Status::ok();
}

/// Slots (GPUs) a node may have: more is a typo, not a machine.
constexpr int kMaxSlots = 1024;

/// An RFC 1123 host name (letters, digits, '-' inside labels, '.' between
/// them) or an IPv4/IPv6 address: what may go to ssh and into MASTER_ADDR.
/// Anything else (a '-' first, quotes, '$', spaces) is refused: it could be
/// an ssh option or a shell command.
bool validHost(const std::string &h) {
  if (h.empty() || h.size() > 253)
    return false;
  if (h.find(':') != std::string::npos) // IPv6
    return h.find_first_not_of("0123456789abcdefABCDEF:.") == std::string::npos;
  std::stringstream labels(h);
  std::string label;
  int count = 0;
  while (std::getline(labels, label, '.')) {
    ++count;
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-' ||
        label.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != std::string::npos)
      return false;
  }
  return count > 0 && h.back() != '.';
}

} // namespace

Status parseHostfile(const std::string &text, const std::string &path,
                     std::vector<NodeSlots> &nodes) {
  std::stringstream in(text);
  std::string line;
  int lineNo = 0;
  std::map<std::string, int> seen;
  while (std::getline(in, line)) {
    ++lineNo;
    line = trim(line.substr(0, line.find('#')));
    if (line.empty())
      continue;
    std::stringstream words(line);
    std::string host, slotsWord, extra;
    words >> host >> slotsWord;
    int slots = 0;
    if (slotsWord.rfind("slots=", 0) != 0 || !parseInt(slotsWord.substr(6), slots) || slots < 1 ||
        (words >> extra))
      return errorf(path, ":", lineNo, ": expected 'HOST slots=N', got '", line.substr(0, 200),
                    "'");
    if (!validHost(host))
      return errorf(path, ":", lineNo, ": '", host.substr(0, 200),
                    "' is not a host name (letters, digits, '-' and '.') or an IP address");
    if (slots > kMaxSlots)
      return errorf(path, ":", lineNo, ": slots=", slots, " is more than the ", kMaxSlots,
                    " GPUs a node may have");
    if (seen.count(host))
      return errorf(path, ":", lineNo, ": host ", host, " is listed twice (line ", seen[host], ")");
    seen[host] = lineNo;
    NodeSlots n;
    n.host = host;
    for (int s = 0; s < slots; ++s)
      n.slots.push_back(s);
    nodes.push_back(n);
  }
  if (nodes.empty())
    return errorf(path, ": no hosts (expected lines 'HOST slots=N')");
  return Status::ok();
}

Status selectSlots(std::vector<NodeSlots> &nodes, const std::string &include,
                   const std::string &exclude, int numNodes, int numGpus) {
  if (!include.empty() && !exclude.empty())
    return Status::error("--include and --exclude are exclusive (as in DeepSpeed)");
  auto find = [&](const std::string &host) {
    return std::find_if(nodes.begin(), nodes.end(),
                        [&](const NodeSlots &n) { return n.host == host; });
  };
  std::vector<std::pair<std::string, std::vector<int>>> spec;
  if (!include.empty()) {
    ZRT_RETURN_IF_ERROR(parseSpec("--include", include, spec));
    std::vector<NodeSlots> kept;
    for (NodeSlots &n : nodes)
      for (auto &[host, slots] : spec)
        if (host == n.host) {
          NodeSlots k{n.host, {}};
          for (int s : slots.empty() ? n.slots : slots) {
            if (std::find(n.slots.begin(), n.slots.end(), s) == n.slots.end())
              return errorf("--include: ", host, " has no slot ", s, " (slots=", n.slots.size(),
                            ")");
            k.slots.push_back(s);
          }
          kept.push_back(k);
        }
    for (auto &[host, slots] : spec)
      if (find(host) == nodes.end())
        return errorf("--include: host ", host, " is not in the hostfile");
    nodes = kept;
  } else if (!exclude.empty()) {
    ZRT_RETURN_IF_ERROR(parseSpec("--exclude", exclude, spec));
    for (auto &[host, slots] : spec) {
      auto it = find(host);
      if (it == nodes.end())
        return errorf("--exclude: host ", host, " is not in the hostfile");
      if (slots.empty())
        it->slots.clear();
      for (int s : slots)
        it->slots.erase(std::remove(it->slots.begin(), it->slots.end(), s), it->slots.end());
    }
    nodes.erase(std::remove_if(nodes.begin(), nodes.end(),
                               [](const NodeSlots &n) { return n.slots.empty(); }),
                nodes.end());
  }
  if (numNodes >= 0) {
    if (numNodes < 1 || numNodes > (int)nodes.size())
      return errorf("--num_nodes ", numNodes, ": the hostfile selection has ", nodes.size(),
                    " nodes");
    nodes.resize(numNodes);
  }
  if (numGpus >= 0) {
    for (NodeSlots &n : nodes) {
      if (numGpus < 1 || numGpus > (int)n.slots.size())
        return errorf("--num_gpus ", numGpus, ": ", n.host, " has ", n.slots.size(),
                      " selected slots");
      n.slots.resize(numGpus);
    }
  }
  if (nodes.empty())
    return Status::error("no GPU is left after --include/--exclude");
  return Status::ok();
}

std::string shellQuote(const std::string &s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-./=:,@%+") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<NodeCommand> nodeCommands(const std::vector<NodeSlots> &nodes,
                                      const std::vector<std::string> &zrunArgs,
                                      const std::string &cwd, int masterPort) {
  int world = 0;
  for (const NodeSlots &n : nodes)
    world += (int)n.slots.size();
  std::vector<NodeCommand> out;
  int offset = 0;
  for (const NodeSlots &n : nodes) {
    std::string gpus;
    for (int s : n.slots)
      gpus += (gpus.empty() ? "" : ",") + std::to_string(s);
    // Every value quoted; host names were validated (parseHostfile). `exec`:
    // zrun is the session's process, which ssh's hangup reaches.
    std::string remote =
        "cd " + shellQuote(cwd) + " && exec env MASTER_ADDR=" + shellQuote(nodes[0].host) +
        " MASTER_PORT=" + std::to_string(masterPort) + " WORLD_SIZE=" + std::to_string(world) +
        " ZRUN_RANK_OFFSET=" + std::to_string(offset) + " CUDA_VISIBLE_DEVICES=" + gpus +
        " NCCL_NVLS_ENABLE=0";
    for (const std::string &a : zrunArgs)
      remote += " " + shellQuote(a);
    remote += " --nproc-per-node " + std::to_string(n.slots.size()) + " --master-port " +
              std::to_string(masterPort);
    // '--': the host is never read as an ssh option.
    out.push_back({n.host, {"ssh", "--", n.host, remote}});
    offset += (int)n.slots.size();
  }
  return out;
}

} // namespace zrt
