//===- Data.cpp - Batches for the trainer ---------------------------------===//

#include "runtime/Data.h"
#include "runtime/Failure.h"
#include "runtime/Idx.h"
#include "runtime/Init.h"
#include "runtime/Npy.h"
#include "runtime/Safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <numeric>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mnemo::runtime {

namespace {

bool isDirectory(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}
bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// A permutation of [0, n) that depends only on (seed, epoch).
std::vector<int32_t> epochOrder(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed * 0x9E3779B97F4A7C15ull + uint64_t(epoch) + 1);
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(order[i], order[int64_t(rng.uniform() * double(i + 1))]);
  return order;
}

//===----------------------------------------------------------------------===//
// Token files
//===----------------------------------------------------------------------===//

/// A token file, mapped read-only: uint16 tokens, raw (nanoGPT) or after
/// llm.c's 1024-byte header. Mapping reads only the pages a batch touches,
/// so a file far larger than memory trains, and nothing is copied.
class TokenFile {
public:
  TokenFile() = default;
  TokenFile(const TokenFile &) = delete;
  TokenFile &operator=(const TokenFile &) = delete;
  ~TokenFile() {
    if (mapping)
      ::munmap(mapping, mappedBytes);
  }

  bool open(const std::string &file, std::string &error) {
    path = file;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      return failWith(error,
                      "cannot open '" + path + "': " + std::strerror(errno));
    if (!S_ISREG(st.st_mode))
      return failWith(
          error,
          "'" + path +
              "' is not a regular file; a token file holds uint16 tokens "
              "(raw, or after llm.c's 1024-byte header)");
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return failWith(error,
                      "cannot open '" + path + "': " + std::strerror(errno));
    mappedBytes = size_t(st.st_size);
    if (mappedBytes > 0) {
      void *p = ::mmap(nullptr, mappedBytes, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        error = "cannot map '" + path + "': " + std::strerror(errno);
        ::close(fd);
        return false;
      }
      mapping = p;
    }
    ::close(fd);
    const uint8_t *bytes = static_cast<const uint8_t *>(mapping);
    // llm.c's token files start with 256 int32: magic 20240520, version,
    // token count.
    if (mappedBytes >= 1024) {
      int32_t header[3];
      std::memcpy(header, bytes, sizeof(header));
      if (header[0] == 20240520) {
        if (int64_t(mappedBytes - 1024) != int64_t(header[2]) * 2)
          return failWith(error, "'" + path + "' says it holds " +
                                     std::to_string(header[2]) +
                                     " tokens but has room for " +
                                     std::to_string((mappedBytes - 1024) / 2));
        headerBytes = 1024;
      }
    }
    if ((mappedBytes - headerBytes) % 2 != 0)
      return failWith(
          error,
          "'" + path +
              "' is not a token file (uint16 tokens: its size must be even)");
    tokens = reinterpret_cast<const uint16_t *>(bytes + headerBytes);
    count = int64_t((mappedBytes - headerBytes) / 2);
    return true;
  }

  /// Where token `index` is in the file, for messages.
  std::string position(int64_t index) const {
    return "position " + std::to_string(index) + " (byte " +
           std::to_string(int64_t(headerBytes) + 2 * index) + ") of '" + path +
           "'";
  }

  std::string path;
  const uint16_t *tokens = nullptr;
  int64_t count = 0;

private:
  void *mapping = nullptr;
  size_t mappedBytes = 0, headerBytes = 0;
};

/// Tokens [begin, begin + count) of a mapped file: a split.
struct TokenSpan {
  const TokenFile *file = nullptr;
  int64_t begin = 0, count = 0;
  uint16_t operator[](int64_t i) const { return file->tokens[begin + i]; }
};

class TokenSource : public BatchSource {
public:
  TokenSource(BatchLayout train, BatchLayout eval, uint64_t seed, bool streams,
              DataShard shard)
      : trainLayout(std::move(train)), evalLayout(std::move(eval)), seed(seed),
        streams(streams), shard(shard) {}

  bool open(const std::string &path, std::string &error) {
    for (const BatchLayout *l : {&trainLayout, &evalLayout}) {
      if (l->tensors.empty())
        continue;
      const ArgumentInfo *x = l->tensors[0], *y = l->tensors.back();
      if (l->tensors.size() != 2 || std::string(x->dtype) != "i32" ||
          std::string(y->dtype) != "i32" || x->rank != 2 ||
          x->typeText() != y->typeText())
        return failWith(
            error,
            "token data needs a model with one i32[batch, context] input "
            "and a target of the same shape");
    }
    context = trainLayout.tensors[0]->shape[1];
    if (!trainFile.open(path, error))
      return false;
    // The held-out split: a sibling val.bin next to train.bin, else the
    // last tenth of the file.
    std::string valPath;
    if (endsWith(path, "train.bin"))
      valPath = path.substr(0, path.size() - 9) + "val.bin";
    trainTokens = {&trainFile, 0, trainFile.count};
    if (!valPath.empty() && exists(valPath)) {
      if (!valFile.open(valPath, error))
        return false;
      valTokens = {&valFile, 0, valFile.count};
      split = "validation from " + valPath;
    } else {
      int64_t keep = trainFile.count - trainFile.count / 10;
      trainTokens.count = keep;
      valTokens = {&trainFile, keep, trainFile.count - keep};
      split = "the last tenth held out for validation";
    }
    int64_t limit = std::max(trainLayout.tensors[0]->indexLimit,
                             trainLayout.tensors[1]->indexLimit);
    for (const TokenFile *file : {&trainFile, &valFile})
      for (int64_t i = 0; limit > 0 && i < file->count; ++i)
        if (file->tokens[i] >= limit)
          return failWith(
              error, "token " + std::to_string(file->tokens[i]) + " at " +
                         file->position(i) +
                         " is out of range for the model's vocabulary of " +
                         std::to_string(limit));
    if (trainTokens.count < context + 1)
      return failWith(error,
                      "'" + path + "' holds " +
                          std::to_string(trainFile.count) + " tokens" +
                          (trainTokens.count != trainFile.count
                               ? " (" + std::to_string(trainTokens.count) +
                                     " for training, the last tenth held out)"
                               : std::string()) +
                          ", fewer than one context of " +
                          std::to_string(context + 1));
    if (streams && streamLength() < context + 1)
      return failWith(error,
                      "--streams: " + std::to_string(trainTokens.count) +
                          " training tokens in " +
                          std::to_string(trainLayout.batchSize * shard.ranks) +
                          " streams leave fewer than one context of " +
                          std::to_string(context + 1) + " per stream");
    name = path;
    return true;
  }

  int64_t stepsPerEpoch() const override {
    if (streams)
      return windowsPerStream();
    return std::max<int64_t>(
        1, trainTokens.count / (trainLayout.batchSize * shard.ranks * context));
  }

  bool trainBatch(int64_t step, uint8_t *inputs, std::string &) override {
    std::vector<int64_t> starts(trainLayout.batchSize);
    if (streams) {
      // PyTorch's word_language_model batchify: the tokens cut into one
      // stream per row; step s reads each stream's window (s - 1) mod W.
      // Rank r reads streams [r * b, (r + 1) * b) of the global batch's.
      int64_t window = (step - 1) % windowsPerStream();
      int64_t first = shard.rank * trainLayout.batchSize;
      for (int64_t b = 0; b < trainLayout.batchSize; ++b)
        starts[b] = (first + b) * streamLength() + window * context;
    } else {
      // The global batch's windows, drawn in order; this rank's are its
      // rows'.
      Rng rng(seed * 0x9E3779B97F4A7C15ull ^ (uint64_t(step) << 1 | 1));
      int64_t windows = trainTokens.count - context;
      for (int64_t row = 0; row < trainLayout.batchSize * shard.ranks; ++row) {
        int64_t start = int64_t(rng.uniform() * double(windows));
        int64_t local = row - shard.rank * trainLayout.batchSize;
        if (local >= 0 && local < trainLayout.batchSize)
          starts[local] = start;
      }
    }
    fill(trainLayout, trainTokens, starts, inputs);
    return true;
  }

  int64_t evalBatches() const override {
    if (evalLayout.tensors.empty())
      return 0;
    // Consecutive windows over the held-out tokens, at most 32 batches.
    int64_t windows = (valTokens.count - 1) / context;
    return std::min<int64_t>(32, windows / evalLayout.batchSize);
  }

  bool evalBatch(int64_t index, uint8_t *inputs, std::string &) override {
    std::vector<int64_t> starts(evalLayout.batchSize);
    for (int64_t b = 0; b < evalLayout.batchSize; ++b)
      starts[b] = (index * evalLayout.batchSize + b) * context;
    fill(evalLayout, valTokens, starts, inputs);
    return true;
  }

  std::string describe() const override {
    return "tokens from " + name + ": " + std::to_string(trainTokens.count) +
           " for training" +
           (streams ? " in " + std::to_string(trainLayout.batchSize) +
                          " contiguous streams"
                    : std::string()) +
           ", " + std::to_string(valTokens.count) + " (" + split + ")";
  }

  std::vector<std::string> files() const override {
    std::vector<std::string> paths = {trainFile.path};
    if (!valFile.path.empty())
      paths.push_back(valFile.path);
    return paths;
  }

private:
  void fill(const BatchLayout &layout, const TokenSpan &tokens,
            const std::vector<int64_t> &starts, uint8_t *inputs) {
    int32_t *x =
        reinterpret_cast<int32_t *>(inputs + layout.tensors[0]->offset);
    int32_t *y =
        reinterpret_cast<int32_t *>(inputs + layout.tensors[1]->offset);
    for (int64_t b = 0; b < layout.batchSize; ++b)
      for (int64_t t = 0; t < context; ++t) {
        x[b * context + t] = tokens[starts[b] + t];
        y[b * context + t] = tokens[starts[b] + t + 1];
      }
  }

  /// --streams: the training tokens cut into batchSize streams, each read
  /// a window of `context` (and its next token) at a time.
  int64_t streamLength() const {
    return trainTokens.count / (trainLayout.batchSize * shard.ranks);
  }
  int64_t windowsPerStream() const {
    return std::max<int64_t>(1, (streamLength() - 1) / context);
  }

  BatchLayout trainLayout, evalLayout;
  uint64_t seed;
  bool streams;
  DataShard shard;
  int64_t context = 0;
  TokenFile trainFile, valFile;
  TokenSpan trainTokens, valTokens;
  std::string name, split;
};

//===----------------------------------------------------------------------===//
// Named arrays
//===----------------------------------------------------------------------===//

/// One split of named arrays: the model's batch tensors by name, each with
/// the same number of examples (its first dimension).
struct ArraySplit {
  std::vector<const StoredTensor *> arrays; // in the layout's order
  int64_t examples = 0;
  std::vector<std::string> files;
  SafetensorsFile storage; // owns the arrays
};

/// Arrays named after the model's inputs and targets: a .safetensors file,
/// or a directory with train.safetensors (and test.safetensors), or with
/// train/NAME.npy (and test/NAME.npy); or a directory of IDX images and
/// their labels. Examples are shuffled each epoch; the test split is
/// evaluated in order.
class ArraySource : public BatchSource {
public:
  ArraySource(BatchLayout train, BatchLayout eval, uint64_t seed,
              DataShard shard)
      : trainLayout(std::move(train)), evalLayout(std::move(eval)), seed(seed),
        shard(shard) {}

  /// A .safetensors file already read (`file`), or a directory.
  bool open(const std::string &path, SafetensorsFile *file,
            std::string &error) {
    name = path;
    if (file) {
      train.storage = std::move(*file);
      train.files.push_back(path);
      return check(path, trainLayout, train, error);
    }
    if (exists(path + "/train.safetensors"))
      return load(path + "/train.safetensors", "", trainLayout, train, error) &&
             (!exists(path + "/test.safetensors") ||
              evalLayout.tensors.empty() ||
              load(path + "/test.safetensors", "", evalLayout, test, error));
    return load(path + "/train", ".npy", trainLayout, train, error) &&
           (!isDirectory(path + "/test") || evalLayout.tensors.empty() ||
            load(path + "/test", ".npy", evalLayout, test, error));
  }

  /// MNIST's four IDX files in `dir`, the test pair optional: the images
  /// become the input's array (bytes, scaled to [0, 1] as they are read),
  /// the labels the target's.
  bool openImages(const std::string &dir, std::string &error) {
    name = dir;
    kind = "images";
    std::vector<std::string> paths;
    IdxArray trainImages, trainLabels, testImages, testLabels;
    auto find = [&](const std::string &stem) {
      for (const char *suffix : {".gz", ""})
        if (exists(dir + "/" + stem + suffix))
          return dir + "/" + stem + suffix;
      return dir + "/" + stem + ".gz";
    };
    for (const char *stem :
         {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
          "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
      paths.push_back(find(stem));
    if (!readIdx(paths[0], trainImages, error, 0, 3) ||
        !readIdx(paths[1], trainLabels, error, 0, 1))
      return false;
    if (trainImages.shape[0] != trainLabels.shape[0])
      return failWith(error, "'" + paths[0] + "' holds " +
                                 std::to_string(trainImages.shape[0]) +
                                 " images and '" + paths[1] + "' " +
                                 std::to_string(trainLabels.shape[0]) +
                                 " labels; they must be as many");
    // The test split is optional: missing, it is no error; present, it
    // must be sound.
    bool haveTest = exists(paths[2]) || exists(paths[3]);
    if (haveTest && (!readIdx(paths[2], testImages, error, 0, 3) ||
                     !readIdx(paths[3], testLabels, error, 0, 1)))
      return false;
    if (haveTest && testImages.shape[0] != testLabels.shape[0])
      return failWith(error, "'" + paths[2] + "' holds " +
                                 std::to_string(testImages.shape[0]) +
                                 " images and '" + paths[3] + "' " +
                                 std::to_string(testLabels.shape[0]) +
                                 " labels; they must be as many");
    if (haveTest && (testImages.shape[1] != trainImages.shape[1] ||
                     testImages.shape[2] != trainImages.shape[2]))
      return failWith(error, "'" + paths[2] + "' holds " +
                                 std::to_string(testImages.shape[1]) + "x" +
                                 std::to_string(testImages.shape[2]) +
                                 " images, '" + paths[0] + "' " +
                                 std::to_string(trainImages.shape[1]) + "x" +
                                 std::to_string(trainImages.shape[2]));
    int64_t pixels = trainImages.shape[1] * trainImages.shape[2];
    for (const BatchLayout *l : {&trainLayout, &evalLayout}) {
      if (l->tensors.empty())
        continue;
      if (l->tensors.size() != 2 ||
          l->tensors[0]->role != ArgumentRole::Input ||
          std::string(l->tensors[0]->dtype) != "f32" ||
          l->tensors[1]->role != ArgumentRole::Target ||
          std::string(l->tensors[1]->dtype) != "i32" ||
          l->tensors[0]->elements() != l->batchSize * pixels ||
          l->tensors[1]->elements() != l->batchSize)
        return failWith(error,
                        "image data needs a model with one f32 input of " +
                            std::to_string(pixels) +
                            " values per example (such as f32[batch, " +
                            std::to_string(trainImages.shape[1]) + ", " +
                            std::to_string(trainImages.shape[2]) +
                            "]) and one i32 target of shape [batch]");
    }
    int64_t classes = trainLayout.tensors[1]->indexLimit;
    for (auto [labels, file] :
         {std::pair<const IdxArray *, std::string>{&trainLabels, paths[1]},
          {&testLabels, paths[3]}})
      for (size_t i = 0; i < labels->data.size(); ++i)
        if (classes > 0 && labels->data[i] >= classes)
          return failWith(error, "label " + std::to_string(labels->data[i]) +
                                     " (item " + std::to_string(i) + " of '" +
                                     file +
                                     "') is out of range for the model's " +
                                     std::to_string(classes) + " classes");
    if (trainLabels.shape[0] < globalBatch())
      return failWith(error, std::to_string(trainLabels.shape[0]) +
                                 " training examples do not fill one batch "
                                 "of " +
                                 std::to_string(globalBatch()));
    holdImages(train, trainImages, trainLabels, {paths[0], paths[1]});
    holdImages(test, testImages, testLabels, {paths[2], paths[3]});
    return true;
  }

  /// A split's images and labels as its two U8 arrays.
  static void holdImages(ArraySplit &split, IdxArray &images, IdxArray &labels,
                         std::vector<std::string> files) {
    split.files = std::move(files);
    if (labels.shape.empty())
      return;
    split.examples = labels.shape[0];
    for (IdxArray *array : {&images, &labels})
      split.storage.tensors.push_back(
          {"", "U8", std::move(array->shape), std::move(array->data)});
    for (const StoredTensor &t : split.storage.tensors)
      split.arrays.push_back(&t);
  }

  int64_t stepsPerEpoch() const override {
    return train.examples / globalBatch();
  }

  bool trainBatch(int64_t step, uint8_t *inputs, std::string &) override {
    int64_t perEpoch = stepsPerEpoch();
    int64_t epoch = (step - 1) / perEpoch, within = (step - 1) % perEpoch;
    if (epoch != orderEpoch) {
      order = epochOrder(train.examples, seed, epoch);
      orderEpoch = epoch;
    }
    fill(trainLayout, train,
         order.data() + within * globalBatch() +
             shard.rank * trainLayout.batchSize,
         inputs);
    return true;
  }

  int64_t evalBatches() const override {
    return evalLayout.tensors.empty() ? 0
                                      : test.examples / evalLayout.batchSize;
  }

  bool evalBatch(int64_t index, uint8_t *inputs, std::string &) override {
    std::vector<int32_t> rows(evalLayout.batchSize);
    std::iota(rows.begin(), rows.end(), int32_t(index * evalLayout.batchSize));
    fill(evalLayout, test, rows.data(), inputs);
    return true;
  }

  std::string describe() const override {
    return kind + " from " + name + ": " + std::to_string(train.examples) +
           " for training, " +
           (test.examples ? std::to_string(test.examples) + " for testing"
                          : std::string("no test set"));
  }

  std::vector<std::string> files() const override {
    std::vector<std::string> all = train.files;
    all.insert(all.end(), test.files.begin(), test.files.end());
    return all;
  }

private:
  /// A step's examples over all ranks.
  int64_t globalBatch() const { return trainLayout.batchSize * shard.ranks; }

  /// Whether an array of `stored` type can feed a tensor of `dtype`: floats
  /// from floats and bytes (images, scaled to [0, 1]); integers from
  /// integers and booleans.
  static bool converts(const std::string &stored, const std::string &dtype) {
    if (dtype == "f32")
      return stored == "F32" || stored == "F64" || stored == "U8";
    if (dtype == "i32" || dtype == "i8")
      return stored == "I32" || stored == "I64" || stored == "I16" ||
             stored == "U16" || stored == "I8" || stored == "U8" ||
             stored == "BOOL";
    return false;
  }

  /// "f32[N,3,32,32]": the array a model's batch tensor reads from.
  static std::string arrayShape(const ArgumentInfo &a) {
    std::string s = std::string(a.dtype) + "[N";
    for (int i = 1; i < a.rank; ++i)
      s += "," + std::to_string(a.shape[i]);
    return s + "]";
  }
  static const char *roleName(const ArgumentInfo &a) {
    return a.role == ArgumentRole::Target ? "target" : "input";
  }

  /// Reads the split's arrays from `where` (a .safetensors file, or a
  /// directory of NAME`suffix` files) and checks them against `layout`.
  bool load(const std::string &where, const std::string &suffix,
            const BatchLayout &layout, ArraySplit &split, std::string &error) {
    if (suffix.empty()) {
      if (!readSafetensors(where, split.storage, error))
        return false;
      split.files.push_back(where);
    }
    for (const ArgumentInfo *a : suffix.empty()
                                     ? std::vector<const ArgumentInfo *>()
                                     : layout.tensors) {
      std::string file = where + "/" + a->name + suffix;
      if (!exists(file))
        return failWith(error, "'" + where + "' has no " + a->name + suffix +
                                   " for the model's " + roleName(*a) + " '" +
                                   a->name + "' (" + arrayShape(*a) + ")");
      StoredTensor t;
      if (!readNpy(file, a->name, t, error))
        return false;
      split.storage.tensors.push_back(std::move(t));
      split.files.push_back(file);
    }
    return check(where, layout, split, error);
  }

  /// Checks the split's arrays against `layout`: one for each batch tensor,
  /// of its per-example shape, a type that converts, in-range classes.
  bool check(const std::string &where, const BatchLayout &layout,
             ArraySplit &split, std::string &error) {
    for (const ArgumentInfo *a : layout.tensors) {
      std::string wanted = arrayShape(*a);
      const StoredTensor *t = split.storage.find(a->name);
      if (!t) {
        std::string names;
        for (const StoredTensor &s : split.storage.tensors)
          names += (names.empty() ? "" : ", ") + s.name;
        error = "'" + where + "' has no array '" + a->name +
                "' for the model's " + roleName(*a) + " (" + wanted +
                "); it holds " + (names.empty() ? "none" : names);
        return false;
      }
      std::vector<int64_t> example(a->shape + 1, a->shape + a->rank);
      std::string stored = t->dtype + shapeText(t->shape);
      if (t->shape.empty() ||
          std::vector<int64_t>(t->shape.begin() + 1, t->shape.end()) != example)
        return failWith(error, "array '" + std::string(a->name) + "' of '" +
                                   where + "' is " + stored +
                                   ", and the model's " + a->name + " needs " +
                                   wanted + " (N examples)");
      if (!converts(t->dtype, a->dtype))
        return failWith(
            error, "array '" + std::string(a->name) + "' of '" + where +
                       "' is " + stored + ", which cannot feed the model's " +
                       wanted +
                       (std::string(a->dtype) == "f32"
                            ? " (floats need F32, F64 or U8 images)"
                            : " (integers need an integer or bool array)"));
      if (split.arrays.empty())
        split.examples = t->shape[0];
      if (t->shape[0] != split.examples)
        return failWith(error,
                        "array '" + std::string(a->name) + "' of '" + where +
                            "' holds " + std::to_string(t->shape[0]) +
                            " examples, and '" + split.arrays.front()->name +
                            "' " + std::to_string(split.examples));
      if (a->indexLimit > 0)
        for (int64_t i = 0; i < int64_t(t->bytes.size()) / dtypeSize(t->dtype);
             ++i) {
          int64_t v = integerAt(*t, i);
          if ((v < 0 || v >= a->indexLimit) &&
              !(a->ignores && v == a->ignoredIndex))
            return failWith(error, "array '" + std::string(a->name) + "' of '" +
                                       where + "' holds " + std::to_string(v) +
                                       " at element " + std::to_string(i) +
                                       ", out of range for the model's " +
                                       std::to_string(a->indexLimit) +
                                       " classes");
        }
      split.arrays.push_back(t);
    }
    int64_t batch = &layout == &trainLayout ? globalBatch() : layout.batchSize;
    if (&layout == &trainLayout && split.examples < batch)
      return failWith(error, "'" + where + "' holds " +
                                 std::to_string(split.examples) +
                                 " examples, fewer than one batch of " +
                                 std::to_string(batch));
    return true;
  }

  /// The element at byte `p` of an array (unaligned: arrays are packed).
  template <typename T> static T load(const uint8_t *p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }

  static int64_t integerAt(const StoredTensor &t, int64_t i) {
    const uint8_t *p = t.bytes.data() + i * dtypeSize(t.dtype);
    if (t.dtype == "I64")
      return load<int64_t>(p);
    if (t.dtype == "I32")
      return load<int32_t>(p);
    if (t.dtype == "I16")
      return load<int16_t>(p);
    if (t.dtype == "U16")
      return load<uint16_t>(p);
    if (t.dtype == "I8")
      return int8_t(*p);
    return *p; // U8, BOOL
  }

  static double floatAt(const StoredTensor &t, int64_t i) {
    if (t.dtype == "F32")
      return load<float>(t.bytes.data() + 4 * i);
    if (t.dtype == "F64")
      return load<double>(t.bytes.data() + 8 * i);
    return double(t.bytes[i]) / 255.0; // U8 images, as IDX's
  }

  /// Copies the examples `rows` of each array into the batch, converted to
  /// the model's types.
  void fill(const BatchLayout &layout, const ArraySplit &split,
            const int32_t *rows, uint8_t *inputs) {
    for (size_t k = 0; k < layout.tensors.size(); ++k) {
      const ArgumentInfo &a = *layout.tensors[k];
      const StoredTensor &t = *split.arrays[k];
      int64_t per = a.elements() / layout.batchSize;
      std::string dtype = a.dtype;
      for (int64_t b = 0; b < layout.batchSize; ++b) {
        int64_t from = int64_t(rows[b]) * per, to = b * per;
        if (dtype == "f32") {
          float *out = reinterpret_cast<float *>(inputs + a.offset) + to;
          if (t.dtype == "U8")
            for (int64_t e = 0; e < per; ++e)
              out[e] = float(t.bytes[from + e]) / 255.0f;
          else
            for (int64_t e = 0; e < per; ++e)
              out[e] = float(floatAt(t, from + e));
        } else if (dtype == "i32") {
          int32_t *out = reinterpret_cast<int32_t *>(inputs + a.offset) + to;
          for (int64_t e = 0; e < per; ++e)
            out[e] = int32_t(integerAt(t, from + e));
        } else {
          int8_t *out = reinterpret_cast<int8_t *>(inputs + a.offset) + to;
          for (int64_t e = 0; e < per; ++e)
            out[e] = int8_t(integerAt(t, from + e));
        }
      }
    }
  }

  BatchLayout trainLayout, evalLayout;
  uint64_t seed;
  DataShard shard;
  ArraySplit train, test;
  std::vector<int32_t> order;
  int64_t orderEpoch = -1;
  std::string name, kind = "arrays";
};

//===----------------------------------------------------------------------===//
// Recorded batches
//===----------------------------------------------------------------------===//

class ReplaySource : public BatchSource {
public:
  ReplaySource(BatchLayout train, DataShard shard)
      : layout(std::move(train)), shard(shard) {}

  bool open(const std::string &path, SafetensorsFile recorded,
            std::string &error) {
    file = std::move(recorded);
    // Count the steps recorded for every batch tensor.
    for (steps = 0;; ++steps) {
      bool all = true;
      for (const ArgumentInfo *a : layout.tensors)
        all &= file.find(std::string(a->name) + "." +
                         std::to_string(steps + 1)) != nullptr;
      if (!all)
        break;
    }
    if (steps == 0)
      return failWith(error, "'" + path +
                                 "' holds no recorded batch for this model (it "
                                 "needs tensors named like '" +
                                 std::string(layout.tensors[0]->name) + ".1')");
    name = path;
    return true;
  }

  int64_t stepsPerEpoch() const override { return steps; }

  bool trainBatch(int64_t step, uint8_t *inputs, std::string &error) override {
    int64_t recorded = (step - 1) % steps + 1;
    for (const ArgumentInfo *a : layout.tensors) {
      std::string key = std::string(a->name) + "." + std::to_string(recorded);
      const StoredTensor *t = file.find(key);
      std::string dtype = std::string(a->dtype) == "f32" ? "F32" : "I32";
      // A recorded batch is a global batch: this rank reads its rows.
      int64_t bytes = a->elements() * 4;
      if (t->dtype != dtype || int64_t(t->bytes.size()) != bytes * shard.ranks)
        return failWith(error,
                        "recorded batch '" + key + "' is not " + a->typeText() +
                            (shard.ranks > 1
                                 ? " times " + std::to_string(shard.ranks) +
                                       " ranks in its first dimension"
                                 : std::string()));
      const uint8_t *rows = t->bytes.data() + shard.rank * bytes;
      if (dtype == "I32" && a->indexLimit > 0)
        for (int64_t i = 0; i < bytes; i += 4) {
          int32_t v;
          std::memcpy(&v, rows + i, 4);
          if ((v < 0 || v >= a->indexLimit) &&
              !(a->ignores && v == a->ignoredIndex))
            return failWith(error, "recorded batch '" + key + "' holds " +
                                       std::to_string(v) +
                                       ", out of range for " +
                                       std::to_string(a->indexLimit));
        }
      std::memcpy(inputs + a->offset, rows, bytes);
    }
    return true;
  }

  int64_t evalBatches() const override { return 0; }
  bool evalBatch(int64_t, uint8_t *, std::string &error) override {
    error = "recorded batches have no evaluation split";
    return false;
  }
  std::string describe() const override {
    return std::to_string(steps) + " recorded batches from " + name;
  }
  std::vector<std::string> files() const override { return {name}; }

private:
  BatchLayout layout;
  DataShard shard;
  SafetensorsFile file;
  int64_t steps = 0;
  std::string name;
};

} // namespace

BatchLayout batchLayoutOf(const StepInfo &step) {
  BatchLayout layout;
  for (int i = 0; i < step.numArguments; ++i) {
    ArgumentRole role = step.arguments[i].role;
    if (role == ArgumentRole::Input || role == ArgumentRole::Target)
      layout.tensors.push_back(&step.arguments[i]);
  }
  if (!layout.tensors.empty() && layout.tensors[0]->rank > 0)
    layout.batchSize = layout.tensors[0]->shape[0];
  return layout;
}

std::unique_ptr<BatchSource>
openBatchSource(const std::string &path, const BatchLayout &train,
                const BatchLayout &eval, uint64_t seed, std::string &error,
                bool tokenStreams, DataShard shard) {
  if (train.tensors.empty() || train.batchSize == 0) {
    error = "the model has no batched input to train on";
    return nullptr;
  }
  if (!exists(path)) {
    error = "'" + path + "' does not exist";
    return nullptr;
  }
  if (tokenStreams && (isDirectory(path) || endsWith(path, ".safetensors"))) {
    error = "--streams reads token data (a .bin file of uint16 tokens), not '" +
            path + "'";
    return nullptr;
  }
  // Named arrays: a directory holding train.safetensors or train/*.npy.
  if (isDirectory(path) &&
      (exists(path + "/train.safetensors") || isDirectory(path + "/train"))) {
    auto source = std::make_unique<ArraySource>(train, eval, seed, shard);
    if (!source->open(path, nullptr, error))
      return nullptr;
    return source;
  }
  if (isDirectory(path)) {
    auto source = std::make_unique<ArraySource>(train, eval, seed, shard);
    if (!source->openImages(path, error))
      return nullptr;
    return source;
  }
  if (endsWith(path, ".safetensors")) {
    // Recorded batches are named NAME.1, NAME.2, ...; arrays NAME.
    SafetensorsFile probe;
    if (!readSafetensors(path, probe, error))
      return nullptr;
    if (probe.find(std::string(train.tensors[0]->name) + ".1")) {
      auto source = std::make_unique<ReplaySource>(train, shard);
      if (!source->open(path, std::move(probe), error))
        return nullptr;
      return source;
    }
    auto source = std::make_unique<ArraySource>(train, eval, seed, shard);
    if (!source->open(path, &probe, error))
      return nullptr;
    return source;
  }
  auto source =
      std::make_unique<TokenSource>(train, eval, seed, tokenStreams, shard);
  if (!source->open(path, error))
    return nullptr;
  return source;
}

} // namespace mnemo::runtime
