//===- HostfileFuzzer.cpp - libFuzzer target for DeepSpeed hostfiles ------===//
//
// Arbitrary bytes as "HOSTFILE\0INCLUDE\0EXCLUDE": the hostfile parser, the
// --include/--exclude selection and the ssh commands (comm/Hostfile.h).
// Every host that reaches a command must be a valid host name: checked here,
// since an invalid one could run a command on the remote shell.
//
//===----------------------------------------------------------------------===//
#include "comm/Hostfile.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size), parts[3];
  for (int k = 0, at = 0; k < 3; ++k) {
    size_t end = text.find('\0', at);
    parts[k] = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (end == std::string::npos)
      break;
    at = (int)end + 1;
  }
  std::vector<zrt::NodeSlots> nodes;
  if (!zrt::parseHostfile(parts[0], "hostfile", nodes))
    return 0;
  if (!zrt::selectSlots(nodes, parts[1], parts[2], -1, -1))
    return 0;
  for (const zrt::NodeCommand &c :
       zrt::nodeCommands(nodes, {"zrun", "train", "p.zplan"}, "/w", 29500))
    for (char ch : c.host)
      if (!std::isalnum((unsigned char)ch) && ch != '-' && ch != '.' && ch != ':')
        std::abort(); // a host that could reach the remote shell
  return 0;
}
