//===- NpyTest.cpp - strict .npy reader -----------------------------------===//
#include "train/Npy.h"

#include <gtest/gtest.h>

using namespace zrt;

static NpyArray makeF32(std::vector<int64_t> shape) {
  NpyArray a;
  a.dtype = DType::F32;
  a.shape = shape;
  a.data.resize(a.numel() * 4);
  for (int64_t k = 0; k < a.numel(); ++k) {
    float v = 0.5f * k - 3;
    memcpy(a.data.data() + 4 * k, &v, 4);
  }
  return a;
}

TEST(Npy, RoundTrip) {
  for (auto shape : std::vector<std::vector<int64_t>>{{}, {7}, {3, 5}, {2, 3, 4}}) {
    NpyArray a = makeF32(shape), b;
    std::string error;
    std::string bytes = serializeNpy(a);
    EXPECT_EQ((bytes.size() - a.data.size()) % 64, 0u);
    ASSERT_TRUE(parseNpy(bytes, b, error)) << error;
    EXPECT_EQ(b.shape, a.shape);
    EXPECT_EQ(b.dtype, DType::F32);
    EXPECT_EQ(b.data, a.data);
  }
}

TEST(Npy, ParsesNumpyHeaders) {
  // Headers as numpy.save writes them, with the dtypes zrun reads.
  struct Case {
    const char *descr;
    DType dtype;
    size_t size;
  };
  for (Case c : {Case{"<i8", DType::I64, 8}, Case{"<f8", DType::F64, 8},
                 Case{"|b1", DType::Bool, 1}, Case{"<u2", DType::U16, 2}}) {
    std::string header =
        std::string("{'descr': '") + c.descr + "', 'fortran_order': False, 'shape': (2, 3), }";
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header += '\n';
    std::string bytes("\x93NUMPY\x01\x00", 8);
    bytes += (char)header.size();
    bytes += (char)0;
    bytes += header + std::string(6 * c.size, '\0');
    NpyArray a;
    std::string error;
    ASSERT_TRUE(parseNpy(bytes, a, error)) << c.descr << ": " << error;
    EXPECT_EQ(a.dtype, c.dtype);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  }
}

/// Replaces the first occurrence of |from| in |s| by |to| (same length).
static std::string patch(std::string s, const std::string &from, const std::string &to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos);
  EXPECT_EQ(from.size(), to.size());
  return s.replace(at, from.size(), to);
}

TEST(Npy, RejectsMalformedFiles) {
  std::string good = serializeNpy(makeF32({4, 4}));
  struct Case {
    std::string bytes;
    const char *message;
  };
  std::vector<Case> cases = {
      {"", "not a .npy file"},
      {"hello world, not numpy", "not a .npy file"},
      {good.substr(0, 30), "truncated header"},
      {good.substr(0, good.size() - 1), "truncated data"},
      {good + "x", "trailing data"},
      {patch(good, "<f4", ">f4"), "big-endian"},
      {patch(good, "<f4", "<c8"), "unsupported dtype"},
      {patch(good, "False", "True "), "Fortran-order"},
      {patch(good, "'shape'", "'shap3'"), "unknown key"},
      {patch(good, "(4, 4)", "(4, x)"), "bad dimension"},
  };
  for (const Case &c : cases) {
    NpyArray a;
    std::string error;
    EXPECT_FALSE(parseNpy(c.bytes, a, error)) << c.message;
    EXPECT_NE(error.find(c.message), std::string::npos) << "got: " << error;
  }
}

TEST(Npy, HugeShapeIsTruncatedData) {
  // Found by the npy fuzzer: a size past 2^64 was converted to an integer
  // for the message (undefined behaviour).
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, "
                       "99999999999, 99999999999), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += (char)header.size();
  bytes += (char)0;
  bytes += header;
  NpyArray a;
  std::string error;
  EXPECT_FALSE(parseNpy(bytes, a, error));
  EXPECT_EQ(error, "truncated data: shape and dtype need over 10^18 bytes, the file has 0")
      << error;
}

TEST(Npy, ReadFileErrorsNameTheFile) {
  NpyArray a;
  std::string error;
  EXPECT_FALSE(readNpy("/nonexistent/x.npy", a, error));
  EXPECT_NE(error.find("/nonexistent/x.npy"), std::string::npos);
}
