//===- Safetensors.cpp - Reading and writing .safetensors files -----------===//

#include "runtime/Safetensors.h"
#include "runtime/Failure.h"
#include "runtime/OutputFiles.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>

using namespace mnemo::runtime;
using json = nlohmann::json;

int64_t mnemo::runtime::dtypeSize(const std::string &dtype) {
  static const std::map<std::string, int64_t> sizes = {
      {"F64", 8}, {"I64", 8}, {"F32", 4}, {"I32", 4}, {"F16", 2}, {"BF16", 2},
      {"I16", 2}, {"U16", 2}, {"I8", 1},  {"U8", 1},  {"BOOL", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

std::string mnemo::runtime::shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? "," : "") + std::to_string(shape[d]);
  return text + "]";
}

StoredTensor StoredTensor::f32(std::string name, std::vector<int64_t> shape,
                               const std::vector<float> &values) {
  StoredTensor t{std::move(name), "F32", std::move(shape), {}};
  t.bytes.resize(values.size() * 4);
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

StoredTensor StoredTensor::f64(std::string name, std::vector<int64_t> shape,
                               const std::vector<double> &values) {
  StoredTensor t{std::move(name), "F64", std::move(shape), {}};
  t.bytes.resize(values.size() * 8);
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

StoredTensor StoredTensor::i32(std::string name, std::vector<int64_t> shape,
                               const std::vector<int32_t> &values) {
  StoredTensor t{std::move(name), "I32", std::move(shape), {}};
  t.bytes.resize(values.size() * 4);
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

const StoredTensor *SafetensorsFile::find(const std::string &name) const {
  for (const StoredTensor &t : tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

bool mnemo::runtime::writeSafetensors(const std::string &path,
                                      const SafetensorsFile &file,
                                      std::string &error) {
  json header = json::object();
  if (!file.metadata.empty())
    header["__metadata__"] = file.metadata;
  uint64_t offset = 0;
  for (const StoredTensor &t : file.tensors) {
    int64_t count = 1;
    for (int64_t d : t.shape)
      count *= d;
    if (uint64_t(count * dtypeSize(t.dtype)) != t.bytes.size())
      return failWith(error,
                      "tensor '" + t.name + "' has " +
                          std::to_string(t.bytes.size()) +
                          " bytes, which does not match its shape and dtype");
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  // Pad the header with spaces to a multiple of 8 bytes, as the reference
  // implementation does, so the data is aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t headerSize = text.size();
  uint8_t sizeBytes[8];
  for (int i = 0; i < 8; ++i)
    sizeBytes[i] = uint8_t(headerSize >> (8 * i));

  // Messages name the target, the file the user asked for, not the
  // temporary the write goes through.
  std::vector<Bytes> pieces = {{sizeBytes, 8}, {text.data(), text.size()}};
  for (const StoredTensor &t : file.tensors)
    pieces.push_back({t.bytes.data(), t.bytes.size()});
  return writeAtomically(path, pieces, error);
}

namespace {

/// The header's JSON; `repeated` names a key an object repeats. JSON leaves
/// a repeated key's meaning open (nlohmann keeps the last); safetensors' own
/// reader refuses one, and so does this one, at any depth.
json parseHeader(const std::string &text, std::string &repeated) {
  std::vector<std::set<std::string>> keys;
  json::parser_callback_t noRepeats = [&](int, json::parse_event_t event,
                                          json &parsed) {
    if (event == json::parse_event_t::object_start)
      keys.emplace_back();
    else if (event == json::parse_event_t::object_end && !keys.empty())
      keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.empty() &&
             parsed.is_string() &&
             !keys.back().insert(parsed.get<std::string>()).second &&
             repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  return json::parse(text, noRepeats, /*allow_exceptions=*/false);
}

/// A tensor's bytes in the data.
struct Extent {
  uint64_t begin, end;
  std::string name;
  bool operator<(const Extent &o) const {
    return begin != o.begin ? begin < o.begin : end < o.end;
  }
};

/// Why the tensors do not tile the data exactly, or "": safetensors' reader
/// requires that no two share bytes and no byte belongs to none (a file
/// whose offsets overlap or leave gaps was not written by a safetensors
/// writer).
std::string tilingProblem(std::vector<Extent> extents, uint64_t dataSize) {
  std::sort(extents.begin(), extents.end());
  uint64_t covered = 0;
  for (const Extent &e : extents) {
    if (e.begin < covered)
      return "tensor '" + e.name + "' overlaps another's data (bytes " +
             std::to_string(e.begin) + " to " + std::to_string(e.end) + ")";
    if (e.begin > covered)
      return "bytes " + std::to_string(covered) + " to " +
             std::to_string(e.begin) + " of its data belong to no tensor";
    covered = e.end;
  }
  if (covered != dataSize)
    return "its last " + std::to_string(dataSize - covered) +
           " bytes belong to no tensor";
  return "";
}

} // namespace

bool mnemo::runtime::readSafetensors(const std::string &path,
                                     SafetensorsFile &file,
                                     std::string &error) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return failWith(error, "'" + path + "' is " +
                               (S_ISDIR(st.st_mode) ? "a directory"
                                                    : "not a regular file") +
                               ", not a safetensors file");
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return failWith(error,
                    "cannot open '" + path + "': " + std::strerror(errno));
  auto fail = [&](const std::string &why) {
    error = "'" + path + "' is not a valid safetensors file: " + why;
    std::fclose(f);
    return false;
  };
  std::fseek(f, 0, SEEK_END);
  long fileSize = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  uint8_t sizeBytes[8];
  if (fileSize < 8 || std::fread(sizeBytes, 1, 8, f) != 8)
    return fail("it is shorter than its 8-byte header size");
  uint64_t headerSize = 0;
  for (int i = 0; i < 8; ++i)
    headerSize |= uint64_t(sizeBytes[i]) << (8 * i);
  if (headerSize > uint64_t(fileSize) - 8 || headerSize > (100u << 20))
    return fail("the header size " + std::to_string(headerSize) +
                " exceeds the file");
  std::string text(headerSize, '\0');
  if (std::fread(text.data(), 1, headerSize, f) != headerSize)
    return fail("the header is truncated");
  std::string repeated;
  json header = parseHeader(text, repeated);
  if (header.is_discarded() || !header.is_object())
    return fail("the header is not a JSON object");
  if (!repeated.empty())
    return fail("the header names '" + repeated + "' twice");
  uint64_t dataSize = uint64_t(fileSize) - 8 - headerSize;
  file = SafetensorsFile();
  std::vector<Extent> extents;
  for (auto &[name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        return fail("__metadata__ is not an object");
      for (auto &[key, value] : entry.items())
        if (value.is_string())
          file.metadata[key] = value.get<std::string>();
      continue;
    }
    if (!entry.is_object() || !entry.contains("dtype") ||
        !entry["dtype"].is_string() || !entry.contains("shape") ||
        !entry["shape"].is_array() || !entry.contains("data_offsets") ||
        !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2)
      return fail("the entry for '" + name +
                  "' lacks dtype, shape or data_offsets");
    StoredTensor t;
    t.name = name;
    t.dtype = entry["dtype"].get<std::string>();
    if (dtypeSize(t.dtype) == 0)
      return fail("tensor '" + name + "' has the unknown dtype " + t.dtype);
    uint64_t count = 1;
    for (const json &d : entry["shape"]) {
      if (!d.is_number_unsigned())
        return fail("tensor '" + name + "' has a bad shape");
      t.shape.push_back(d.get<int64_t>());
      if (d.get<uint64_t>() != 0 &&
          count > (uint64_t(1) << 48) / d.get<uint64_t>())
        return fail("tensor '" + name + "' is too large");
      count *= d.get<uint64_t>();
    }
    const json &offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      return fail("tensor '" + name + "' has bad data offsets");
    uint64_t begin = offsets[0].get<uint64_t>(),
             end = offsets[1].get<uint64_t>();
    if (begin > end || end > dataSize ||
        end - begin != count * uint64_t(dtypeSize(t.dtype)))
      return fail("tensor '" + name +
                  "' has data offsets outside the file or not matching "
                  "its shape");
    t.bytes.resize(end - begin);
    if (std::fseek(f, long(8 + headerSize + begin), SEEK_SET) != 0 ||
        std::fread(t.bytes.data(), 1, t.bytes.size(), f) != t.bytes.size())
      return fail("tensor '" + name + "' is truncated");
    extents.push_back({begin, end, name});
    file.tensors.push_back(std::move(t));
  }
  std::string why = tilingProblem(extents, dataSize);
  if (!why.empty())
    return fail(why);
  std::fclose(f);
  return true;
}
