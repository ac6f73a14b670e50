//===- SwapFileTest.cpp - the NVMe arena's file: alignment, async, errors -===//
#include "support/SwapFile.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>
#include <vector>

using zrt::SwapFile;

namespace {

/// A fresh directory under the test's temporary directory.
std::string scratch(const std::string &name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("zrt-swapfile-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::vector<char> randomBytes(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<char> v(n);
  for (char &c : v)
    c = (char)g();
  return v;
}

} // namespace

// Offsets and host addresses that O_DIRECT cannot take (not 4 KiB-aligned,
// different misalignments, a block size smaller than the request) come
// back byte for byte, and the bytes around them are kept.
TEST(SwapFile, UnalignedRequestsRoundTrip) {
  std::string dir = scratch("unaligned");
  std::unique_ptr<SwapFile> f;
  SwapFile::Options o;
  o.blockSize = 8192;
  o.queueDepth = 3;
  ASSERT_TRUE(SwapFile::open("--nvme-path", dir, 0, 100000, o, f));
  std::vector<char> whole = randomBytes(100000, 1);
  ASSERT_TRUE(f->write(0, whole.data(), whole.size()));
  // A write at an odd offset from an odd host address.
  std::vector<char> src = randomBytes(30001 + 7, 2);
  ASSERT_TRUE(f->write(1234, src.data() + 7, 30001));
  std::copy(src.begin() + 7, src.end(), whole.begin() + 1234);
  std::vector<char> back(100000 + 13);
  ASSERT_TRUE(f->read(0, back.data() + 13, 100000));
  EXPECT_TRUE(std::equal(whole.begin(), whole.end(), back.begin() + 13));
  // An aligned body with unaligned ends, and the file's last bytes.
  std::vector<char> tail(5000);
  ASSERT_TRUE(f->read(95000, tail.data(), 5000));
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), whole.begin() + 95000));
  EXPECT_EQ(f->bytesWritten(), 100000 + 30001);
  EXPECT_EQ(f->bytesRead(), 100000 + 5000);
}

// Async requests run in order: a read submitted after a write sees it.
TEST(SwapFile, AsyncRequestsCompleteInOrder) {
  std::string dir = scratch("async");
  std::unique_ptr<SwapFile> f;
  ASSERT_TRUE(SwapFile::open("--nvme-path", dir, 3, 1 << 20, {}, f));
  std::vector<char> a = randomBytes(1 << 20, 3), b(1 << 20);
  int64_t w = f->submit(true, 0, a.data(), a.size());
  int64_t r = f->submit(false, 0, b.data(), b.size());
  EXPECT_TRUE(f->wait(r));
  EXPECT_TRUE(f->wait(w));
  EXPECT_EQ(a, b);
  EXPECT_EQ(f->path(), dir + "/zcc-rank3.swap");
}

// Outside the file: an error, not a write past its end.
TEST(SwapFile, OutOfRangeIsAnError) {
  std::string dir = scratch("range");
  std::unique_ptr<SwapFile> f;
  ASSERT_TRUE(SwapFile::open("--nvme-path", dir, 0, 4096, {}, f));
  char c[16] = {};
  zrt::Status s = f->write(4090, c, 16);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("outside the swap file"), std::string::npos) << s.message();
}

// A stale file of a crashed run is reused (truncated: reads give zeros),
// and the file is removed when the run ends.
TEST(SwapFile, StaleFileIsReusedAndRemoved) {
  std::string dir = scratch("stale");
  std::string path = dir + "/zcc-rank0.swap";
  { std::ofstream(path) << std::string(10000, 'x'); }
  {
    std::unique_ptr<SwapFile> f;
    ASSERT_TRUE(SwapFile::open("--nvme-path", dir, 0, 8192, {}, f));
    EXPECT_TRUE(f->reusedStale());
    std::vector<char> b(8192, 1);
    ASSERT_TRUE(f->read(0, b.data(), b.size()));
    EXPECT_EQ(b, std::vector<char>(8192, 0));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SwapFile, MissingDirectoryIsAnError) {
  std::unique_ptr<SwapFile> f;
  zrt::Status s = SwapFile::open("--nvme-path", "/nonexistent/zcc", 0, 4096, {}, f);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("--nvme-path /nonexistent/zcc: No such file or directory"),
            std::string::npos)
      << s.message();
}
