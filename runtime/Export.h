//===- Export.h - Compressed weights for inference (--export) ---*- C++ -*-===//
//
// Writes a trained model's parameters in the form inference wants them
// (safetensors, metadata `format: mnemo-export-1`; each compressed
// tensor's layout is in the metadata under its name):
//
// - a weight trained with `quantize ... = qat(bits = 8)`: int8 values (I8,
//   the weight's shape) with `<w>.scale` (F32) and `<w>.zero_point` (I32)
//   per channel (dim 0) or per tensor, from the observed range, so that
//   (q - zero_point) * scale is exactly what the fake-quantized forward
//   computed; with bits = 4: two values per byte (U8, low nibble first,
//   two's complement);
// - a weight named by a post-training `int8(...)` or `int4(...)` directive:
//   the same, symmetric, with ranges from the trained weight itself, per
//   output channel or per group of `group` consecutive elements of a row;
// - a pruned 2:4 weight [rows, k]: the kept values (F32 [rows, k / 2]) and
//   `<w>.indices` (U8 [rows, k / 8]): each group of four gives the
//   positions of its two kept values in 2 + 2 bits, two groups per byte,
//   low nibble first;
// - a weight pruned by whole rows (structured pruning along dim 0): the
//   kept rows (F32) and `<w>.rows` (I32), their indices;
// - another pruned weight: CSR (`<w>.values` F32, `<w>.columns` I16 or I32,
//   `<w>.row_offsets` I32 over dim 0) when that is smaller than dense;
// - everything else as it is.
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_EXPORT_H
#define MNEMO_RUNTIME_EXPORT_H

#include "runtime/Model.h"
#include "runtime/Safetensors.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mnemo::runtime {

struct ExportSummary {
  /// Bytes of the parameters as trained (dense), and as exported.
  int64_t denseBytes = 0, exportedBytes = 0;
  /// One line per compressed parameter: "fc1.weight  int8 per channel ...".
  std::vector<std::string> lines;
};

/// The directive of `kind` ("prune" or "quantize") in the train section
/// (JSON) that names `param`, or null.
const nlohmann::json *directiveFor(const nlohmann::json &train,
                                   const char *kind, const std::string &param);

/// One parameter's values and what training kept next to it.
struct ParameterData {
  std::string name, dtype; // "fc1.weight", "f32"
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr;
  /// The pruning mask (1 bit per element, set = pruned), or null.
  const uint8_t *mask = nullptr;
  /// The QAT observer's range (f32, observedChannels each), or null.
  const uint8_t *observedMin = nullptr, *observedMax = nullptr;
  int64_t observedChannels = 0;
};

/// Appends `p` to `file` in its exported form, as the train section's
/// directives for it say (the list above), with its layout in the
/// metadata, and sets `line` ("fc1.weight  int8 per channel ...: 1605632
/// -> 405504 bytes") when compressed (empty when stored as it is). False
/// with `error` when a weight to quantize holds a NaN or an infinity.
bool compressParameter(const nlohmann::json &train, const ParameterData &p,
                       SafetensorsFile &file, std::string &line,
                       std::string &error);

/// Writes the export of the parameters in `memory` (host copies) to `path`
/// atomically. `train` is the model's train section (JSON).
bool exportWeights(const std::string &path, const ModelInfo &model,
                   const StepMemory &memory, ExportSummary &summary,
                   std::string &error);

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_EXPORT_H
