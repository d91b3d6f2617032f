//===- Idx.h - IDX files (MNIST, Fashion-MNIST) -----------------*- C++ -*-===//
//
// Reads the IDX format of MNIST-style data sets, gzipped or raw (zlib reads
// both): a magic number naming the element type and rank, the dimensions,
// then the data. Only unsigned bytes, the type those data sets use.
//
// Part of the runtime: plain C++17 and zlib, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_IDX_H
#define MNEMO_RUNTIME_IDX_H

#include <cstdint>
#include <string>
#include <vector>

namespace mnemo::runtime {

struct IdxArray {
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

/// Reads `path` (.gz or raw). Returns false with `error` set on a missing,
/// truncated, damaged or malformed file, one with bytes after the data its
/// header describes, or one of another rank than `rank` (if > 0: 3 for
/// images, 1 for labels). `maxItems` (if > 0) stops after that many entries
/// of the first dimension.
bool readIdx(const std::string &path, IdxArray &array, std::string &error,
             int64_t maxItems = 0, int rank = 0);

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_IDX_H
