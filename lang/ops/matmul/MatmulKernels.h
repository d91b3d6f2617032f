//===- MatmulKernels.h - 16-bit matrix products on the CPU ------*- C++ -*-===//
//
// The CPU side of a matrix product on 16-bit storage that generated code
// calls (the emission model, MatmulEmission.cpp, includes this header; the
// definitions are in MatmulSiteKernels.cpp, in the trainer's library).
// f32 products call OpenBLAS's sgemm directly (runtime/cpu/Kernels.h).
// Plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_MATMUL_MATMULKERNELS_H
#define MNEMO_LANG_OPS_MATMUL_MATMULKERNELS_H

#include <cstdint>
#include <memory>
#include <string>

namespace mnemo::cpu {

/// The 16-bit storage type of a product's operands and result.
enum class MatmulData : int { BF16 = 1, F16 = 2 };

/// A product C = op(A) op(B) of row-major matrices, as gemmHalf takes it:
/// op(A) is [m, k], op(B) [k, n], C [m, n] with leading dimension ldc.
struct MatmulShape {
  bool transA, transB;
  int64_t m, n, k, lda, ldb, ldc;
  /// C in f32 instead of the operands' type, and C += op(A) op(B) instead
  /// of C =: the fused classifier's products (LossesKernels.h), which read
  /// their results in f32 and sum a gradient over chunks. Only oneDNN runs
  /// these (runF32); where it does not, their kernel widens for sgemm.
  bool f32Result = false, accumulate = false;
  /// The threads' parts split C's columns, not its rows: each part packs
  /// only its columns of op(B) into its scratchpad, where a product of few
  /// rows and a large op(B) would pack all of it once per part.
  bool splitColumns = false;
};

/// One 16-bit matrix product of the generated code (a namespace-scope
/// object there), set up before the first step by prepareMatmuls. With
/// oneDNN (a trainer built where libdnnl-dev is installed): oneDNN's
/// matmul primitive on the 16-bit operands as they lie in the plan,
/// accumulating in f32 and rounding C once, where this CPU computes the
/// type natively (bf16 with AVX512_BF16 or AMX: about twice sgemm's speed
/// on widened operands; emulated bf16 was half of it). C's rows are split
/// over the step's threads, each part single-threaded, its scratchpad in
/// the op's planned workspace. Otherwise (no native kernel, a scratchpad
/// that does not fit, MNEMO_ONEDNN=0 in the environment) gemmHalf:
/// widened tiles and sgemm. Either way a step uses exactly the plan's
/// memory.
class MatmulSite {
public:
  MatmulSite(const MatmulShape &shape, MatmulData data, int64_t workspaceBytes);
  ~MatmulSite();
  MatmulSite(const MatmulSite &) = delete;
  MatmulSite &operator=(const MatmulSite &) = delete;

  /// Sets up oneDNN's primitives for `threads` parts; until then the site
  /// runs gemmHalf.
  void prepare(int threads);

  /// C = op(A) op(B) on the site's storage type (T: bf16_t or f16_t);
  /// `workspace` holds workspaceBytes.
  template <typename T>
  void run(const T *a, const T *b, T *c, float *workspace) const;

  /// The same into an f32 C (shape.f32Result), on oneDNN only: a site
  /// that does not use it (usesOneDnn()) must not be run.
  template <typename T>
  void runF32(const T *a, const T *b, float *c, float *workspace) const;

  /// oneDNN's implementation ("brg:avx512_core_bf16"), or why gemmHalf
  /// runs.
  const std::string &implementation() const { return how; }
  bool usesOneDnn() const { return dnn != nullptr; }

  struct OneDnn;

private:
  /// oneDNN's product on the step's buffers; false without oneDNN.
  bool execute(const void *a, const void *b, void *c, float *workspace) const;

  MatmulShape shape;
  MatmulData data;
  int64_t workspaceBytes;
  std::string how;
  std::unique_ptr<OneDnn> dnn;
};

/// Sets up every 16-bit product of the program for the step's threads.
/// The trainer and the inference program call it once, after setting the
/// thread count and before the first step.
void prepareMatmuls(int threads);

/// What the program's 16-bit products run, for the trainer's start-up
/// lines: "16-bit matrix products: oneDNN at 40 of 40 sites (...)", or
/// empty when it has none.
std::string matmulSummary();

} // namespace mnemo::cpu

#endif // MNEMO_LANG_OPS_MATMUL_MATMULKERNELS_H
