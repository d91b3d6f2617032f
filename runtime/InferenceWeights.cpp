//===- InferenceWeights.cpp - Loading an inference plan's weights ---------===//

#include "runtime/InferenceWeights.h"

#include "lang/ops/pruning/PruningKernels.h"
#include "runtime/Checkpoint.h"
#include "runtime/Export.h"
#include "runtime/Failure.h"
#include "runtime/Safetensors.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <map>
#include <set>

using namespace mnemo;
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
      int32_t x32 = 0;
      int16_t x16 = 0;
      if (width == 4)
        std::memcpy(&x32, &t.bytes[i], 4);
      else
        std::memcpy(&x16, &t.bytes[i], 2);
      v.push_back(width == 4 ? x32 : x16);
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

/// The masks a prune directive gives the dense weights of `file` it names,
/// at its final sparsity (lang/ops/pruning/PruningKernels.h, as training's last
/// update): weights already pruned by training keep exactly their zeros.
bool directiveMasks(const nlohmann::json &d, const SafetensorsFile &file,
                    std::map<std::string, std::vector<uint32_t>> &masks,
                    std::string &error) {
  auto number = [&](const char *key, double fallback) {
    return d.contains(key) && d[key].is_number() ? d[key].get<double>()
                                                 : fallback;
  };
  auto text = [&](const char *key, const char *fallback) {
    return d.contains(key) && d[key].is_string() ? d[key].get<std::string>()
                                                 : std::string(fallback);
  };
  std::vector<prune::Target> targets;
  std::vector<std::string> names;
  for (const nlohmann::json &p : d["params"]) {
    std::string name = p.get<std::string>();
    const StoredTensor *t = file.find(name);
    if (!t || t->dtype != "F32")
      return true; // not dense in the file: nothing to prune on load
    std::vector<uint32_t> &mask = masks[name];
    int64_t count = int64_t(t->bytes.size() / 4);
    mask.assign(size_t(prune::maskWords(count)), 0u);
    names.push_back(name);
    targets.push_back({reinterpret_cast<const float *>(t->bytes.data()),
                       mask.data(), t->shape.data(), int(t->shape.size())});
  }
  std::string kind = text("kind", "magnitude");
  double sparsity = number("sparsity", 0);
  if (kind == "magnitude" && text("scope", "layer") == "global") {
    prune::magnitudeMasks(targets.data(), int(targets.size()), sparsity);
    return true;
  }
  for (prune::Target &target : targets) {
    if (kind == "magnitude")
      prune::magnitudeMasks(&target, 1, sparsity);
    else if (kind == "structured")
      prune::structuredMasks(target, sparsity, int64_t(number("dim", 0)),
                             text("norm", "l2") == "l1");
    else if (kind == "nm")
      prune::nmMasks(target, int(number("n", 2)), int(number("m", 4)));
    else {
      error = "unknown prune method '" + kind + "'";
      return false;
    }
  }
  return true;
}

/// Post-training compression on load: each weight the plan reads compressed
/// but `file` holds dense (a checkpoint, or an export made without the
/// directive) is compressed here by `train --export`'s rules
/// (runtime/Export.h), pruned to its directive's final sparsity first; a
/// pruned weight the plan reads dense gets its directive's zeros.
bool compressOnLoad(const ModelInfo &model, SafetensorsFile &file,
                    std::vector<std::string> &lines, std::string &error) {
  nlohmann::json train = nlohmann::json::parse(model.train, nullptr, false);
  const StepInfo &step = model.evalStep;
  std::map<std::string, std::vector<uint32_t>> masks;
  std::set<const nlohmann::json *> masked;
  std::set<std::string> done;
  for (int i = 0; i < step.numArguments; ++i) {
    const ArgumentInfo &a = step.arguments[i];
    if (a.role != ArgumentRole::Param)
      continue;
    std::string name = a.name, owner = ownerOf(name);
    const StoredTensor *t = file.find(name), *dense = file.find(owner);
    const nlohmann::json *prune = directiveFor(train, "prune", owner);
    const nlohmann::json *quantize = directiveFor(train, "quantize", owner);
    if (!dense || dense->dtype != "F32" || (!prune && !quantize) ||
        !done.insert(owner).second)
      continue;
    if (prune && masked.insert(prune).second &&
        !directiveMasks(*prune, file, masks, error))
      return false;
    auto mask = masks.find(owner);
    bool compressedInFile =
        file.find(owner + ".scale") || file.find(owner + ".indices") ||
        file.find(owner + ".values") || file.find(owner + ".rows");
    if (compressedInFile)
      continue;
    // Read dense: the directive's zeros, nothing else.
    int64_t count = a.elements();
    if (t && t->dtype == "F32" && std::string(a.dtype) == "f32" &&
        owner == name && int64_t(t->bytes.size()) == 4 * count) {
      if (mask == masks.end())
        continue;
      int64_t zeroed = 0;
      for (StoredTensor &w : file.tensors)
        if (w.name == owner) {
          float *values = reinterpret_cast<float *>(w.bytes.data());
          for (int64_t e = 0; e < count; ++e)
            if (prune::bitOf(mask->second.data(), e)) {
              zeroed += values[e] != 0.0f;
              values[e] = 0.0f;
            }
        }
      if (zeroed)
        lines.push_back(owner + "  " + std::to_string(zeroed) + " of " +
                        std::to_string(count) +
                        " elements pruned (the plan reads it dense)");
      continue;
    }
    ParameterData p;
    p.name = owner;
    p.dtype = "f32";
    p.shape = dense->shape;
    p.data = dense->bytes.data();
    if (mask != masks.end())
      p.mask = reinterpret_cast<const uint8_t *>(mask->second.data());
    const StoredTensor *lo = file.find(owner + ".observer.min"),
                       *hi = file.find(owner + ".observer.max");
    if (lo && hi && lo->dtype == "F32" &&
        hi->bytes.size() == lo->bytes.size()) {
      p.observedMin = lo->bytes.data();
      p.observedMax = hi->bytes.data();
      p.observedChannels = int64_t(lo->bytes.size() / 4);
    }
    SafetensorsFile compressed;
    std::string line;
    if (!compressParameter(train, p, compressed, line, error))
      return false;
    if (line.empty())
      continue; // stays dense; the checked copy below says what is missing
    std::vector<StoredTensor> kept;
    for (StoredTensor &old : file.tensors)
      if (old.name != owner)
        kept.push_back(std::move(old));
    for (StoredTensor &fresh : compressed.tensors)
      kept.push_back(std::move(fresh));
    file.tensors = std::move(kept);
    for (const auto &[key, value] : compressed.metadata)
      file.metadata[key] = value + " (compressed on load)";
    lines.push_back(line);
  }
  return true;
}

} // namespace

bool mnemo::runtime::loadInferenceWeights(const std::string &path,
                                          const ModelInfo &model,
                                          const StepMemory &memory,
                                          LoadedWeights &loaded,
                                          std::string &error) {
  SafetensorsFile file;
  if (!readSafetensors(path, file, error))
    return false;
  if (!compressOnLoad(model, file, loaded.compressedOnLoad, error))
    return failWith(error, path + ": " + error);
  const StepInfo &step = model.evalStep;
  std::set<std::string> owners;
  for (int i = 0; i < step.numArguments; ++i) {
    const ArgumentInfo &a = step.arguments[i];
    // Parameters, and buffers (BatchNorm's running statistics).
    if (a.role != ArgumentRole::Param && a.role != ArgumentRole::Buffer)
      continue;
    std::string name = a.name;
    uint8_t *const at = memory.base(a.region) + a.offset;
    int64_t count = a.elements();
    int64_t width =
        std::string(a.dtype) == "f32" || std::string(a.dtype) == "i32" ? 4
        : std::string(a.dtype) == "i8"                                 ? 1
                                                                       : 2;
    int64_t bytes = count * width;
    const StoredTensor *t = file.find(name);
    std::string owner = ownerOf(name);
    // Read dense, exported compressed: unpacked here.
    if (std::string(a.dtype) == "f32" && a.rank >= 2 &&
        (!t || t->dtype != "F32" || int64_t(t->bytes.size()) != bytes)) {
      std::vector<float> dense;
      std::string why;
      if (decompress(file, name, count, a.shape[0], dense, why)) {
        std::memcpy(at, dense.data(), size_t(bytes));
        if (owners.insert(owner).second)
          loaded.layouts.push_back(name + "  unpacked to dense f32 (this "
                                          "plan reads it dense)");
        continue;
      }
      if (!why.empty())
        return failWith(error, path + ": " + why);
    }
    if (!t) {
      const StoredTensor *dense = file.find(owner);
      error = path + " has no tensor '" + name + "' (" + a.typeText() + ")";
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
              ", and the plan reads " + a.typeText();
      if (t->dtype == "F32")
        error += ": write the weights with `train --export FILE`, which "
                 "compresses them as the model's quantize and prune "
                 "directives say";
      return false;
    }
    // CSR values and columns: at most the capacity the prune directive's
    // final sparsity leaves; the rest of the plan's buffer stays zero.
    bool csr = endsWith(name, ".values") || endsWith(name, ".columns");
    // Every other tensor has the plan's shape: the same number of
    // elements in another shape (a transposed weight) is another weight.
    std::vector<int64_t> shape(a.shape, a.shape + a.rank);
    if (!csr && t->shape != shape) {
      error = path + ": '" + name + "' is " + t->dtype + shapeText(t->shape) +
              ", and the plan reads " + a.typeText();
      return false;
    }
    if (!checkValues(*t, error))
      return failWith(error, path + ": " + error);
    int64_t stored = int64_t(t->bytes.size());
    if (stored != bytes && !(csr && stored < bytes && stored % width == 0)) {
      error = path + ": '" + name + "' holds " +
              std::to_string(stored / width) + " elements, and the plan's " +
              a.typeText() + " holds " + std::to_string(count);
      if (csr)
        error += " (the final sparsity of its prune directive keeps at "
                 "most " +
                 std::to_string(count) +
                 " nonzeros: was training stopped before the directive's "
                 "end step?)";
      return false;
    }
    std::memcpy(at, t->bytes.data(), size_t(stored));
    std::memset(at + stored, 0, size_t(bytes - stored));
    if (owners.insert(owner).second) {
      auto layout = file.metadata.find(owner);
      if (layout != file.metadata.end())
        loaded.layouts.push_back(owner + "  " + layout->second);
    }
  }
  return true;
}
