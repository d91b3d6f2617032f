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

namespace mnemo {
namespace runtime {

struct IdxArray {
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

/// Reads `path` (.gz or raw). Returns false with `error` set on a missing,
/// truncated or malformed file. `maxItems` (if > 0) stops after that many
/// entries of the first dimension.
bool readIdx(const std::string &path, IdxArray &array, std::string &error,
             int64_t maxItems = 0);

} // namespace runtime
} // namespace mnemo

#endif // MNEMO_RUNTIME_IDX_H
