//===- Npy.h - strict .npy reading and writing -------------------*- C++ -*-===//
//
// The data contract of `zrun` (docs/training.md) is NumPy's .npy format. The
// reader is strict: unknown dtypes, big-endian data, Fortran order, truncated
// or oversized files are errors that name the file and the problem; nothing
// is guessed.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAIN_NPY_H
#define ZRT_TRAIN_NPY_H

#include "support/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zrt {

struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<char> data; // little-endian, C order

  int64_t numel() const;
};

/// Parses .npy |bytes|; on failure returns false and sets |error| (without
/// the file name, which the caller adds).
bool parseNpy(const std::string &bytes, NpyArray &out, std::string &error);

/// Reads the .npy file at |path|; |error| names the file.
bool readNpy(const std::string &path, NpyArray &out, std::string &error);

/// Serializes |array| as .npy version 1.0.
std::string serializeNpy(const NpyArray &array);

/// Writes |array| to |path| atomically (temporary file, then rename).
bool writeNpy(const std::string &path, const NpyArray &array, std::string &error);

} // namespace zrt

#endif // ZRT_TRAIN_NPY_H
