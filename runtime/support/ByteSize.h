//===- ByteSize.h - "16GiB", "1.5GB", "4096" as bytes ------------*- C++ -*-===//
//
// Memory sizes on command lines (zcc and zrun --memory-budget): a number with
// an optional unit; KiB/MiB/GiB/TiB (and K/M/G/T) are powers of 1024, kB/MB/
// GB/TB powers of 1000, B or none bytes. Header-only: zcc and zrun share it.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_SUPPORT_BYTESIZE_H
#define ZRT_SUPPORT_BYTESIZE_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace zrt {

/// The largest arena a plan may have: zrun's plan validator refuses more,
/// and zcc refuses to write a plan that needs more.
constexpr int64_t kMaxArenaBytes = int64_t(1) << 40;

inline std::optional<int64_t> parseByteSize(const std::string &text) {
  const char *begin = text.c_str();
  char *end = nullptr;
  double value = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(value) || value < 0)
    return std::nullopt;
  std::string unit(end);
  double scale = 0;
  struct Unit {
    const char *name;
    double scale;
  };
  static const Unit units[] = {{"", 1},
                               {"B", 1},
                               {"K", 1024.0},
                               {"KiB", 1024.0},
                               {"M", 1048576.0},
                               {"MiB", 1048576.0},
                               {"G", 1073741824.0},
                               {"GiB", 1073741824.0},
                               {"T", 1099511627776.0},
                               {"TiB", 1099511627776.0},
                               {"kB", 1e3},
                               {"KB", 1e3},
                               {"MB", 1e6},
                               {"GB", 1e9},
                               {"TB", 1e12}};
  for (const Unit &u : units)
    if (unit == u.name)
      scale = u.scale;
  if (scale == 0 || value * scale > 9.0e18)
    return std::nullopt;
  return (int64_t)std::llround(value * scale);
}

/// "21.00 GiB (22548820032 B)", "3.80 MiB (3981376 B)".
inline std::string showByteSize(int64_t bytes) {
  char buf[80];
  double v = (double)bytes;
  const char *unit = "B";
  if (bytes >= (1 << 30)) {
    v /= 1073741824.0;
    unit = "GiB";
  } else if (bytes >= (1 << 20)) {
    v /= 1048576.0;
    unit = "MiB";
  } else if (bytes >= (1 << 10)) {
    v /= 1024.0;
    unit = "KiB";
  }
  if (*unit == 'B')
    std::snprintf(buf, sizeof buf, "%lld B", (long long)bytes);
  else
    std::snprintf(buf, sizeof buf, "%.2f %s (%lld B)", v, unit, (long long)bytes);
  return buf;
}

} // namespace zrt

#endif // ZRT_SUPPORT_BYTESIZE_H
