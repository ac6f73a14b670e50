//===- Files.cpp - reading inputs and writing outputs safely --------------===//
#include "support/Files.h"

#include <algorithm>
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

Status openRegularFile(const std::string &path, int &fd, int64_t &size) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
  // writer (forever); the type check below then refuses it.
  fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
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
  ZRT_RETURN_IF_ERROR(openRegularFile(path, fd, size));
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
  if (fd_ >= 0)
    ::close(fd_);
}

Status MappedFile::checkNotTruncated() const {
  struct stat st;
  if (fd_ < 0 || ::fstat(fd_, &st) != 0 || (size_t)st.st_size >= size_)
    return Status::ok();
  return errorf(path_, ": truncated while this run reads it (", (int64_t)st.st_size, " bytes, ",
                size_,
                " when the run started); restore the file and resume from the "
                "last checkpoint");
}

Status MappedFile::open(const std::string &path) {
  int fd;
  int64_t size;
  ZRT_RETURN_IF_ERROR(openRegularFile(path, fd, size));
  Status s = Status::ok();
  if (size > 0) {
    void *p = ::mmap(nullptr, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
      s = errorf(path, ": cannot map ", size, " bytes (", std::strerror(errno), ")");
    else
      data_ = static_cast<const char *>(p), size_ = (size_t)size;
  }
  if (s && data_)
    fd_ = fd, path_ = path;
  else
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

namespace {
/// |path| with its folders' symlinks resolved and '.'/'..' gone, whether or
/// not it exists (empty if that fails).
fs::path resolved(const std::string &path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? fs::path() : p;
}

/// Whether resolved |path| is |dir| or lies under it.
bool within(const fs::path &path, const fs::path &dir) {
  if (path.empty() || dir.empty())
    return false;
  auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return d == dir.end();
}

/// The first component of |path| below |root| (empty if not below it).
std::string componentBelow(const fs::path &path, const fs::path &root) {
  if (!within(path, root) || path == root)
    return "";
  auto [d, p] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  return p == path.end() ? "" : p->string();
}
} // namespace

Status OutputPaths::claim(const std::string &flag, const std::string &path) {
  ZRT_RETURN_IF_ERROR(checkOutputPath(flag, path, inputs_));
  if (path == "/dev/null")
    return Status::ok();
  fs::path p = resolved(path);
  for (const std::string &dir : inputFolders_)
    if (within(p, resolved(dir)))
      return errorf(flag, " ", path, ": is inside ", dir,
                    ", which this run reads; write the output elsewhere");
  for (const std::string &root : checkpointRoots_) {
    std::string first = componentBelow(p, resolved(root));
    if (first == "latest" || first.rfind("latest.", 0) == 0 || first.rfind("step-", 0) == 0 ||
        first == ".lock")
      return errorf(flag, " ", path, ": is part of the checkpoint in ", root,
                    " ('latest' and the step-N folders belong to it); write the output elsewhere");
  }
  // Any checkpoint's files, this run's or not: a step folder (it holds
  // manifest.pb) and a root's 'latest' (step-N folders beside it).
  std::error_code ec;
  fs::path parent = p.parent_path();
  if (!p.empty() && fs::exists(parent / "manifest.pb", ec))
    return errorf(flag, " ", path, ": is inside the checkpoint ", parent.string(),
                  " (it holds manifest.pb); write the output elsewhere");
  if (!p.empty() && p.filename() == "latest")
    for (const fs::directory_entry &e : fs::directory_iterator(parent, ec))
      if (e.path().filename().string().rfind("step-", 0) == 0 &&
          fs::exists(e.path() / "manifest.pb", ec))
        return errorf(flag, " ", path, ": would replace the 'latest' of the checkpoints in ",
                      parent.string(), "; write the output elsewhere");
  for (const auto &[other, q] : claimed_)
    if (!p.empty() && p == q)
      return errorf(flag, " ", path, ": ", other,
                    " writes the same file; give each output its own path");
  claimed_.emplace_back(flag, p);
  return Status::ok();
}

Status OutputPaths::claimFolder(const std::string &flag, const std::string &dir) {
  fs::path p = resolved(dir);
  for (const std::string &in : inputFolders_)
    if (within(p, resolved(in)) || within(resolved(in), p))
      return errorf(flag, " ", dir, ": overlaps ", in,
                    ", which this run reads; write into a new folder");
  for (const std::string &in : inputs_)
    if (!in.empty() && within(resolved(in), p))
      return errorf(flag, " ", dir, ": holds ", in,
                    ", an input of this run; write into a new folder");
  for (const std::string &root : checkpointRoots_) {
    std::string first = componentBelow(p, resolved(root));
    if (first == "latest" || first.rfind("step-", 0) == 0 || first == ".lock")
      return errorf(flag, " ", dir, ": is part of the checkpoint in ", root,
                    " ('latest' and the step-N folders belong to it); write into a new folder");
  }
  for (const auto &[other, q] : claimed_)
    if (within(q, p))
      return errorf(flag, " ", dir, ": holds ", other, "'s output; give each output its own path");
  claimed_.emplace_back(flag, p);
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
