//===- Idx.cpp - IDX files (MNIST, Fashion-MNIST) -------------------------===//

#include "runtime/Idx.h"
#include "runtime/Failure.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

// MNEMO_HAVE_ZLIB is 0 in a trainer built where zlib's headers are not (a
// GPU machine with the CUDA toolkit alone): IDX files are read as they
// are, and a gzip-compressed one is refused by name.
#ifndef MNEMO_HAVE_ZLIB
#define MNEMO_HAVE_ZLIB 1
#endif
#if MNEMO_HAVE_ZLIB
#include <zlib.h>
#else
namespace {
using gzFile = std::FILE *;
constexpr int Z_OK = 0, Z_STREAM_END = 1;
gzFile gzopen(const char *path, const char *mode) {
  return std::fopen(path, mode);
}
int gzread(gzFile f, void *buffer, unsigned bytes) {
  size_t got = std::fread(buffer, 1, bytes, f);
  return std::ferror(f) ? -1 : int(got);
}
const char *gzerror(gzFile f, int *code) {
  *code = std::ferror(f) ? -1 : Z_OK;
  return std::strerror(errno ? errno : EIO);
}
int gzclose(gzFile f) { return std::fclose(f); }
} // namespace
#endif

using namespace mnemo::runtime;

bool mnemo::runtime::readIdx(const std::string &path, IdxArray &array,
                             std::string &error, int64_t maxItems,
                             int expectedRank) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return failWith(error, "'" + path + "' is " +
                               (S_ISDIR(st.st_mode) ? "a directory"
                                                    : "not a regular file") +
                               ", not an IDX file");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) {
    error =
        "cannot open '" + path + "': " + std::strerror(errno ? errno : ENOENT);
    return false;
  }
  auto fail = [&](const std::string &why) {
    error = "'" + path + "' is not a valid IDX file: " + why;
    gzclose(f);
    return false;
  };
  // zlib reads a file that is not gzip as it is; a gzip stream that is
  // damaged is an error of its own, not a short file.
  auto damaged = [&]() {
    int code = 0;
    const char *why = gzerror(f, &code);
    return code != Z_OK && code != Z_STREAM_END
               ? fail(std::string("its gzip data is damaged (") + why + ")")
               : false;
  };
  uint8_t magic[4];
  int got = gzread(f, magic, 4);
  if (got < 0)
    return damaged();
  if (got != 4)
    return fail("it is shorter than its 4-byte magic number");
  if (!MNEMO_HAVE_ZLIB && magic[0] == 0x1f && magic[1] == 0x8b) {
    error = "'" + path +
            "' is gzip-compressed, and this trainer was built without zlib "
            "(zlib1g-dev was not found when it was built): gunzip it first";
    gzclose(f);
    return false;
  }
  if (magic[0] != 0 || magic[1] != 0)
    return fail("the magic number does not start with two zero bytes");
  if (magic[2] != 0x08)
    return fail("only unsigned-byte data (type 0x08) is supported");
  int rank = magic[3];
  if (rank < 1 || rank > 4)
    return fail("the rank " + std::to_string(rank) + " is not between 1 and 4");
  if (expectedRank > 0 && rank != expectedRank)
    return fail("its magic number says rank " + std::to_string(rank) + " (" +
                (rank == 3   ? "images"
                 : rank == 1 ? "labels"
                             : "other data") +
                "), where " + (expectedRank == 3 ? "images" : "labels") +
                " of rank " + std::to_string(expectedRank) + " were expected");
  array.shape.clear();
  int64_t count = 1;
  bool truncated = false;
  for (int i = 0; i < rank; ++i) {
    uint8_t b[4];
    int n = gzread(f, b, 4);
    if (n < 0)
      return damaged();
    if (n != 4)
      return fail("the dimensions are truncated");
    int64_t d = (int64_t(b[0]) << 24) | (int64_t(b[1]) << 16) |
                (int64_t(b[2]) << 8) | b[3];
    if (d <= 0 || d > (int64_t(1) << 30))
      return fail("dimension " + std::to_string(i) + " is " +
                  std::to_string(d));
    if (i == 0 && maxItems > 0 && d > maxItems) {
      d = maxItems;
      truncated = true;
    }
    array.shape.push_back(d);
    // Checked before multiplying: a count of up to 2^34 times a dimension
    // of up to 2^30 overflows int64.
    if (d > (int64_t(1) << 34) / count)
      return fail("it is too large");
    count *= d;
  }
  // Grow the buffer as data arrives rather than trusting the header's
  // size: a damaged header must not make us allocate gigabytes for a file
  // of a few bytes.
  array.data.clear();
  int64_t done = 0;
  while (done < count) {
    int64_t chunk = std::min<int64_t>(count - done, int64_t(1) << 24);
    array.data.resize(done + chunk);
    int n = gzread(f, array.data.data() + done, unsigned(chunk));
    if (n < 0)
      return damaged();
    if (n == 0)
      return fail("the data is truncated (" + std::to_string(done) + " of " +
                  std::to_string(count) + " bytes)");
    done += n;
  }
  array.data.resize(done);
  // The header says how much data there is: more is another file's data
  // appended, or a header that undercounts.
  if (!truncated) {
    uint8_t extra[4096];
    int64_t more = 0;
    for (int n; (n = gzread(f, extra, sizeof(extra))) > 0;)
      more += n;
    if (more > 0)
      return fail(std::to_string(more) + " bytes follow the " +
                  std::to_string(count) + " its header describes");
    if (gzread(f, extra, 1) < 0)
      return damaged();
  }
  gzclose(f);
  return true;
}
