//===- SwapFile.cpp - a rank's NVMe arena ---------------------------------===//
#include "support/SwapFile.h"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

using namespace zrt;

namespace {
/// O_DIRECT's alignment: offsets, lengths and host addresses (4 KiB covers
/// every NVMe drive's logical block).
constexpr int64_t kAlign = 4096;

int64_t alignUp(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

std::string bytesText(int64_t b) {
  char s[64];
  if (b >= (int64_t)1 << 30)
    std::snprintf(s, sizeof s, "%.2f GiB", b / 1073741824.0);
  else if (b >= 1 << 20)
    std::snprintf(s, sizeof s, "%.2f MiB", b / 1048576.0);
  else
    std::snprintf(s, sizeof s, "%lld bytes", (long long)b);
  return s;
}
} // namespace

struct SwapFile::Ring {
  io_uring ring;
};

Status SwapFile::open(const std::string &flag, const std::string &dir, int rank, int64_t bytes,
                      const Options &options, std::unique_ptr<SwapFile> &out) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return errorf(flag, " ", dir, ": ", std::strerror(errno),
                  "; create the directory (on the NVMe drive) or pass another");
  if (!S_ISDIR(st.st_mode))
    return errorf(flag, " ", dir, ": is not a directory; pass the directory the swap files go in");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return errorf(flag, " ", dir, ": cannot write into it (", std::strerror(errno),
                  "); pass a writable directory");
  std::unique_ptr<SwapFile> f(new SwapFile());
  f->options_ = options;
  f->options_.blockSize = std::max<int64_t>(alignUp(options.blockSize), kAlign);
  f->options_.queueDepth = std::max(options.queueDepth, 1);
  f->path_ = dir + "/zcc-rank" + std::to_string(rank) + ".swap";
  f->bytes_ = bytes;
  bool existed = ::stat(f->path_.c_str(), &st) == 0;
  f->fd_ = ::open(f->path_.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  f->direct_ = f->fd_ >= 0;
  if (f->fd_ < 0 && errno == EINVAL) // a filesystem without O_DIRECT (tmpfs)
    f->fd_ = ::open(f->path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (f->fd_ < 0)
    return errorf(flag, " ", dir, ": cannot create ", f->path_, " (", std::strerror(errno),
                  "); pass a writable directory");
  if (::flock(f->fd_, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    ::close(f->fd_);
    f->fd_ = -1;
    if (e == EWOULDBLOCK)
      return errorf(flag, " ", dir, ": ", f->path_,
                    " is in use by another live run (the same rank); give each run its own ", flag);
    return errorf(flag, " ", dir, ": cannot lock ", f->path_, " (", std::strerror(e), ")");
  }
  // A file left by a run that crashed: truncated here, so nothing of it is
  // read (every byte the plan reads is written first, or zero).
  f->stale_ = existed;
  // Past `ulimit -f`, the kernel answers EFBIG, and raises SIGXFSZ, which
  // would end the process without a word: ignored, so the error is ours.
  std::signal(SIGXFSZ, SIG_IGN);
  int64_t size = alignUp(std::max<int64_t>(bytes, 1));
  if (::ftruncate(f->fd_, 0) != 0)
    return errorf(flag, " ", f->path_, ": cannot truncate (", std::strerror(errno), ")");
  if (::fallocate(f->fd_, 0, 0, size) != 0) {
    int e = errno;
    // No reservation on this filesystem: a sparse file of the size.
    if (e == EOPNOTSUPP && ::ftruncate(f->fd_, size) != 0)
      e = errno;
    if (e != EOPNOTSUPP) {
      struct statvfs vfs;
      std::string free = ::statvfs(dir.c_str(), &vfs) == 0
                             ? bytesText((int64_t)vfs.f_bavail * (int64_t)vfs.f_frsize)
                             : "unknown";
      ::ftruncate(f->fd_, 0);
      if (e == ENOSPC)
        return errorf(flag, " ", dir, ": the filesystem is full: rank ", rank,
                      "'s swap file needs ", bytesText(size), ", ", free,
                      " free; free space there or pass a larger drive (zcc --emit=report lists "
                      "the NVMe bytes per rank)");
      if (e == EFBIG)
        return errorf(flag, " ", dir, ": rank ", rank, "'s swap file of ", bytesText(size),
                      " exceeds the file-size limit (ulimit -f); raise it");
      return errorf(flag, " ", dir, ": cannot reserve ", bytesText(size), " for ", f->path_, " (",
                    std::strerror(e), ")");
    }
  }
  f->bounce_ = {static_cast<char *>(std::aligned_alloc(kAlign, f->options_.blockSize)), std::free};
  if (!f->bounce_)
    return errorf("out of memory for the swap file's bounce buffer");
  auto ring = std::make_unique<Ring>();
  if (io_uring_queue_init(f->options_.queueDepth, &ring->ring, 0) == 0)
    f->ring_ = std::move(ring); // else pread/pwrite (io_uring unavailable here)
  out = std::move(f);
  return Status::ok();
}

SwapFile::~SwapFile() {
  io_.stop(); // what was submitted runs first

  if (ring_)
    io_uring_queue_exit(&ring_->ring);
  if (fd_ >= 0) {
    ::unlink(path_.c_str());
    ::close(fd_);
  }
}

// Through the I/O thread too: one thread owns the ring and the bounce buffer.
Status SwapFile::read(int64_t offset, void *dst, int64_t bytes) {
  return wait(submit(false, offset, dst, bytes));
}

Status SwapFile::write(int64_t offset, const void *src, int64_t bytes) {
  return wait(submit(true, offset, const_cast<void *>(src), bytes));
}

int64_t SwapFile::submit(bool write, int64_t offset, void *host, int64_t bytes) {
  char *p = static_cast<char *>(host);
  return io_.submit([=, this] { return transfer(write, offset, p, bytes); });
}

Status SwapFile::wait(int64_t ticket) { return io_.wait(ticket); }

Status SwapFile::transfer(bool write, int64_t offset, char *host, int64_t bytes) {
  if (offset < 0 || bytes < 0 || offset > bytes_ - bytes)
    return errorf(path_, ": bytes [", offset, ", ", offset + bytes,
                  ") are outside the swap file's ", bytes_);
  (write ? written_ : read_) += bytes;
  if (!direct_)
    return transferAligned(write, offset, host, bytes);
  // O_DIRECT: the part whose file offset and host address are both aligned
  // goes straight; the rest through the aligned bounce buffer, a block at a
  // time (a write reads the block first: its other bytes stay).
  int64_t body0 = offset, body1 = offset;
  if ((offset - (int64_t)(uintptr_t)host) % kAlign == 0) {
    body0 = std::min(alignUp(offset), offset + bytes);
    body1 = std::max(body0, (offset + bytes) / kAlign * kAlign);
  }
  auto viaBounce = [&](int64_t from, int64_t to) -> Status {
    bounced_ += std::max<int64_t>(0, to - from);
    while (from < to) {
      int64_t block = from / kAlign * kAlign;
      int64_t span = std::min<int64_t>(options_.blockSize, alignUp(to) - block);
      int64_t n = std::min(to, block + span) - from;
      ZRT_RETURN_IF_ERROR(transferAligned(false, block, bounce_.get(), span));
      if (write) {
        std::memcpy(bounce_.get() + (from - block), host + (from - offset), n);
        ZRT_RETURN_IF_ERROR(transferAligned(true, block, bounce_.get(), span));
      } else {
        std::memcpy(host + (from - offset), bounce_.get() + (from - block), n);
      }
      from += n;
    }
    return Status::ok();
  };
  ZRT_RETURN_IF_ERROR(viaBounce(offset, body0));
  if (body1 > body0)
    ZRT_RETURN_IF_ERROR(transferAligned(write, body0, host + (body0 - offset), body1 - body0));
  return viaBounce(std::max(body1, body0), offset + bytes);
}

/// Blocks of options_.blockSize, up to queueDepth in flight (io_uring), or
/// one after another (pread/pwrite). A short transfer is finished with
/// pread/pwrite.
Status SwapFile::transferAligned(bool write, int64_t offset, char *host, int64_t bytes) {
  auto finish = [&](int64_t off, char *p, int64_t n) -> Status {
    while (n > 0) {
      ssize_t r = write ? ::pwrite(fd_, p, n, off) : ::pread(fd_, p, n, off);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        return errorf(path_, ": ", write ? "write" : "read", " of ", n, " bytes at ", off,
                      " failed (", r < 0 ? std::strerror(errno) : "end of file", ")");
      off += r, p += r, n -= r;
    }
    return Status::ok();
  };
  if (!ring_)
    return finish(offset, host, bytes);
  io_uring *ring = &ring_->ring;
  const int64_t block = options_.blockSize;
  int64_t next = 0, inFlight = 0;
  Status status = Status::ok(); // the first failure
  while (next < bytes || inFlight > 0) {
    while (status && next < bytes && inFlight < options_.queueDepth) {
      io_uring_sqe *sqe = io_uring_get_sqe(ring);
      if (!sqe)
        break;
      unsigned n = (unsigned)std::min(block, bytes - next);
      if (write)
        io_uring_prep_write(sqe, fd_, host + next, n, offset + next);
      else
        io_uring_prep_read(sqe, fd_, host + next, n, offset + next);
      io_uring_sqe_set_data64(sqe, (uint64_t)next);
      next += n;
      ++inFlight;
    }
    if (inFlight == 0)
      break;
    int r = io_uring_submit(ring);
    if (r < 0) { // nothing reached the kernel: give the ring up, finish with pread/pwrite
      io_uring_queue_exit(ring);
      ring_.reset();
      return finish(offset, host, bytes);
    }
    io_uring_cqe *cqe;
    r = io_uring_wait_cqe(ring, &cqe);
    if (r < 0) {
      if (r == -EINTR)
        continue;
      return errorf(path_, ": io_uring wait failed (", std::strerror(-r), ")");
    }
    int64_t at = (int64_t)io_uring_cqe_get_data64(cqe);
    int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    --inFlight;
    int64_t want = std::min(block, bytes - at);
    if (res < 0 && status)
      status = errorf(path_, ": ", write ? "write" : "read", " of ", want, " bytes at ",
                      offset + at, " failed (", std::strerror(-res), ")");
    else if (res >= 0 && res < want && status)
      status = finish(offset + at + res, host + at + res, want - res);
    if (!status)
      next = bytes; // submit nothing more; drain what is in flight
  }
  return status;
}
