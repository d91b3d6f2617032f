//===- Npy.cpp - NumPy's .npy files ---------------------------------------===//

#include "runtime/Npy.h"
#include "runtime/Failure.h"

#include <cstring>
#include <fstream>
#include <limits>

namespace mnemo::runtime {

namespace {

/// The safetensors dtype of a NumPy type string, or "" if not taken. '|'
/// is a one-byte type's (no byte order), '<' little-endian, '=' native
/// (little-endian on x86-64).
std::string dtypeOf(const std::string &descr) {
  if (descr.size() < 3)
    return "";
  char order = descr[0];
  std::string kind = descr.substr(1);
  if (order == '>' || (order != '<' && order != '|' && order != '='))
    return "";
  if (kind == "f4")
    return "F32";
  if (kind == "f8")
    return "F64";
  if (kind == "f2")
    return "F16";
  if (kind == "i4")
    return "I32";
  if (kind == "i8")
    return "I64";
  if (kind == "i2")
    return "I16";
  if (kind == "u2")
    return "U16";
  if (kind == "i1")
    return "I8";
  if (kind == "u1")
    return "U8";
  if (kind == "b1")
    return "BOOL";
  return "";
}

/// The value of `key` in the header dict: from after "'key':" to the next
/// top-level ',' or '}'.
bool field(const std::string &header, const std::string &key,
           std::string &value) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    return false;
  at = header.find(':', at);
  if (at == std::string::npos)
    return false;
  size_t end = at + 1;
  int depth = 0;
  for (; end < header.size(); ++end) {
    char c = header[end];
    if (c == '(')
      ++depth;
    else if (c == ')')
      --depth;
    else if (depth == 0 && (c == ',' || c == '}'))
      break;
  }
  value = header.substr(at + 1, end - at - 1);
  size_t first = value.find_first_not_of(" '\"");
  size_t last = value.find_last_not_of(" '\"");
  value =
      first == std::string::npos ? "" : value.substr(first, last - first + 1);
  return true;
}

} // namespace

bool readNpy(const std::string &path, const std::string &name,
             StoredTensor &tensor, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return failWith(error,
                    "cannot open '" + path + "': " + std::strerror(errno));
  auto bad = [&](const std::string &why) {
    error = "'" + path + "' is not an array this trainer reads: " + why;
    return false;
  };
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    return bad("no .npy header (numpy.save writes one)");
  uint32_t headerBytes = 0;
  if (magic[6] == 1) {
    uint8_t size[2];
    if (!in.read(reinterpret_cast<char *>(size), 2))
      return bad("truncated header");
    headerBytes = size[0] | uint32_t(size[1]) << 8;
  } else if (magic[6] == 2 || magic[6] == 3) {
    uint8_t size[4];
    if (!in.read(reinterpret_cast<char *>(size), 4))
      return bad("truncated header");
    headerBytes = size[0] | uint32_t(size[1]) << 8 | uint32_t(size[2]) << 16 |
                  uint32_t(size[3]) << 24;
  } else {
    return bad("format version " + std::to_string(int(magic[6])));
  }
  if (headerBytes > (1u << 20))
    return bad("a header of " + std::to_string(headerBytes) + " bytes");
  std::string header(headerBytes, '\0');
  if (!in.read(header.data(), headerBytes))
    return bad("truncated header");
  std::string descr, fortran, shapeText;
  if (!field(header, "descr", descr) ||
      !field(header, "fortran_order", fortran) ||
      !field(header, "shape", shapeText))
    return bad("a header without descr, fortran_order and shape");
  tensor.name = name;
  tensor.dtype = dtypeOf(descr);
  if (tensor.dtype.empty())
    return bad("element type '" + descr +
               "' (little-endian numbers, bytes and booleans only)");
  if (fortran != "False")
    return bad("Fortran order (save a C-ordered array: "
               "numpy.ascontiguousarray)");
  tensor.shape.clear();
  int64_t count = 1;
  size_t at = shapeText.find('(');
  if (at == std::string::npos)
    return bad("shape '" + shapeText + "'");
  for (++at; at < shapeText.size();) {
    size_t end = shapeText.find_first_of(",)", at);
    std::string dim = shapeText.substr(at, end - at);
    size_t first = dim.find_first_not_of(' ');
    if (first != std::string::npos) {
      char *stop = nullptr;
      long long d = std::strtoll(dim.c_str() + first, &stop, 10);
      if (d < 0 || (stop && *stop && *stop != ' ') ||
          (d > 0 && count > std::numeric_limits<int64_t>::max() / 64 / d))
        return bad("shape '" + shapeText + "'");
      tensor.shape.push_back(d);
      count *= d;
    }
    if (end == std::string::npos || shapeText[end] == ')')
      break;
    at = end + 1;
  }
  int64_t bytes = count * dtypeSize(tensor.dtype);
  tensor.bytes.resize(size_t(bytes));
  if (bytes && !in.read(reinterpret_cast<char *>(tensor.bytes.data()), bytes))
    return bad("it holds fewer than the " + std::to_string(count) +
               " elements its shape says");
  if (in.peek() != std::char_traits<char>::eof())
    return bad("bytes after the " + std::to_string(count) +
               " elements its shape says");
  return true;
}

} // namespace mnemo::runtime
