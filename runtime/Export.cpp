//===- Export.cpp - Compressed weights for inference (train --export) -----===//

#include "runtime/Export.h"
#include "lang/ops/quantization/QuantizationFormulas.h"
#include "runtime/Checkpoint.h"
#include "runtime/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

using namespace mnemo;
using namespace mnemo::runtime;

namespace {

struct Argument {
  const ArgumentInfo *info = nullptr;
  const uint8_t *data = nullptr;
  int64_t count() const { return info->elements(); }
};

StoredTensor raw(std::string name, std::string dtype,
                 std::vector<int64_t> shape, const void *data, size_t bytes) {
  StoredTensor t{std::move(name), std::move(dtype), std::move(shape), {}};
  t.bytes.assign(static_cast<const uint8_t *>(data),
                 static_cast<const uint8_t *>(data) + bytes);
  return t;
}

std::string text(const nlohmann::json &d, const char *key) {
  return d.contains(key) && d[key].is_string() ? d[key].get<std::string>() : "";
}

int64_t integer(const nlohmann::json &d, const char *key, int64_t fallback) {
  return d.contains(key) && d[key].is_number() ? d[key].get<int64_t>()
                                               : fallback;
}

} // namespace

const nlohmann::json *runtime::directiveFor(const nlohmann::json &train,
                                            const char *kind,
                                            const std::string &param) {
  if (!train.is_object() || !train.contains(kind))
    return nullptr;
  for (const nlohmann::json &d : train[kind])
    if (d.contains("params"))
      for (const nlohmann::json &p : d["params"])
        if (p.is_string() && p.get<std::string>() == param)
          return &d;
  return nullptr;
}

namespace {

/// One parameter's export into a file: the forms below each append their
/// tensors and describe them.
struct ParameterExport {
  ParameterExport(const ParameterData &p, SafetensorsFile &file,
                  std::string &line, std::string &error)
      : p(p), name(p.name), shape(p.shape), file(file), line(line),
        error(error), before(file.tensors.size()),
        w(reinterpret_cast<const float *>(p.data)) {
    for (int64_t d : shape)
      n *= d;
    denseBytes = n * (p.dtype == "f32" ? 4 : 2);
  }

  /// Records the form: `layout` in the file's metadata, and the line
  /// "NAME  FORM: DENSE -> EXPORTED bytes".
  bool done(const std::string &layout, const std::string &form) {
    file.metadata[name] = layout;
    int64_t bytes = 0;
    for (size_t t = before; t < file.tensors.size(); ++t)
      bytes += int64_t(file.tensors[t].bytes.size());
    line = name + "  " + form + ": " + std::to_string(denseBytes) + " -> " +
           std::to_string(bytes) + " bytes";
    return true;
  }

  /// Whether element `e` is pruned (the mask's bit set).
  bool pruned(int64_t e) const {
    uint32_t word;
    std::memcpy(&word, p.mask + 4 * (e / 32), 4);
    return (word >> (e % 32)) & 1u;
  }

  bool quantized(const nlohmann::json &quantize);
  bool twoFour(const nlohmann::json *prune);
  bool keptRows();
  bool csr();

  const ParameterData &p;
  const std::string &name;
  const std::vector<int64_t> &shape;
  SafetensorsFile &file;
  std::string &line, &error;
  size_t before;
  const float *w;
  int64_t n = 1, denseBytes = 0;
};

/// int8 or int4 with a scale and zero point per range: the ranges observed
/// in training (qat), or the weight's own per row or per group of a row
/// (post-training, symmetric).
bool ParameterExport::quantized(const nlohmann::json &quantize) {
  std::string kind = text(quantize, "kind");
  bool trained = kind == "qat";
  int bits = trained          ? int(integer(quantize, "bits", 8))
             : kind == "int8" ? 8
                              : 4;
  int qmin = -(1 << (bits - 1)), qmax = (1 << (bits - 1)) - 1;
  // A NaN or an infinity has no code (converting it is undefined) and
  // would give its whole range a useless scale; a last step that diverged
  // leaves such weights.
  for (int64_t e = 0; e < n; ++e)
    if (!std::isfinite(w[e])) {
      error = "cannot quantize '" + name + "' to int" + std::to_string(bits) +
              ": it holds " + (std::isnan(w[e]) ? "nan" : "inf") +
              " at element " + std::to_string(e);
      return false;
    }
  bool symmetric = !trained || text(quantize, "scheme") == "symmetric";
  bool perGroup = !trained && text(quantize, "granularity") == "per_group";
  int64_t channels =
      trained    ? p.observedChannels
      : perGroup ? n / std::max<int64_t>(1, integer(quantize, "group", 128))
      : shape.size() >= 2 ? shape[0]
                          : 1;
  int64_t inner = n / channels; // consecutive elements share a range
  std::vector<float> lows(channels), highs(channels);
  for (int64_t c = 0; c < channels; ++c) {
    if (trained) {
      std::memcpy(&lows[c], p.observedMin + 4 * c, 4);
      std::memcpy(&highs[c], p.observedMax + 4 * c, 4);
      if (!std::isfinite(lows[c]) || !std::isfinite(highs[c])) {
        error = "cannot quantize '" + name + "': its observed range " +
                std::to_string(c) + " is [" + std::to_string(lows[c]) + ", " +
                std::to_string(highs[c]) + "]";
        return false;
      }
      continue;
    }
    lows[c] = highs[c] = w[c * inner];
    for (int64_t e = c * inner; e < (c + 1) * inner; ++e) {
      lows[c] = std::min(lows[c], w[e]);
      highs[c] = std::max(highs[c], w[e]);
    }
  }
  std::vector<float> scales(channels);
  std::vector<int32_t> zeros(channels);
  std::vector<int8_t> q(n);
  for (int64_t c = 0; c < channels; ++c) {
    fakequant::QParams qp =
        fakequant::qparams(lows[c], highs[c], qmin, qmax, symmetric);
    scales[c] = qp.scale;
    zeros[c] = int32_t(qp.zeroPoint);
    for (int64_t e = c * inner; e < (c + 1) * inner; ++e) {
      float v = fakequant::quantized(w[e], qp);
      q[e] = int8_t(v < qmin ? qmin : (v > qmax ? qmax : v));
    }
  }
  if (bits == 8) {
    file.tensors.push_back(raw(name, "I8", shape, q.data(), q.size()));
  } else {
    std::vector<uint8_t> packed((n + 1) / 2, 0);
    for (int64_t e = 0; e < n; ++e)
      packed[e / 2] |= uint8_t((uint8_t(q[e]) & 0xfu) << (4 * (e % 2)));
    file.tensors.push_back(raw(name, "U8", {int64_t(packed.size())},
                               packed.data(), packed.size()));
  }
  file.tensors.push_back(
      StoredTensor::f32(name + ".scale", {channels}, scales));
  file.tensors.push_back(
      StoredTensor::i32(name + ".zero_point", {channels}, zeros));
  std::string layout = "int" + std::to_string(bits) +
                       (perGroup ? " per group of " + std::to_string(inner)
                        : channels > 1 ? std::string(" per channel (dim 0)")
                                       : std::string(" per tensor")) +
                       (symmetric ? ", symmetric" : ", affine") +
                       (trained ? ", trained" : ", post-training") +
                       ", shape " + shapeText(shape);
  return done(layout, layout);
}

/// 2:4 sparsity (prune nm with n 2, m 4), when every group of four keeps
/// two: the kept values and their positions, 2 bits each.
bool ParameterExport::twoFour(const nlohmann::json *prune) {
  int64_t rows = shape[0], k = n / rows;
  bool isTwoFour = prune && text(*prune, "kind") == "nm" &&
                   integer(*prune, "n", 2) == 2 &&
                   integer(*prune, "m", 4) == 4 && k % 8 == 0;
  for (int64_t g = 0; isTwoFour && g < n; g += 4)
    isTwoFour = pruned(g) + pruned(g + 1) + pruned(g + 2) + pruned(g + 3) == 2;
  if (!isTwoFour)
    return false;
  std::vector<float> values;
  std::vector<uint8_t> indices(n / 8, 0);
  for (int64_t g = 0; g < n; g += 4) {
    unsigned positions = 0, kept = 0;
    for (int j = 0; j < 4; ++j)
      if (!pruned(g + j)) {
        values.push_back(w[g + j]);
        positions |= unsigned(j) << (2 * kept++);
      }
    indices[g / 8] |= uint8_t(positions << (4 * ((g / 4) % 2)));
  }
  file.tensors.push_back(StoredTensor::f32(name, {rows, k / 2}, values));
  file.tensors.push_back(raw(name + ".indices", "U8", {rows, k / 8},
                             indices.data(), indices.size()));
  return done("2:4 packed, shape " + shapeText(shape), "2:4 packed");
}

/// Whole rows pruned (structured pruning along dim 0), when that is
/// smaller: the kept rows and their indices.
bool ParameterExport::keptRows() {
  int64_t rows = shape[0], k = n / rows;
  std::vector<int32_t> kept;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t prunedInRow = 0;
    for (int64_t c = 0; c < k; ++c)
      prunedInRow += pruned(r * k + c);
    if (prunedInRow != 0 && prunedInRow != k)
      return false;
    if (prunedInRow == 0)
      kept.push_back(int32_t(r));
  }
  int64_t rowBytes = int64_t(kept.size()) * (k * 4 + 4);
  if (int64_t(kept.size()) == rows || rowBytes >= denseBytes)
    return false;
  std::vector<float> values;
  for (int32_t r : kept)
    values.insert(values.end(), w + r * k, w + (r + 1) * k);
  std::vector<int64_t> keptShape = shape;
  keptShape[0] = int64_t(kept.size());
  file.tensors.push_back(StoredTensor::f32(name, keptShape, values));
  file.tensors.push_back(
      StoredTensor::i32(name + ".rows", {int64_t(kept.size())}, kept));
  return done("rows kept (dim 0), shape " + shapeText(shape),
              "rows kept: " + std::to_string(kept.size()) + " of " +
                  std::to_string(rows));
}

/// Compressed sparse rows, when that is smaller: the kept values, their
/// columns (16 bits where they fit) and each row's first.
bool ParameterExport::csr() {
  int64_t rows = shape[0], k = n / rows;
  int64_t kept = 0;
  for (int64_t e = 0; e < n; ++e)
    kept += !pruned(e);
  int indexBytes = k <= 32768 ? 2 : 4;
  int64_t csrBytes = kept * (4 + indexBytes) + (rows + 1) * 4;
  if (csrBytes >= denseBytes)
    return false;
  std::vector<float> values;
  std::vector<int32_t> offsets{0}, columns;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < k; ++c)
      if (!pruned(r * k + c)) {
        values.push_back(w[r * k + c]);
        columns.push_back(int32_t(c));
      }
    offsets.push_back(int32_t(values.size()));
  }
  file.tensors.push_back(StoredTensor::f32(name + ".values", {kept}, values));
  if (indexBytes == 2) {
    std::vector<int16_t> narrow(columns.begin(), columns.end());
    file.tensors.push_back(raw(name + ".columns", "I16", {kept}, narrow.data(),
                               narrow.size() * 2));
  } else {
    file.tensors.push_back(
        StoredTensor::i32(name + ".columns", {kept}, columns));
  }
  file.tensors.push_back(
      StoredTensor::i32(name + ".row_offsets", {rows + 1}, offsets));
  return done("CSR over dim 0, shape " + shapeText(shape),
              "CSR (" +
                  std::to_string(100 * (n - kept) / std::max<int64_t>(n, 1)) +
                  "% pruned)");
}

} // namespace

bool runtime::compressParameter(const nlohmann::json &train,
                                const ParameterData &p, SafetensorsFile &file,
                                std::string &line, std::string &error) {
  ParameterExport out(p, file, line, error);
  bool f32 = p.dtype == "f32";
  const nlohmann::json *quantize = directiveFor(train, "quantize", p.name);
  std::string kind = quantize ? text(*quantize, "kind") : "";
  if (f32 && ((kind == "qat" && p.observedMin && p.observedMax) ||
              kind == "int8" || kind == "int4"))
    return out.quantized(*quantize);
  if (f32 && p.mask && p.shape.size() >= 2 &&
      (out.twoFour(directiveFor(train, "prune", p.name)) || out.keptRows() ||
       out.csr()))
    return true;
  std::string stored = f32 ? "F32" : p.dtype == "bf16" ? "BF16" : "F16";
  file.tensors.push_back(
      raw(p.name, stored, p.shape, p.data, size_t(out.denseBytes)));
  line.clear();
  return true;
}

bool runtime::exportWeights(const std::string &path, const ModelInfo &model,
                            const StepMemory &memory, ExportSummary &summary,
                            std::string &error) {
  nlohmann::json train = nlohmann::json::parse(model.train, nullptr, false);
  const StepInfo &step = model.trainStep;
  std::map<std::string, Argument> byName;
  for (int i = 0; i < step.numArguments; ++i) {
    const ArgumentInfo &a = step.arguments[i];
    const uint8_t *base = a.region == MemoryRegion::Parameters ||
                                  a.region == MemoryRegion::OptimizerState ||
                                  a.region == MemoryRegion::Buffers
                              ? memory.base(a.region)
                              : nullptr;
    if (base)
      byName[a.name] = {&a, base + a.offset};
  }
  SafetensorsFile file;
  file.metadata["format"] = "mnemo-export-1";
  file.metadata["model"] = model.name;
  for (int i = 0; i < step.numArguments; ++i) {
    const ArgumentInfo &a = step.arguments[i];
    if (a.role != ArgumentRole::Param)
      continue;
    ParameterData p;
    p.name = a.name;
    p.dtype = a.dtype;
    p.shape.assign(a.shape, a.shape + a.rank);
    p.data = byName[p.name].data;
    auto mask = byName.find(p.name + ".mask");
    auto lo = byName.find(p.name + ".observer.min"),
         hi = byName.find(p.name + ".observer.max");
    if (mask != byName.end())
      p.mask = mask->second.data;
    if (lo != byName.end() && hi != byName.end()) {
      p.observedMin = lo->second.data;
      p.observedMax = hi->second.data;
      p.observedChannels = lo->second.count();
    }
    size_t before = file.tensors.size();
    std::string line;
    if (!compressParameter(train, p, file, line, error))
      return false;
    if (!line.empty())
      summary.lines.push_back(line);
    summary.denseBytes += byName[p.name].count() * (p.dtype == "f32" ? 4 : 2);
    for (size_t t = before; t < file.tensors.size(); ++t)
      summary.exportedBytes += int64_t(file.tensors[t].bytes.size());
  }
  // The model's buffers as they are (running statistics); quantization
  // observers went into their weights' scales above.
  for (int i = 0; i < step.numArguments; ++i) {
    const ArgumentInfo &a = step.arguments[i];
    std::string name = a.name;
    if (a.role != ArgumentRole::Buffer ||
        name.find(".observer.") != std::string::npos)
      continue;
    file.tensors.push_back(storedArgument(a, memory));
    summary.denseBytes += int64_t(file.tensors.back().bytes.size());
    summary.exportedBytes += int64_t(file.tensors.back().bytes.size());
  }
  return writeSafetensors(path, file, error);
}
