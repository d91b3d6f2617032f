//===- Safetensors.h - Reading and writing .safetensors files ---*- C++ -*-===//
//
// The safetensors format (a little-endian u64 header size, a JSON header of
// name -> {dtype, shape, data_offsets}, then the raw data), as PyTorch and
// the Hugging Face libraries read it. Writing is atomic: a temporary file,
// fsync, then rename, so an interrupted write never leaves a broken file
// under the final name. Reading validates everything and reports problems
// as errors, never crashes.
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_SAFETENSORS_H
#define MNEMO_RUNTIME_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mnemo::runtime {

struct StoredTensor {
  std::string name;
  std::string
      dtype; // "F32", "F16", "BF16", "I32", "I8", "U8", "BOOL", "F64", "I64"
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  /// A float32 tensor from values.
  static StoredTensor f32(std::string name, std::vector<int64_t> shape,
                          const std::vector<float> &values);
  static StoredTensor f64(std::string name, std::vector<int64_t> shape,
                          const std::vector<double> &values);
  static StoredTensor i32(std::string name, std::vector<int64_t> shape,
                          const std::vector<int32_t> &values);
};

struct SafetensorsFile {
  std::vector<StoredTensor> tensors;
  std::map<std::string, std::string> metadata;

  const StoredTensor *find(const std::string &name) const;
};

/// Bytes per element of a safetensors dtype, or 0 if unknown.
int64_t dtypeSize(const std::string &dtype);

/// "[8,784]", for messages.
std::string shapeText(const std::vector<int64_t> &shape);

/// Writes `file` to `path` atomically. Returns false and sets `error` on
/// failure; an existing file at `path` is then left as it was.
bool writeSafetensors(const std::string &path, const SafetensorsFile &file,
                      std::string &error);

/// Reads and validates `path`. Returns false and sets `error` on failure.
bool readSafetensors(const std::string &path, SafetensorsFile &file,
                     std::string &error);

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_SAFETENSORS_H
