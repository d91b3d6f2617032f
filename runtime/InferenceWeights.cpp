//===- InferenceWeights.cpp - Loading an inference plan's weights ---------===//

#include "runtime/InferenceWeights.h"

#include "runtime/Safetensors.h"

#include <cstring>
#include <set>

using namespace mnemo::runtime;

namespace {

/// The safetensors dtypes whose bytes are the plan's element type (int4
/// codes and 2:4 positions are exported as U8 bytes, read as i8).
bool storesAs(const std::string &stored, const std::string &dtype) {
  return (dtype == "f32" && stored == "F32") ||
         (dtype == "bf16" && stored == "BF16") ||
         (dtype == "f16" && stored == "F16") ||
         (dtype == "i32" && stored == "I32") ||
         (dtype == "i16" && stored == "I16") ||
         (dtype == "i8" && (stored == "I8" || stored == "U8"));
}

bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::string shapeText(const ArgumentInfo &a) {
  std::string text = a.dtype;
  text += "[";
  for (int d = 0; d < a.rank; ++d)
    text += (d ? "," : "") + std::to_string(a.shape[d]);
  return text + "]";
}

/// The parameter a compressed tensor belongs to: "fc1.weight.scale" ->
/// "fc1.weight".
std::string ownerOf(const std::string &name) {
  for (const char *suffix : {".scale", ".zero_point", ".indices", ".values",
                             ".columns", ".row_offsets"})
    if (endsWith(name, suffix))
      return name.substr(0, name.size() - std::strlen(suffix));
  return name;
}

/// A weight the plan reads dense (f32) that the export compressed (a 2:4
/// convolution, structured pruning's kept rows, CSR the plan could not
/// size): its dense values, or false when the file holds no such layout.
bool decompress(const SafetensorsFile &file, const std::string &name,
                int64_t count, int64_t rows, std::vector<float> &dense,
                std::string &error) {
  dense.assign(size_t(count), 0.0f);
  int64_t k = count / std::max<int64_t>(rows, 1);
  auto floats = [](const StoredTensor &t) {
    std::vector<float> v(t.bytes.size() / 4);
    std::memcpy(v.data(), t.bytes.data(), v.size() * 4);
    return v;
  };
  auto integers = [](const StoredTensor &t) {
    std::vector<int64_t> v;
    int64_t width = dtypeSize(t.dtype);
    for (size_t i = 0; i + width <= t.bytes.size(); i += width) {
      int32_t x32;
      int16_t x16;
      if (width == 4)
        std::memcpy(&x32, &t.bytes[i], 4), v.push_back(x32);
      else
        std::memcpy(&x16, &t.bytes[i], 2), v.push_back(x16);
    }
    return v;
  };
  const StoredTensor *packed = file.find(name),
                     *indices = file.find(name + ".indices"),
                     *keptRows = file.find(name + ".rows"),
                     *values = file.find(name + ".values"),
                     *columns = file.find(name + ".columns"),
                     *offsets = file.find(name + ".row_offsets");
  auto bad = [&](const char *layout) {
    error = "'" + name + "' is " + layout +
            " in the file, and its sizes do not fit the plan's weight";
    return false;
  };
  if (packed && indices && packed->dtype == "F32") {
    std::vector<float> v = floats(*packed);
    if (int64_t(v.size()) != count / 2 ||
        int64_t(indices->bytes.size()) != count / 8 || k % 8)
      return bad("2:4-packed");
    for (int64_t g = 0; g < count / 4; ++g) {
      int positions = indices->bytes[size_t(g / 2)] >> (4 * (g % 2));
      for (int kept = 0; kept < 2; ++kept)
        dense[size_t(4 * g + ((positions >> (2 * kept)) & 3))] =
            v[size_t(2 * g + kept)];
    }
    return true;
  }
  if (packed && keptRows && packed->dtype == "F32") {
    std::vector<float> v = floats(*packed);
    std::vector<int64_t> r = integers(*keptRows);
    if (int64_t(v.size()) != int64_t(r.size()) * k)
      return bad("rows kept");
    for (size_t i = 0; i < r.size(); ++i) {
      if (r[i] < 0 || r[i] >= rows)
        return bad("rows kept");
      std::memcpy(&dense[size_t(r[i] * k)], &v[i * size_t(k)], size_t(k) * 4);
    }
    return true;
  }
  if (values && columns && offsets) {
    std::vector<float> v = floats(*values);
    std::vector<int64_t> c = integers(*columns), o = integers(*offsets);
    if (int64_t(o.size()) != rows + 1 || c.size() != v.size())
      return bad("CSR");
    for (int64_t j = 0; j < rows; ++j) {
      if (o[j] < 0 || o[j] > o[j + 1] || o[j + 1] > int64_t(v.size()))
        return bad("CSR");
      for (int64_t e = o[j]; e < o[j + 1]; ++e) {
        if (c[e] < 0 || c[e] >= k)
          return bad("CSR");
        dense[size_t(j * k + c[e])] = v[size_t(e)];
      }
    }
    return true;
  }
  return false;
}

} // namespace

bool mnemo::runtime::loadInferenceWeights(const std::string &path,
                                          const StepInfo &step,
                                          uint8_t *parameters,
                                          LoadedWeights &loaded,
                                          std::string &error) {
  SafetensorsFile file;
  if (!readSafetensors(path, file, error))
    return false;
  std::set<std::string> owners;
  for (int i = 0; i < step.numArguments; ++i) {
    const ArgumentInfo &a = step.arguments[i];
    if (std::string(a.role) != "param")
      continue;
    std::string name = a.name;
    int64_t count = 1;
    for (int d = 0; d < a.rank; ++d)
      count *= a.shape[d];
    int64_t width =
        std::string(a.dtype) == "f32" || std::string(a.dtype) == "i32" ? 4
        : std::string(a.dtype) == "i8"                                 ? 1
                                                                       : 2;
    int64_t bytes = count * width;
    loaded.planBytes += bytes;
    const StoredTensor *t = file.find(name);
    std::string owner = ownerOf(name);
    // Read dense, exported compressed: unpacked here.
    if (std::string(a.dtype) == "f32" && a.rank >= 2 &&
        (!t || t->dtype != "F32" || int64_t(t->bytes.size()) != bytes)) {
      std::vector<float> dense;
      std::string why;
      if (decompress(file, name, count, a.shape[0], dense, why)) {
        std::memcpy(parameters + a.offset, dense.data(), size_t(bytes));
        if (owners.insert(owner).second)
          loaded.layouts.push_back(name + "  unpacked to dense f32 (this "
                                          "plan reads it dense)");
        continue;
      }
      if (!why.empty()) {
        error = path + ": " + why;
        return false;
      }
    }
    if (!t) {
      const StoredTensor *dense = file.find(owner);
      error = path + " has no tensor '" + name + "' (" + shapeText(a) + ")";
      if (dense && dense->dtype == "F32" && owner != name)
        error += ": it holds '" + owner +
                 "' uncompressed, and this plan reads it compressed as the "
                 "model's quantize and prune directives say; write the "
                 "weights with `train --export FILE` after training to the "
                 "directive's end step";
      else if (owner == name && file.find(name + ".values"))
        error += ": it holds '" + name +
                 "' in CSR, which this plan does not read it as";
      return false;
    }
    if (!storesAs(t->dtype, a.dtype)) {
      error = path + ": '" + name + "' is " + t->dtype +
              ", and the plan reads " + shapeText(a);
      if (t->dtype == "F32")
        error += ": write the weights with `train --export FILE`, which "
                 "compresses them as the model's quantize and prune "
                 "directives say";
      return false;
    }
    // CSR values and columns: at most the capacity the prune directive's
    // final sparsity leaves; the rest of the plan's buffer stays zero.
    bool csr = endsWith(name, ".values") || endsWith(name, ".columns");
    int64_t stored = int64_t(t->bytes.size());
    if (stored != bytes && !(csr && stored < bytes && stored % width == 0)) {
      error = path + ": '" + name + "' holds " +
              std::to_string(stored / width) + " elements, and the plan's " +
              shapeText(a) + " holds " + std::to_string(count);
      if (csr)
        error += " (the final sparsity of its prune directive keeps at "
                 "most " +
                 std::to_string(count) +
                 " nonzeros: was training stopped before the directive's "
                 "end step?)";
      return false;
    }
    std::memcpy(parameters + a.offset, t->bytes.data(), size_t(stored));
    std::memset(parameters + a.offset + stored, 0, size_t(bytes - stored));
    if (owners.insert(owner).second) {
      auto layout = file.metadata.find(owner);
      if (layout != file.metadata.end())
        loaded.layouts.push_back(owner + "  " + layout->second);
    }
  }
  return true;
}
