//===- AttentionCudnn.h - Fused attention on cuDNN's graph API --*- C++ -*-===//
//
// cuDNN's flash-attention engines (the fused SDPA forward and backward of
// cuDNN 8.9 and later) for 16-bit attention on the GPU: the CUDA executor
// plans one per attention site at the first step and runs it on the step's
// stream; where cuDNN has no engine for a site (a mask operand, an f32
// problem, a head dimension it refuses) the site runs Mnemo's own kernels
// (AttentionKernels.cuh). The graphs are the operation graphs cuDNN's
// frontend describes for SDPA (matmul, scale, causal mask, softmax with its
// statistics, Philox dropout, matmul), built with the backend API so that
// no header-only frontend is needed.
//
// Layouts are Mnemo's: q [b, h, sq, d], k [b, hk, skv, d], v [b, hk, skv,
// dv], o [b, h, sq, dv], packed row-major; the statistics are the rows'
// natural-log log-sum-exp of the scaled, masked scores in f32, the same
// numbers Mnemo's kernels save (AttentionFormulas.h), so either backward
// can follow either forward.
//
// Dropout draws from cuDNN's Philox stream (seed and offset read from the
// device when the step runs), not from Mnemo's counter hash: the GPU keeps
// the same probabilities as the CPU in distribution, not element by
// element.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_ATTENTION_ATTENTIONCUDNN_H
#define MNEMO_LANG_OPS_ATTENTION_ATTENTIONCUDNN_H

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mnemo::attention {

struct CudnnGraphBuilder;

/// One attention problem as cuDNN sees it.
struct CudnnAttentionShape {
  int64_t batch, heads, kvHeads, queries, keys, headDim, valueDim;
  bool causal;
  float scale;
  double dropoutP;
  /// CUDNN_DATA_BFLOAT16 or CUDNN_DATA_HALF: the engines take 16-bit
  /// inputs only.
  cudnnDataType_t type;
};

/// The device tensors of a forward.
struct CudnnAttentionForwardArgs {
  const void *query, *key, *value;
  void *output;
  float *logSumExp;
  /// Philox seed and offset, one int64 each on the device.
  const int64_t *seed, *offset;
};

/// The device tensors of a backward. `rowDot` ([b, h, sq] f32) and
/// `queryGradAccumulator` ([b, h, sq, d] f32, zeroed by run()) are the
/// caller's scratch (scratchBytes()).
struct CudnnAttentionBackwardArgs {
  const void *query, *key, *value, *output;
  const float *logSumExp;
  const void *gradOutput;
  void *gradQuery, *gradKey, *gradValue;
  const int64_t *seed, *offset;
  float *rowDot, *queryGradAccumulator;
};

/// A finalized cuDNN execution plan for one site, with its variant pack
/// built at the first run (the planned buffers do not move).
class CudnnAttentionPlan {
public:
  /// The plan, or null with `why` saying what cuDNN answered for every
  /// form of the graph it was offered.
  static std::unique_ptr<CudnnAttentionPlan>
  forward(cudnnHandle_t handle, const CudnnAttentionShape &shape,
          std::string &why);
  static std::unique_ptr<CudnnAttentionPlan>
  backward(cudnnHandle_t handle, const CudnnAttentionShape &shape,
           std::string &why);

  /// The scratch a backward's arguments point into: the row dots and the
  /// f32 query-gradient accumulator.
  static int64_t scratchBytes(const CudnnAttentionShape &shape);
  /// Where the accumulator starts in that scratch.
  static int64_t rowDotBytes(int64_t rows);

  ~CudnnAttentionPlan();
  CudnnAttentionPlan(const CudnnAttentionPlan &) = delete;
  CudnnAttentionPlan &operator=(const CudnnAttentionPlan &) = delete;

  /// cuDNN's own workspace for this plan (bytes, may be 0).
  int64_t workspaceBytes() const { return workspace; }
  /// Which form of the graph cuDNN took, and the engine's name.
  const std::string &description() const { return form; }

  cudnnStatus_t run(cudnnHandle_t handle, cudaStream_t stream,
                    const CudnnAttentionForwardArgs &args, void *workspace);
  cudnnStatus_t run(cudnnHandle_t handle, cudaStream_t stream,
                    const CudnnAttentionBackwardArgs &args, void *workspace);

private:
  CudnnAttentionPlan() = default;
  static std::unique_ptr<CudnnAttentionPlan>
  planFirstForm(cudnnHandle_t handle, const CudnnAttentionShape &shape,
                std::string &why, void (*build)(CudnnGraphBuilder &));
  cudnnStatus_t execute(cudnnHandle_t handle,
                        const std::vector<std::pair<int64_t, void *>> &data,
                        void *workspace);

  friend struct CudnnGraphBuilder;
  CudnnAttentionShape shape{};
  cudnnBackendDescriptor_t plan = nullptr;
  cudnnBackendDescriptor_t variantPack = nullptr;
  std::vector<void *> packPointers;
  void *packWorkspace = nullptr;
  int64_t workspace = 0;
  std::string form;
  bool usesAccumulator = false;
  /// The graph draws a dropout mask (seed and offset in the pack).
  bool usesRandom = false;
  // By-value scalars: the variant pack points at them.
  float scaleValue = 1, maskValue = 0, dropoutScale = 1, keepProbability = 1;
};

} // namespace mnemo::attention

#endif // MNEMO_LANG_OPS_ATTENTION_ATTENTIONCUDNN_H
