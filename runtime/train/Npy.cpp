//===- Npy.cpp - strict .npy reading and writing --------------------------===//
#include "train/Npy.h"

#include "support/Files.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace zrt;

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

namespace {
/// A tiny parser for the Python-literal header dict NumPy writes:
/// {'descr': '<f4', 'fortran_order': False, 'shape': (16, 64), }
struct HeaderParser {
  const std::string &s;
  size_t pos = 0;
  std::string error;

  void skip() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n'))
      ++pos;
  }
  bool expect(char c) {
    skip();
    if (pos < s.size() && s[pos] == c) {
      ++pos;
      return true;
    }
    error = std::string("expected '") + c + "' at header offset " + std::to_string(pos);
    return false;
  }
  bool peek(char c) {
    skip();
    return pos < s.size() && s[pos] == c;
  }
  bool string(std::string &out) {
    skip();
    if (pos >= s.size() || (s[pos] != '\'' && s[pos] != '"')) {
      error = "expected a string at header offset " + std::to_string(pos);
      return false;
    }
    char q = s[pos++];
    size_t end = s.find(q, pos);
    if (end == std::string::npos) {
      error = "unterminated string in header";
      return false;
    }
    out = s.substr(pos, end - pos);
    pos = end + 1;
    return true;
  }
  bool word(std::string &out) {
    skip();
    size_t start = pos;
    while (pos < s.size() && (isalnum((unsigned char)s[pos]) || s[pos] == '_'))
      ++pos;
    out = s.substr(start, pos - start);
    if (out.empty()) {
      error = "expected a value at header offset " + std::to_string(start);
      return false;
    }
    return true;
  }
};
} // namespace

static bool parseDescr(const std::string &descr, DType &dtype, std::string &error) {
  if (descr.size() < 2) {
    error = "unsupported dtype '" + descr + "'";
    return false;
  }
  char order = descr[0];
  std::string kind = descr.substr(1);
  if (order == '>' && kind != "u1" && kind != "b1" && kind != "i1") {
    error = "big-endian data ('" + descr +
            "') is not supported; convert with arr.astype(arr.dtype.newbyteorder('<'))";
    return false;
  }
  if (order != '<' && order != '|' && order != '=') {
    error = "unsupported byte order in dtype '" + descr + "'";
    return false;
  }
  static const struct {
    const char *name;
    DType dtype;
  } kinds[] = {
      {"f4", DType::F32}, {"f8", DType::F64},  {"f2", DType::F16},
      {"i8", DType::I64}, {"i4", DType::I32},  {"u2", DType::U16},
      {"u1", DType::U8},  {"b1", DType::Bool}, {"i1", DType::I8},
  };
  for (const auto &k : kinds)
    if (kind == k.name) {
      dtype = k.dtype;
      return true;
    }
  error = "unsupported dtype '" + descr +
          "' (supported: float32, float64, float16, int64, int32, uint16, uint8, bool)";
  return false;
}

bool zrt::parseNpy(const std::string &bytes, NpyArray &out, std::string &error) {
  static const char magic[] = "\x93NUMPY";
  if (bytes.size() < 10 || memcmp(bytes.data(), magic, 6) != 0) {
    error = "not a .npy file (bad magic; write it with numpy.save)";
    return false;
  }
  unsigned major = (unsigned char)bytes[6];
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = (unsigned char)bytes[8] | ((unsigned char)bytes[9] << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) {
      error = "truncated header";
      return false;
    }
    headerLen = 0;
    for (int k = 0; k < 4; ++k)
      headerLen |= (size_t)(unsigned char)bytes[8 + k] << (8 * k);
    headerStart = 12;
  } else {
    error = "unsupported .npy version " + std::to_string(major);
    return false;
  }
  if (headerLen > bytes.size() - headerStart) {
    error = "truncated header (" + std::to_string(headerLen) + " bytes announced, " +
            std::to_string(bytes.size() - headerStart) + " present)";
    return false;
  }
  std::string header = bytes.substr(headerStart, headerLen);
  HeaderParser p{header};
  std::string descr;
  bool fortran = false, haveDescr = false, haveShape = false, haveOrder = false;
  std::vector<int64_t> shape;
  if (!p.expect('{')) {
    error = "malformed header: " + p.error;
    return false;
  }
  while (!p.peek('}')) {
    std::string key;
    if (!p.string(key) || !p.expect(':')) {
      error = "malformed header: " + p.error;
      return false;
    }
    if (key == "descr") {
      if (!p.string(descr)) {
        error = "malformed header: " + p.error;
        return false;
      }
      haveDescr = true;
    } else if (key == "fortran_order") {
      std::string v;
      if (!p.word(v) || (v != "True" && v != "False")) {
        error = "malformed header: fortran_order must be True or False";
        return false;
      }
      fortran = v == "True";
      haveOrder = true;
    } else if (key == "shape") {
      if (!p.expect('(')) {
        error = "malformed header: " + p.error;
        return false;
      }
      while (!p.peek(')')) {
        std::string v;
        if (!p.word(v)) {
          error = "malformed header: " + p.error;
          return false;
        }
        char *end = nullptr;
        long long d = strtoll(v.c_str(), &end, 10);
        if (*end || d < 0 || d > (1LL << 40)) {
          error = "malformed header: bad dimension '" + v + "'";
          return false;
        }
        shape.push_back(d);
        if (!p.peek(')') && !p.expect(',')) {
          error = "malformed header: " + p.error;
          return false;
        }
      }
      p.expect(')');
      haveShape = true;
    } else {
      error = "malformed header: unknown key '" + key + "'";
      return false;
    }
    if (!p.peek('}') && !p.expect(',')) {
      error = "malformed header: " + p.error;
      return false;
    }
  }
  if (!haveDescr || !haveShape || !haveOrder) {
    error = "malformed header: it needs descr, fortran_order and shape";
    return false;
  }
  if (fortran) {
    error = "Fortran-order arrays are not supported; save np.ascontiguousarray(arr)";
    return false;
  }
  if (!parseDescr(descr, out.dtype, error))
    return false;
  out.shape = shape;
  size_t dataStart = headerStart + headerLen;
  // Guard the product against overflow before comparing sizes.
  long double want = (long double)dtypeSize(out.dtype);
  for (int64_t d : shape)
    want *= (long double)d;
  size_t have = bytes.size() - dataStart;
  if (want != (long double)have) {
    error = (want > (long double)have ? "truncated data: " : "trailing data: ") +
            std::string("shape and dtype need ") +
            (want < 1e18L ? std::to_string((unsigned long long)want) : std::string("over 10^18")) +
            " bytes, the file has " + std::to_string(have);
    return false;
  }
  out.data.assign(bytes.begin() + dataStart, bytes.end());
  return true;
}

bool zrt::readNpy(const std::string &path, NpyArray &out, std::string &error) {
  std::string bytes;
  if (Status s = readRegularFile(path, bytes); !s) {
    error = s.message();
    return false;
  }
  if (!parseNpy(bytes, out, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

std::string zrt::serializeNpy(const NpyArray &a) {
  static const struct {
    DType dtype;
    const char *descr;
  } descrs[] = {
      {DType::F32, "<f4"}, {DType::F64, "<f8"},  {DType::F16, "<f2"}, {DType::I64, "<i8"},
      {DType::I32, "<i4"}, {DType::U16, "<u2"},  {DType::U8, "|u1"},  {DType::Bool, "|b1"},
      {DType::I8, "|i1"},  {DType::BF16, "<u2"}, // NumPy has no bfloat16: its bits as uint16
  };
  std::string descr = "<f4";
  for (const auto &d : descrs)
    if (d.dtype == a.dtype)
      descr = d.descr;
  std::string shape = "(";
  for (size_t k = 0; k < a.shape.size(); ++k)
    shape += std::to_string(a.shape[k]) +
             (a.shape.size() == 1 ? "," : (k + 1 < a.shape.size() ? ", " : ""));
  shape += ")";
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so that the data starts at a multiple of 64, then '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += (char)(header.size() & 0xff);
  out += (char)(header.size() >> 8);
  out += header;
  out.append(a.data.begin(), a.data.end());
  return out;
}

bool zrt::writeNpy(const std::string &path, const NpyArray &array, std::string &error) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    std::string bytes = serializeNpy(array);
    out.write(bytes.data(), bytes.size());
    if (!out) {
      error = path + ": cannot write (" + std::strerror(errno) + ")";
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = path + ": cannot rename the temporary file (" + std::strerror(errno) + ")";
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}
