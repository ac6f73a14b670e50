//===- SwapFile.h - a rank's NVMe arena: a file read and written in blocks -*- C++ -*-===//
//
// ZeRO-Infinity's third memory space (zcc --offload-optimizer nvme): a plan's
// NVME arena is one file per rank under --nvme-path, read into and written
// from the pinned host arena by the plan's copies. The file:
//   - is DIR/zcc-rank<R>.swap, created (or, left by a run that crashed,
//     truncated and reused: its contents are never read before they are
//     written) and held with an exclusive flock, so two live runs never
//     share one; removed when the run ends;
//   - has its bytes reserved up front (fallocate): a path that is missing,
//     not a directory, not writable, on a full disk or past the file-size
//     limit fails here, before training, with what to do;
//   - is opened with O_DIRECT where the filesystem allows it (tmpfs does not:
//     then the page cache is used, and direct() says so); requests go in
//     blocks of Options::blockSize with up to Options::queueDepth in flight
//     through io_uring (liburing), or pread/pwrite where io_uring is not
//     available (a sandbox without it); pieces of a request that O_DIRECT's
//     alignment rules out go through an aligned bounce buffer.
//   - Async requests run in order on the file's own I/O thread: submit()
//     returns a ticket that wait() completes.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_SUPPORT_SWAPFILE_H
#define ZRT_SUPPORT_SWAPFILE_H

#include "support/Status.h"
#include "support/TaskThread.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace zrt {

class SwapFile {
public:
  struct Options {
    int64_t blockSize = 1 << 20; // DeepSpeed aio.block_size
    int queueDepth = 8;          // aio.queue_depth
  };

  /// Creates (or reuses a stale) DIR/zcc-rank<rank>.swap of |bytes|.
  /// |flag| names the option in messages (--nvme-path).
  static Status open(const std::string &flag, const std::string &dir, int rank, int64_t bytes,
                     const Options &options, std::unique_ptr<SwapFile> &out);
  ~SwapFile();
  SwapFile(const SwapFile &) = delete;
  SwapFile &operator=(const SwapFile &) = delete;

  /// Reads or writes [offset, offset + bytes) of the file, now (after the
  /// requests submitted before).
  Status read(int64_t offset, void *dst, int64_t bytes);
  Status write(int64_t offset, const void *src, int64_t bytes);
  /// The same on the I/O thread, in submission order; wait() returns its
  /// status (each ticket once).
  int64_t submit(bool write, int64_t offset, void *host, int64_t bytes);
  Status wait(int64_t ticket);

  const std::string &path() const { return path_; }
  int64_t size() const { return bytes_; }
  bool direct() const { return direct_; }
  bool uring() const { return ring_ != nullptr; }
  const Options &options() const { return options_; }
  /// Whether the file was left by an earlier run (reused, truncated).
  bool reusedStale() const { return stale_; }
  /// Bytes read and written so far (the report's per-step traffic, tests).
  int64_t bytesRead() const { return read_.load(); }
  int64_t bytesWritten() const { return written_.load(); }
  /// Of those, the bytes that went through the bounce buffer a block at a
  /// time (O_DIRECT, where a host address or file offset is not 4 KiB-
  /// aligned): zcc aligns both, so on its plans this is the last partial
  /// 4 KiB of some ranges.
  int64_t bytesBounced() const { return bounced_.load(); }

private:
  SwapFile() = default;
  Status transfer(bool write, int64_t offset, char *host, int64_t bytes);
  Status transferAligned(bool write, int64_t offset, char *host, int64_t bytes);

  std::string path_;
  int fd_ = -1;
  int64_t bytes_ = 0;
  Options options_;
  bool direct_ = false, stale_ = false;
  struct Ring;
  std::unique_ptr<Ring> ring_;
  std::unique_ptr<char, void (*)(void *)> bounce_{nullptr, nullptr};
  std::atomic<int64_t> read_{0}, written_{0}, bounced_{0};

  // The I/O thread: it alone uses the ring and the bounce buffer.
  TaskThread io_;
};

} // namespace zrt

#endif // ZRT_SUPPORT_SWAPFILE_H
