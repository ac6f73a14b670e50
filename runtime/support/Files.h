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

/// Opens |path| for reading as a regular file, checked on the open file (so
/// that it cannot be swapped in between) and opened without waiting (a FIFO
/// is refused, not waited on): |fd| and its |size|; the caller closes |fd|
/// when this succeeds.
Status openRegularFile(const std::string &path, int &fd, int64_t &size);

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
  /// Fails, saying so, if the file is now shorter than when it was mapped
  /// (truncated in place while a run reads it): reading its lost pages
  /// would raise SIGBUS. One fstat; readers call it before each batch.
  Status checkNotTruncated() const;

private:
  const char *data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1; // kept open for checkNotTruncated
  std::string path_;
};

/// Whether |a| and |b| name the same existing file (device and inode).
bool sameFile(const std::string &a, const std::string &b);

/// Checks an output path before any work: not one of |inputs|, not a
/// directory, not a device or other non-regular file (/dev/null is fine),
/// and its directory exists and is writable. |flag| names the option in
/// messages.
Status checkOutputPath(const std::string &flag, const std::string &path,
                       const std::vector<std::string> &inputs);

/// The one rule for every file a zrun command writes: each output is checked
/// (checkOutputPath) against the files the command reads, against the
/// folders it reads whole (a Hugging Face checkpoint folder, a checkpoint
/// step being resumed or exported: nothing may be written anywhere inside
/// them), against the checkpoint roots it reads or writes (their 'latest',
/// step-N directories and temporaries belong to the checkpoint), and against
/// the outputs claimed before it (two flags naming one file would replace
/// each other). Paths are compared after resolving symlinked folders, and
/// before the files exist.
class OutputPaths {
public:
  void addInput(const std::string &path) { inputs_.push_back(path); }
  void addInputFolder(const std::string &dir) { inputFolders_.push_back(dir); }
  void addCheckpointRoot(const std::string &dir) { checkpointRoots_.push_back(dir); }
  /// Checks output |path| of |flag| and, when it is fine, claims it.
  Status claim(const std::string &flag, const std::string &path);
  /// Checks output folder |dir| of |flag| (a Hugging Face export, a
  /// TensorBoard log): not inside an input folder or a checkpoint, and no
  /// input or earlier output inside it.
  Status claimFolder(const std::string &flag, const std::string &dir);

private:
  std::vector<std::string> inputs_, inputFolders_, checkpointRoots_;
  std::vector<std::pair<std::string, std::string>> claimed_; // flag, resolved path
};

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
