//===- Files.cpp - reading inputs and writing outputs safely --------------===//
#include "support/Files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace zrt {

Status checkRegularFile(const std::string &path, int64_t &size) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return errorf(path, ": cannot open (", std::strerror(errno), ")");
  if (!S_ISREG(st.st_mode))
    return errorf(path, ": not a regular file (",
                  S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket",
                  "); pass a file");
  size = st.st_size;
  return Status::ok();
}

/// Opens |path| for reading as a regular file (checked on the open file, so
/// that it cannot be swapped in between): |fd| and its |size|; the caller
/// closes |fd| when this succeeds.
static Status openRegular(const std::string &path, int &fd, int64_t &size) {
  fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errorf(path, ": cannot open (", std::strerror(errno), ")");
  struct stat st;
  Status s = Status::ok();
  if (::fstat(fd, &st) != 0)
    s = errorf(path, ": cannot open (", std::strerror(errno), ")");
  else if (!S_ISREG(st.st_mode))
    s = errorf(path, ": not a regular file (",
               S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket", "); pass a file");
  if (!s) {
    ::close(fd);
    fd = -1;
    return s;
  }
  size = st.st_size;
  return s;
}

Status readRegularFile(const std::string &path, std::string &out, int64_t maxBytes) {
  int fd;
  int64_t size;
  ZRT_RETURN_IF_ERROR(openRegular(path, fd, size));
  Status s = Status::ok();
  if (size > maxBytes)
    s = errorf(path, ": ", size, " bytes, more than the ", maxBytes,
               " this file may have; is it the right file?");
  if (s) {
    out.resize((size_t)size);
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n = ::read(fd, out.data() + done, out.size() - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        s = errorf(path, ": cannot read (", n < 0 ? std::strerror(errno) : "shorter than its size",
                   ")");
        break;
      }
      done += (size_t)n;
    }
  }
  ::close(fd);
  return s;
}

MappedFile::~MappedFile() {
  if (data_ && size_)
    ::munmap(const_cast<char *>(data_), size_);
}

Status MappedFile::open(const std::string &path) {
  int fd;
  int64_t size;
  ZRT_RETURN_IF_ERROR(openRegular(path, fd, size));
  Status s = Status::ok();
  if (size > 0) {
    void *p = ::mmap(nullptr, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
      s = errorf(path, ": cannot map ", size, " bytes (", std::strerror(errno), ")");
    else
      data_ = static_cast<const char *>(p), size_ = (size_t)size;
  }
  ::close(fd);
  return s;
}

bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

Status checkOutputPath(const std::string &flag, const std::string &path,
                       const std::vector<std::string> &inputs) {
  if (path.empty())
    return errorf(flag, ": an empty path");
  if (path == "/dev/null") // the usual sink
    return Status::ok();
  for (const std::string &in : inputs)
    if (!in.empty() && sameFile(path, in))
      return errorf(flag, " ", path, ": is an input of this run (", in,
                    "); write the output elsewhere");
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return errorf(flag, " ", path, ": is a directory; pass a file name");
    if (S_ISLNK(st.st_mode))
      return errorf(flag, " ", path, ": is a symbolic link; pass the file itself");
    if (!S_ISREG(st.st_mode))
      return errorf(flag, " ", path, ": is a device or other special file, not a regular file");
  }
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty())
    dir = ".";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return errorf(flag, " ", path, ": cannot write into ", dir.string(), " (", std::strerror(errno),
                  ")");
  return Status::ok();
}

Status checkOutputDirectory(const std::string &flag, const std::string &dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    return errorf(flag, " ", dir, ": cannot create the directory (",
                  ec ? ec.message() : "a file of that name exists", ")");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return errorf(flag, " ", dir, ": cannot write into it (", std::strerror(errno), ")");
  return Status::ok();
}

Status writeFileAtomically(const std::string &path, const void *data, size_t bytes) {
  std::string tmpl = path + ".tmp.XXXXXX";
  // mkstemp: O_CREAT | O_EXCL, so a planted file or symlink of that name is
  // never followed or reused.
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0)
    return errorf(path, ": cannot create a temporary file beside it (", std::strerror(errno), ")");
  ::fchmod(fd, 0644);
  const char *p = static_cast<const char *>(data);
  size_t done = 0;
  int error = 0;
  while (done < bytes) {
    ssize_t n = ::write(fd, p + done, bytes - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      error = n < 0 ? errno : ENOSPC;
      break;
    }
    done += (size_t)n;
  }
  if (!error && ::fsync(fd) != 0)
    error = errno;
  if (::close(fd) != 0 && !error)
    error = errno;
  if (!error && ::rename(tmpl.c_str(), path.c_str()) != 0)
    error = errno;
  if (error) {
    ::unlink(tmpl.c_str());
    return errorf(path, ": cannot write (", std::strerror(error), ")");
  }
  return Status::ok();
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0)
    ::close(fd_); // releases the flock
}

Status DirectoryLock::acquire(const std::string &flag, const std::string &dir) {
  std::string path = (fs::path(dir) / ".lock").string();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    return errorf(flag, " ", dir, ": cannot create its lock file (", std::strerror(errno), ")");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    char holder[512] = {0};
    ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    std::string who = n > 0 ? std::string(holder, (size_t)n) : std::string("another process");
    while (!who.empty() && (who.back() == '\n' || who.back() == ' '))
      who.pop_back();
    if (error == EWOULDBLOCK)
      return errorf(flag, " ", dir, ": in use by ", who,
                    "; two runs must not write one checkpoint directory (wait for it, or pass "
                    "another)");
    return errorf(flag, " ", dir, ": cannot lock (", std::strerror(error), ")");
  }
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  char self[1024] = {0};
  ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string text = "pid " + std::to_string(::getpid()) + " on " + host + " (" +
                     (len > 0 ? std::string(self, (size_t)len) : "zrun") + ")\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) < 0) {
    // The lock holds without the note; the message then says less.
  }
  fd_ = fd;
  return Status::ok();
}

} // namespace zrt
