//===- Files.h - reading inputs and writing outputs safely -------*- C++ -*-===//
//
// Every file zrun reads or writes goes through these:
//  - inputs are regular files (a device such as /dev/zero, a FIFO or a
//    directory is refused before reading: it would never end), with a size
//    bound where the reader holds the whole file;
//  - outputs are never an input of the run, a device or a directory, and
//    their directory is checked writable before any work is done;
//  - a file is replaced atomically and durably: a new temporary file beside
//    it (created exclusively, never through a symlink), written, fsync'd,
//    renamed over the target;
//  - a directory a run writes into (--checkpoint-dir) is locked (flock) for
//    the run, and a second run is told who holds it.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_SUPPORT_FILES_H
#define ZRT_SUPPORT_FILES_H

#include "support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zrt {

/// 64 GiB: more than any plan, manifest, model graph or .npy array zrun
/// holds in memory at once.
constexpr int64_t kMaxReadBytes = int64_t(64) << 30;

/// Checks that |path| is a regular file (symlinks followed); |size| its size.
Status checkRegularFile(const std::string &path, int64_t &size);

/// Reads the whole of |path|, a regular file of at most |maxBytes|.
Status readRegularFile(const std::string &path, std::string &out, int64_t maxBytes = kMaxReadBytes);

/// A regular file mapped read-only: its pages are read as they are touched,
/// so a file of any size (a token file of billions of tokens) costs address
/// space, not memory. Truncating the file while it is mapped would make a
/// read fault (SIGBUS), as with NumPy's memmap; zrun never writes its inputs.
class MappedFile {
public:
  MappedFile() = default;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile();
  /// Maps |path|, a regular file (a device or directory is refused).
  Status open(const std::string &path);
  const char *data() const { return data_; }
  size_t size() const { return size_; }

private:
  const char *data_ = nullptr;
  size_t size_ = 0;
};

/// Whether |a| and |b| name the same existing file (device and inode).
bool sameFile(const std::string &a, const std::string &b);

/// Checks an output path before any work: not one of |inputs|, not a
/// directory, not a device or other non-regular file (/dev/null is fine),
/// and its directory exists and is writable. |flag| names the option in
/// messages.
Status checkOutputPath(const std::string &flag, const std::string &path,
                       const std::vector<std::string> &inputs);

/// Checks a directory a run will write into (created if missing): not a
/// file, writable.
Status checkOutputDirectory(const std::string &flag, const std::string &dir);

/// Replaces |path| with |bytes| atomically and durably (see above).
Status writeFileAtomically(const std::string &path, const void *data, size_t bytes);

/// An exclusive lock on a directory (flock on DIR/.lock, which names the
/// holder), held until destroyed.
class DirectoryLock {
public:
  DirectoryLock() = default;
  DirectoryLock(const DirectoryLock &) = delete;
  DirectoryLock &operator=(const DirectoryLock &) = delete;
  ~DirectoryLock();
  /// Fails, naming the holder (pid, host, command), if another process holds it.
  Status acquire(const std::string &flag, const std::string &dir);

private:
  int fd_ = -1;
};

} // namespace zrt

#endif // ZRT_SUPPORT_FILES_H
