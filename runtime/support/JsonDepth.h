//===- JsonDepth.h - nesting depth of untrusted JSON, before parsing -*- C++ -*-===//
//
// Every JSON reader of zcc and zrun takes files a user (or an attacker) hands
// it: safetensors headers, model.safetensors.index.json, Chrome traces,
// checkpoint records, ONNX metadata, DeepSpeed configs. The parsers
// themselves are safe at any depth (nlohmann's is iterative), but what comes
// after is not: printing a value (json::dump), llvm::json's parser and its
// destructor all recurse, and a file nested 100,000 deep overflows the stack.
// So each reader checks the depth of the text first, in one pass over its
// bytes (brackets inside strings do not count), and refuses a file nested
// deeper than its format ever is, naming the line. Header-only: zcc and zrun
// share it.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_SUPPORT_JSONDEPTH_H
#define ZRT_SUPPORT_JSONDEPTH_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zrt {

/// How deep the JSON files zcc and zrun read may nest. The deepest real ones
/// are Chrome traces' args and Hugging Face configs (4-6); 64 leaves room.
constexpr int kMaxJsonDepth = 64;

/// Empty when |text| nests at most |limit| arrays and objects deep, else
/// "line N: nested more than LIMIT deep". Strings (with their escapes) are
/// skipped, so a '[' inside a name does not count; malformed text is left for
/// the parser to report.
inline std::string jsonDepthError(std::string_view text, int limit = kMaxJsonDepth) {
  int depth = 0;
  int64_t line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line;
    } else if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
        else if (text[i] == '\n')
          ++line;
    } else if (c == '{' || c == '[') {
      if (++depth > limit)
        return "line " + std::to_string(line) + ": nested more than " + std::to_string(limit) +
               " deep";
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return "";
}

/// |text| cut to at most |bytes| for an error message (untrusted values are
/// echoed only this far), with "..." where it was cut.
inline std::string clipForMessage(std::string_view text, size_t bytes = 120) {
  if (text.size() <= bytes)
    return std::string(text);
  return std::string(text.substr(0, bytes)) + "...";
}

} // namespace zrt

#endif // ZRT_SUPPORT_JSONDEPTH_H
