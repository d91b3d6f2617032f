//===- MatmulSiteKernels.cpp - A 16-bit matrix product, set up once -------===//
//
// MatmulSite (MatmulKernels.h): a 16-bit matrix product of the generated
// code, prepared before the first step (prepareMatmuls). Where the trainer
// is built with oneDNN (MNEMO_HAVE_ONEDNN), it creates oneDNN's matmul
// primitives for the product's rows split over the step's threads, on the
// plan's operands as they lie (strides say the transposes), each part's
// user-managed scratchpad in the op's planned workspace; every call then
// only points the memories at the step's buffers and executes. Through
// oneDNN's C API, as the convolution sites (ConvolutionSiteKernels.cpp):
// its execute allocates an argument map, counted apart from the step's
// own allocations. Otherwise gemmHalf (runtime/cpu/Kernels.h). In the
// trainer's library.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/matmul/MatmulKernels.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/LibrarySites.h"
#include "runtime/cpu/OneDnnContext.h"
#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <vector>

namespace mnemo::cpu {

#if MNEMO_HAVE_ONEDNN

/// A site's primitives and memories. C's rows (or columns) are split into
/// parts, one per thread of the step's pool; each part reads its rows of
/// op(A) and all of op(B) (or all of op(A) and its columns of op(B)) and
/// writes its rows (columns) of C, so no part sums into another's result
/// and a run is deterministic for a thread count.
struct MatmulSite::OneDnn {
  struct Part {
    int64_t begin = 0; // first row (column) of C
    int primitive = 0;
    dnnl_memory_t a = nullptr, b = nullptr, c = nullptr;
    dnnl_memory_t scratchpad = nullptr; // null: the primitive needs none
    int64_t scratchpadOffset = 0;       // bytes into the workspace
    dnnl_stream_t stream = nullptr;
  };
  /// At most two: for the parts' row count, and the last part's.
  std::vector<dnnl_primitive_t> primitives;
  std::vector<Part> parts;
  std::vector<dnnl_primitive_desc_t> descs;
  std::vector<dnnl_memory_t> memories;

  ~OneDnn() {
    for (dnnl_primitive_t p : primitives)
      dnnl_primitive_destroy(p);
    for (Part &part : parts)
      if (part.stream)
        dnnl_stream_destroy(part.stream);
    for (dnnl_memory_t m : memories)
      dnnl_memory_destroy(m);
    for (dnnl_primitive_desc_t d : descs)
      dnnl_primitive_desc_destroy(d);
  }
};

namespace {

using OneDnn = MatmulSite::OneDnn;

const char *nameOf(MatmulData data) {
  return data == MatmulData::BF16 ? "bf16" : "f16";
}

/// Rows of C below which a part is not worth a thread of its own.
constexpr int64_t kMinPartRows = 32;

/// Sets up `dnn` for the product split into at most `maxParts` parts. An
/// empty string on success, else why not.
std::string createOneDnn(const MatmulShape &s, MatmulData data,
                         int64_t workspaceBytes, int64_t maxParts, OneDnn &dnn,
                         std::string &implementation) {
  OneDnnContext &c = oneDnnContext();
  if (!c.failure.empty())
    return c.failure;
  if (s.m == 0 || s.n == 0 || s.k == 0)
    return "an empty product";
  // Only where this CPU computes the type natively: oneDNN's bf16 on
  // AVX-512 without AVX512_BF16 (emulated) took twice the time of sgemm on
  // widened copies. oneDNN 2.6 names no ISA with native f16 arithmetic.
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  if (data != MatmulData::BF16 ||
      (isa & dnnl_cpu_isa_avx512_core_bf16) != dnnl_cpu_isa_avx512_core_bf16)
    return std::string("oneDNN has no native ") + nameOf(data) +
           " matrix product on this CPU";
  c.alone();
  // A row-major [rows, cols] matrix at leading dimension ld, or its
  // transpose's view.
  auto matrix = [&](int64_t rows, int64_t cols, bool transposed, int64_t ld,
                    dnnl_memory_desc_t &md, dnnl_data_type_t type = dnnl_bf16) {
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {transposed ? 1 : ld, transposed ? ld : 1};
    return dnnl_memory_desc_init_by_strides(&md, 2, dims, type, strides) ==
           dnnl_success;
  };
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_post_ops_t sum = nullptr;
  // C += op(A) op(B): oneDNN's sum post-op adds the product to what C holds.
  bool refused =
      dnnl_primitive_attr_create(&attr) != dnnl_success ||
      dnnl_primitive_attr_set_scratchpad_mode(
          attr, dnnl_scratchpad_mode_user) != dnnl_success ||
      (s.accumulate &&
       (dnnl_post_ops_create(&sum) != dnnl_success ||
        dnnl_post_ops_append_sum(sum, 1.0f) != dnnl_success ||
        dnnl_primitive_attr_set_post_ops(attr, sum) != dnnl_success));
  if (sum)
    dnnl_post_ops_destroy(sum);
  if (refused) {
    if (attr)
      dnnl_primitive_attr_destroy(attr);
    return "oneDNN refuses a user-managed scratchpad or a sum";
  }
  // The parts split C's rows, or its columns (shape.splitColumns).
  int64_t extent = s.splitColumns ? s.n : s.m;
  int64_t parts = std::clamp<int64_t>(extent / kMinPartRows, 1, maxParts);
  int64_t size = (extent + parts - 1) / parts;
  std::string why;
  int64_t used = 0, lastRows = 0;
  for (int64_t begin = 0; why.empty() && begin < extent; begin += size) {
    int64_t rows = std::min(size, extent - begin);
    int64_t m = s.splitColumns ? s.m : rows, n = s.splitColumns ? rows : s.n;
    dnnl_memory_desc_t a, b, out;
    if (!matrix(m, s.k, s.transA, s.lda, a) ||
        !matrix(s.k, n, s.transB, s.ldb, b) ||
        !matrix(m, n, false, s.ldc, out, s.f32Result ? dnnl_f32 : dnnl_bf16)) {
      why = "oneDNN cannot describe the operands";
      break;
    }
    if (rows != lastRows) {
      dnnl_matmul_desc_t desc;
      dnnl_primitive_desc_t pd = nullptr;
      dnnl_primitive_t primitive = nullptr;
      if (dnnl_matmul_desc_init(&desc, &a, &b, nullptr, &out) != dnnl_success ||
          dnnl_primitive_desc_create(&pd, &desc, attr, c.engine, nullptr) !=
              dnnl_success) {
        why = "oneDNN has no bf16 matrix product for this shape";
        break;
      }
      dnn.descs.push_back(pd);
      const char *impl = "";
      dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
      // The reference code is far slower than sgemm on widened copies.
      if (std::string(impl).rfind("ref", 0) == 0) {
        why = "oneDNN has only its reference bf16 matrix product for this "
              "shape";
        break;
      }
      if (dnnl_primitive_create(&primitive, pd) != dnnl_success) {
        why = "oneDNN cannot create its matmul primitive";
        break;
      }
      implementation = impl;
      dnn.primitives.push_back(primitive);
      lastRows = rows;
    }
    OneDnn::Part &part = dnn.parts.emplace_back();
    part.begin = begin;
    part.primitive = int(dnn.primitives.size()) - 1;
    const dnnl_memory_desc_t *scratchpad = dnnl_primitive_desc_query_md(
        dnn.descs.back(), dnnl_query_scratchpad_md, 0);
    int64_t scratchpadBytes =
        scratchpad ? int64_t(dnnl_memory_desc_get_size(scratchpad)) : 0;
    std::vector<std::pair<const dnnl_memory_desc_t *, dnnl_memory_t *>>
        memories = {{&a, &part.a}, {&b, &part.b}, {&out, &part.c}};
    if (scratchpadBytes > 0) {
      memories.push_back({scratchpad, &part.scratchpad});
      // Each part's scratchpad at a 64-byte offset into the workspace.
      part.scratchpadOffset = (used + 63) / 64 * 64;
      used = part.scratchpadOffset + scratchpadBytes;
    }
    for (auto [md, memory] : memories) {
      if (dnnl_memory_create(memory, md, c.engine, DNNL_MEMORY_NONE) !=
          dnnl_success) {
        why = "oneDNN cannot create a memory";
        break;
      }
      dnn.memories.push_back(*memory);
    }
    if (why.empty() &&
        dnnl_stream_create(&part.stream, c.engine, dnnl_stream_default_flags) !=
            dnnl_success)
      why = "oneDNN cannot create a stream";
  }
  dnnl_primitive_attr_destroy(attr);
  if (why.empty() && used > workspaceBytes)
    why = "oneDNN's scratchpads (" + std::to_string(used) +
          " bytes) do not fit in the op's workspace (" +
          std::to_string(workspaceBytes) + " bytes)";
  return why;
}

} // namespace

#else

struct MatmulSite::OneDnn {};

#endif

MatmulSite::MatmulSite(const MatmulShape &shape, MatmulData data,
                       int64_t workspaceBytes)
    : shape(shape), data(data), workspaceBytes(workspaceBytes),
      how("widened sgemm: not prepared") {
  addSite(this);
}

MatmulSite::~MatmulSite() { removeSite(this); }

void MatmulSite::prepare(int threads) {
  dnn.reset();
#if MNEMO_HAVE_ONEDNN
  if (oneDnnTurnedOff()) {
    how = "widened sgemm: MNEMO_ONEDNN=0";
    return;
  }
  // As many parts as threads; where their scratchpads do not fit in the
  // workspace, one.
  std::string why;
  for (int64_t parts : {int64_t(threads), int64_t(1)}) {
    auto made = std::make_unique<OneDnn>();
    std::string implementation;
    why =
        createOneDnn(shape, data, workspaceBytes, parts, *made, implementation);
    if (why.empty()) {
      dnn = std::move(made);
      how = implementation;
      return;
    }
    if (threads == 1)
      break;
  }
  how = "widened sgemm: " + why;
#else
  (void)threads;
  how = "widened sgemm: the trainer was built without oneDNN";
#endif
}

bool MatmulSite::execute(const void *a, const void *b, void *c,
                         float *workspace) const {
#if MNEMO_HAVE_ONEDNN
  if (!dnn)
    return false;
  OneDnnContext &context = oneDnnContext();
  // Byte offsets: the operands are 16-bit, C 16-bit or f32.
  const int64_t cBytes = shape.f32Result ? 4 : 2;
  auto *base = reinterpret_cast<uint8_t *>(workspace);
  parallelFor(int64_t(dnn->parts.size()), 1, [&](int64_t begin, int64_t end) {
    context.alone();
    // oneDNN's execute allocates its argument map: counted apart.
    LibraryCallScope library;
    for (int64_t k = begin; k < end; ++k) {
      const OneDnn::Part &part = dnn->parts[k];
      // A part's first row of op(A) (a column of A where it is
      // transposed), or first column of op(B), and of C.
      int64_t aAt = 0, bAt = 0, cAt = 0;
      if (shape.splitColumns) {
        bAt = shape.transB ? part.begin * shape.ldb : part.begin;
        cAt = part.begin;
      } else {
        aAt = shape.transA ? part.begin : part.begin * shape.lda;
        cAt = part.begin * shape.ldc;
      }
      auto *bytesOfA = const_cast<uint8_t *>(static_cast<const uint8_t *>(a));
      auto *bytesOfB = const_cast<uint8_t *>(static_cast<const uint8_t *>(b));
      dnnl_memory_set_data_handle(part.a, bytesOfA + 2 * aAt);
      dnnl_memory_set_data_handle(part.b, bytesOfB + 2 * bAt);
      dnnl_memory_set_data_handle(part.c,
                                  static_cast<uint8_t *>(c) + cBytes * cAt);
      dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, part.a},
                                 {DNNL_ARG_WEIGHTS, part.b},
                                 {DNNL_ARG_DST, part.c},
                                 {DNNL_ARG_SCRATCHPAD, part.scratchpad}};
      if (part.scratchpad)
        dnnl_memory_set_data_handle(part.scratchpad,
                                    base + part.scratchpadOffset);
      dnnl_primitive_execute(dnn->primitives[part.primitive], part.stream,
                             part.scratchpad ? 4 : 3, args);
      dnnl_stream_wait(part.stream);
    }
  });
  return true;
#else
  (void)a, (void)b, (void)c, (void)workspace;
  return false;
#endif
}

template <typename T>
void MatmulSite::run(const T *a, const T *b, T *c, float *workspace) const {
  if (!execute(a, b, c, workspace))
    gemmHalf(shape.transA, shape.transB, shape.m, shape.n, shape.k, a,
             shape.lda, b, shape.ldb, c, shape.ldc, workspace);
}

template <typename T>
void MatmulSite::runF32(const T *a, const T *b, float *c,
                        float *workspace) const {
  if (!execute(a, b, c, workspace))
    reportError("a 16-bit product with an f32 result ran without oneDNN");
}

template void MatmulSite::run<bf16_t>(const bf16_t *, const bf16_t *, bf16_t *,
                                      float *) const;
template void MatmulSite::run<f16_t>(const f16_t *, const f16_t *, f16_t *,
                                     float *) const;
template void MatmulSite::runF32<bf16_t>(const bf16_t *, const bf16_t *,
                                         float *, float *) const;
template void MatmulSite::runF32<f16_t>(const f16_t *, const f16_t *, float *,
                                        float *) const;

void prepareMatmuls(int threads) {
  for (MatmulSite *site : sitesOf<MatmulSite>())
    site->prepare(threads);
}

std::string matmulSummary() {
  const auto &all = sitesOf<MatmulSite>();
  return all.empty()
             ? ""
             : "16-bit matrix products: " + sitesSummary(all, "widened sgemm");
}

} // namespace mnemo::cpu
