//===- AttentionCudnn.cpp - Fused attention through cuDNN's graph API -----===//
//
// Builds the SDPA operation graphs (AttentionCudnn.h) with cuDNN's backend
// descriptors, asks its heuristics for engines and keeps the first plan
// that finalizes. A graph is offered in a few forms (with and without the
// F16x16 reordering of the 16-bit probabilities, the query gradient
// accumulated in f32 or written directly, the random-number node present
// at p = 0 or left out) because cuDNN versions recognise different ones;
// the form taken is reported.
//
// Host code only: the kernels are cuDNN's.
//
//===----------------------------------------------------------------------===//

#include "lang/ops/attention/AttentionCudnn.h"
#include "lang/ops/attention/AttentionFormulas.h"

#include <cuda_runtime_api.h>

#include <array>
#include <cmath>
#include <initializer_list>
#include <utility>

namespace mnemo::attention {

namespace {

using Dims = std::array<int64_t, 4>;

/// The tensors' unique ids in the variant pack; virtual tensors count up
/// from kFirstVirtual.
enum TensorId : int64_t {
  kQuery = 1,
  kKeyTransposed,
  kValue,
  kOutput,
  kStats,
  kScale,
  kMaskValue,
  kSeed,
  kOffset,
  kDropoutScale,
  kGradOutput,
  kGradQuery,
  kGradKey,
  kGradValue,
  kRowDot,
  kGradQueryAccumulator,
  kKeepProbability,
  kValueTransposed,
  kFirstVirtual = 100
};

/// One form of a graph: what cuDNN versions differ on.
struct GraphForm {
  /// F16x16 reordering on the 16-bit probabilities and the accumulator
  /// (cuDNN 8.9's fused engines asked for it).
  bool reorder;
  /// The random-number node even without dropout (Bernoulli(1)).
  bool alwaysDropout;
  /// The query gradient through an f32 accumulator and an identity.
  bool accumulate;
  const char *name;
};

std::string statusText(cudnnStatus_t status) {
  char message[512] = {0};
  cudnnGetLastErrorString(message, sizeof(message));
  std::string text = cudnnGetErrorString(status);
  if (message[0])
    text += std::string(" (") + message + ")";
  return text;
}

} // namespace

/// Owns the descriptors of one graph while it is built; the first failing
/// call is remembered and every later one is skipped.
struct CudnnGraphBuilder {
  cudnnHandle_t handle;
  const CudnnAttentionShape &s;
  GraphForm form;
  std::vector<cudnnBackendDescriptor_t> owned;
  std::vector<cudnnBackendDescriptor_t> ops;
  std::string error;
  int64_t nextVirtual = kFirstVirtual;

  CudnnGraphBuilder(cudnnHandle_t handle, const CudnnAttentionShape &shape,
                    GraphForm form)
      : handle(handle), s(shape), form(form) {}
  ~CudnnGraphBuilder() {
    for (cudnnBackendDescriptor_t d : owned)
      cudnnBackendDestroyDescriptor(d);
  }

  bool ok() const { return error.empty(); }

  void check(cudnnStatus_t status, const char *what) {
    if (status != CUDNN_STATUS_SUCCESS && error.empty())
      error = std::string(what) + ": " + statusText(status);
  }

  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type,
                                const char *what) {
    cudnnBackendDescriptor_t d = nullptr;
    if (!ok())
      return nullptr;
    check(cudnnBackendCreateDescriptor(type, &d), what);
    if (d)
      owned.push_back(d);
    return d;
  }

  void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
           cudnnBackendAttributeType_t type, int64_t count, const void *value,
           const char *what) {
    if (ok())
      check(cudnnBackendSetAttribute(d, name, type, count, value), what);
  }

  void finalize(cudnnBackendDescriptor_t d, const char *what) {
    if (ok())
      check(cudnnBackendFinalize(d), what);
  }

  /// A 4-D tensor; `byValue` scalars are host values in the variant pack.
  cudnnBackendDescriptor_t tensor(int64_t id, cudnnDataType_t type, Dims dims,
                                  Dims strides, bool isVirtual,
                                  bool byValue = false, bool reorder = false) {
    cudnnBackendDescriptor_t t =
        make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor descriptor");
    int64_t alignment = 16;
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &id, "tensor id");
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type,
        "tensor type");
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(),
        "tensor dimensions");
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(),
        "tensor strides");
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment,
        "tensor alignment");
    set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &isVirtual,
        "tensor virtual");
    set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byValue,
        "tensor by value");
    if (reorder && form.reorder) {
      cudnnBackendTensorReordering_t mode = CUDNN_TENSOR_REORDERING_F16x16;
      set(t, CUDNN_ATTR_TENSOR_REORDERING_MODE,
          CUDNN_TYPE_TENSOR_REORDERING_MODE, 1, &mode, "tensor reordering");
    }
    finalize(t, "tensor");
    return t;
  }

  /// A virtual tensor of scores' shape [b, h, rows, cols], packed.
  cudnnBackendDescriptor_t virtualTensor(cudnnDataType_t type, Dims dims,
                                         bool reorder = false) {
    Dims strides = packed(dims);
    return tensor(nextVirtual++, type, dims, strides, true, false, reorder);
  }

  static Dims packed(Dims d) {
    return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
  }

  cudnnBackendDescriptor_t scalar(int64_t id, cudnnDataType_t type,
                                  bool byValue) {
    return tensor(id, type, {1, 1, 1, 1}, {1, 1, 1, 1}, false, byValue);
  }

  /// An operation node of the graph, its tensors and descriptors set by
  /// attribute (null ones left out).
  void operation(cudnnBackendDescriptorType_t type,
                 std::initializer_list<std::pair<cudnnBackendAttributeName_t,
                                                 cudnnBackendDescriptor_t>>
                     operands,
                 const char *what) {
    cudnnBackendDescriptor_t op = make(type, what);
    for (const auto &[name, value] : operands)
      if (value)
        set(op, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value, what);
    finalize(op, what);
    ops.push_back(op);
  }

  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y,
                 cudnnBackendDescriptor_t t = nullptr, int64_t axis = -1,
                 cudnnDataType_t precision = CUDNN_DATA_FLOAT) {
    cudnnBackendDescriptor_t pw =
        make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise descriptor");
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode,
        "pointwise mode");
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision,
        "pointwise precision");
    if (axis >= 0)
      set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis,
          "pointwise axis");
    finalize(pw, "pointwise descriptor");
    operation(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw},
               {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x},
               {CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b},
               {CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t},
               {CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y}},
              "pointwise operation");
  }

  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
              cudnnBackendDescriptor_t c) {
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t desc =
        make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul descriptor");
    set(desc, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute,
        "matmul compute type");
    finalize(desc, "matmul descriptor");
    operation(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, a},
               {CUDNN_ATTR_OPERATION_MATMUL_BDESC, b},
               {CUDNN_ATTR_OPERATION_MATMUL_CDESC, c},
               {CUDNN_ATTR_OPERATION_MATMUL_DESC, desc}},
              "matmul operation");
  }

  void reduction(cudnnReduceTensorOp_t kind, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t y) {
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t desc =
        make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction descriptor");
    set(desc, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE,
        1, &kind, "reduction operator");
    set(desc, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute,
        "reduction compute type");
    finalize(desc, "reduction descriptor");
    operation(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x},
               {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y},
               {CUDNN_ATTR_OPERATION_REDUCTION_DESC, desc}},
              "reduction operation");
  }

  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    operation(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x},
               {CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y}},
              "reshape operation");
  }

  /// The Bernoulli(1 - p) keep mask of the scores' shape, as f32.
  cudnnBackendDescriptor_t dropoutMask(Dims scores) {
    cudnnBackendDescriptor_t seed = scalar(kSeed, CUDNN_DATA_INT64, false);
    cudnnBackendDescriptor_t offset = scalar(kOffset, CUDNN_DATA_INT64, false);
    cudnnBackendDescriptor_t mask = virtualTensor(CUDNN_DATA_FLOAT, scores);
    cudnnRngDistribution_t distribution = CUDNN_RNG_DISTRIBUTION_BERNOULLI;
    double keep = 1.0 - s.dropoutP;
    cudnnBackendDescriptor_t desc =
        make(CUDNN_BACKEND_RNG_DESCRIPTOR, "rng descriptor");
    set(desc, CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, 1,
        &distribution, "rng distribution");
    set(desc, CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, 1,
        &keep, "rng probability");
    finalize(desc, "rng descriptor");
    operation(CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_RNG_YDESC, mask},
               {CUDNN_ATTR_OPERATION_RNG_SEED, seed},
               {CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, offset},
               {CUDNN_ATTR_OPERATION_RNG_DESC, desc}},
              "rng operation");
    return mask;
  }

  bool dropout() const { return s.dropoutP > 0 || form.alwaysDropout; }

  Dims scoreDims() const { return {s.batch, s.heads, s.queries, s.keys}; }
  Dims rowDims() const { return {s.batch, s.heads, s.queries, 1}; }

  cudnnBackendDescriptor_t query() {
    Dims d{s.batch, s.heads, s.queries, s.headDim};
    return tensor(kQuery, s.type, d, packed(d), false);
  }
  /// K as [b, hk, d, skv]: the packed key with its last two strides
  /// swapped.
  cudnnBackendDescriptor_t keyTransposed() {
    Dims strides{s.kvHeads * s.keys * s.headDim, s.keys * s.headDim, 1,
                 s.headDim};
    return tensor(kKeyTransposed, s.type,
                  {s.batch, s.kvHeads, s.headDim, s.keys}, strides, false);
  }
  cudnnBackendDescriptor_t value() {
    Dims d{s.batch, s.kvHeads, s.keys, s.valueDim};
    return tensor(kValue, s.type, d, packed(d), false);
  }
  cudnnBackendDescriptor_t output(int64_t id) {
    Dims d{s.batch, s.heads, s.queries, s.valueDim};
    return tensor(id, s.type, d, packed(d), false);
  }

  /// Scores: Q K^T * scale, the causal rule as a select of -inf.
  cudnnBackendDescriptor_t scores(cudnnBackendDescriptor_t q,
                                  cudnnBackendDescriptor_t kt,
                                  cudnnBackendDescriptor_t scale,
                                  cudnnBackendDescriptor_t maskValue) {
    Dims sd = scoreDims();
    cudnnBackendDescriptor_t product = virtualTensor(CUDNN_DATA_FLOAT, sd);
    matmul(q, kt, product);
    cudnnBackendDescriptor_t scaled = virtualTensor(CUDNN_DATA_FLOAT, sd);
    pointwise(CUDNN_POINTWISE_MUL, product, scale, scaled);
    if (!s.causal)
      return scaled;
    cudnnBackendDescriptor_t row = virtualTensor(CUDNN_DATA_FLOAT, sd);
    cudnnBackendDescriptor_t column = virtualTensor(CUDNN_DATA_FLOAT, sd);
    cudnnBackendDescriptor_t visible = virtualTensor(CUDNN_DATA_BOOLEAN, sd);
    cudnnBackendDescriptor_t masked = virtualTensor(CUDNN_DATA_FLOAT, sd);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, nullptr, row, nullptr, 2);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, nullptr, column, nullptr, 3);
    pointwise(CUDNN_POINTWISE_CMP_GE, row, column, visible, nullptr, -1,
              CUDNN_DATA_BOOLEAN);
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, scaled, maskValue, masked,
              visible);
    return masked;
  }

  /// cuDNN's global index of a configuration's engine, for the report.
  std::string engineIndex(cudnnBackendDescriptor_t config) {
    cudnnBackendDescriptor_t engine =
        make(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
    int64_t n = 0, index = -1;
    if (engine && cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                           &engine) == CUDNN_STATUS_SUCCESS)
      cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                               CUDNN_TYPE_INT64, 1, &n, &index);
    return std::to_string(index);
  }

  /// The graph, its heuristics' engines and the first plan that finalizes.
  cudnnBackendDescriptor_t plan(int64_t &workspace, std::string &engine) {
    if (!ok())
      return nullptr;
    cudnnBackendDescriptor_t graph =
        make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
        int64_t(ops.size()), ops.data(), "graph operations");
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle,
        "graph handle");
    finalize(graph, "operation graph");
    for (cudnnBackendHeurMode_t mode :
         {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      if (!ok())
        return nullptr;
      cudnnBackendDescriptor_t heuristics =
          make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics");
      set(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, "heuristics graph");
      set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
          &mode, "heuristics mode");
      finalize(heuristics, "heuristics");
      int64_t count = 0;
      if (ok())
        check(cudnnBackendGetAttribute(
                  heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                  CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
              "heuristics results");
      if (!ok())
        return nullptr;
      std::vector<cudnnBackendDescriptor_t> configs;
      for (int64_t i = 0; i < count; ++i)
        configs.push_back(
            make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config"));
      int64_t returned = 0;
      if (count > 0 && ok())
        check(cudnnBackendGetAttribute(heuristics,
                                       CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                       &returned, configs.data()),
              "heuristics results");
      std::string refusals;
      for (int64_t i = 0; ok() && i < returned; ++i) {
        cudnnBackendDescriptor_t candidate = nullptr;
        if (cudnnBackendCreateDescriptor(
                CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &candidate) !=
            CUDNN_STATUS_SUCCESS)
          continue;
        cudnnStatus_t status = cudnnBackendSetAttribute(
            candidate, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
            &handle);
        if (status == CUDNN_STATUS_SUCCESS)
          status = cudnnBackendSetAttribute(
              candidate, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &configs[i]);
        if (status == CUDNN_STATUS_SUCCESS)
          status = cudnnBackendFinalize(candidate);
        if (status == CUDNN_STATUS_SUCCESS) {
          int64_t bytes = 0, n = 0;
          cudnnBackendGetAttribute(candidate,
                                   CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, &n, &bytes);
          workspace = bytes;
          engine = "engine " + engineIndex(configs[i]) + ", candidate " +
                   std::to_string(i + 1) + " of " + std::to_string(returned) +
                   (mode == CUDNN_HEUR_MODE_A ? " (heuristics A)"
                                              : " (fallback heuristics)");
          return candidate;
        }
        refusals = statusText(status);
        cudnnBackendDestroyDescriptor(candidate);
      }
      if (ok() && mode == CUDNN_HEUR_MODE_FALLBACK)
        error = "no engine (" + std::to_string(returned) + " candidates" +
                (refusals.empty() ? "" : ", last: " + refusals) + ")";
    }
    return nullptr;
  }
};

namespace {

constexpr GraphForm kForms[] = {
    {false, false, false, "plain"},
    {false, false, true, "accumulated"},
    {true, true, true, "reordered, random-number node, accumulated"},
    {false, true, true, "random-number node, accumulated"},
};

} // namespace

/// Tries every form; `build` adds a form's operations to the builder.
std::unique_ptr<CudnnAttentionPlan> CudnnAttentionPlan::planFirstForm(
    cudnnHandle_t handle, const CudnnAttentionShape &shape, std::string &why,
    void (*build)(CudnnGraphBuilder &)) {
  why.clear();
  for (const GraphForm &form : kForms) {
    CudnnGraphBuilder builder(handle, shape, form);
    std::unique_ptr<CudnnAttentionPlan> plan(new CudnnAttentionPlan());
    plan->shape = shape;
    plan->usesAccumulator = form.accumulate;
    plan->usesRandom = shape.dropoutP > 0 || form.alwaysDropout;
    plan->scaleValue = shape.scale;
    plan->maskValue = -1.0e30f;
    plan->dropoutScale = float(1.0 / (1.0 - shape.dropoutP));
    plan->keepProbability = float(1.0 - shape.dropoutP);
    build(builder);
    std::string engine;
    plan->plan = builder.plan(plan->workspace, engine);
    if (plan->plan) {
      plan->form = std::string(form.name) + " graph, " + engine;
      return plan;
    }
    why +=
        std::string(why.empty() ? "" : "; ") + form.name + ": " + builder.error;
  }
  return nullptr;
}

std::unique_ptr<CudnnAttentionPlan> CudnnAttentionPlan::forward(
    cudnnHandle_t handle, const CudnnAttentionShape &shape, std::string &why) {
  return planFirstForm(handle, shape, why, [](CudnnGraphBuilder &g) {
    const CudnnAttentionShape &s = g.s;
    Dims sd = g.scoreDims(), rd = g.rowDims();
    cudnnBackendDescriptor_t scale = g.scalar(kScale, CUDNN_DATA_FLOAT, true);
    cudnnBackendDescriptor_t maskValue =
        g.scalar(kMaskValue, CUDNN_DATA_FLOAT, true);
    cudnnBackendDescriptor_t scores =
        g.scores(g.query(), g.keyTransposed(), scale, maskValue);
    // Softmax with its statistics: max, exp(x - max), sum, max + log(sum).
    cudnnBackendDescriptor_t rowMax = g.virtualTensor(CUDNN_DATA_FLOAT, rd);
    cudnnBackendDescriptor_t shifted = g.virtualTensor(CUDNN_DATA_FLOAT, sd);
    cudnnBackendDescriptor_t exps = g.virtualTensor(CUDNN_DATA_FLOAT, sd);
    cudnnBackendDescriptor_t rowSum = g.virtualTensor(CUDNN_DATA_FLOAT, rd);
    cudnnBackendDescriptor_t logSum = g.virtualTensor(CUDNN_DATA_FLOAT, rd);
    cudnnBackendDescriptor_t stats = g.tensor(
        kStats, CUDNN_DATA_FLOAT, rd, CudnnGraphBuilder::packed(rd), false);
    g.reduction(CUDNN_REDUCE_TENSOR_MAX, scores, rowMax);
    g.pointwise(CUDNN_POINTWISE_SUB, scores, rowMax, shifted);
    g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, exps);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, exps, rowSum);
    g.pointwise(CUDNN_POINTWISE_LOG, rowSum, nullptr, logSum);
    g.pointwise(CUDNN_POINTWISE_ADD, rowMax, logSum, stats);
    cudnnBackendDescriptor_t probabilities;
    if (g.dropout()) {
      probabilities = g.virtualTensor(CUDNN_DATA_FLOAT, sd, true);
      g.pointwise(CUDNN_POINTWISE_DIV, exps, rowSum, probabilities);
      cudnnBackendDescriptor_t keep = g.dropoutMask(sd);
      cudnnBackendDescriptor_t kept = g.virtualTensor(s.type, sd, true);
      g.pointwise(CUDNN_POINTWISE_MUL, probabilities, keep, kept);
      cudnnBackendDescriptor_t dropoutScale =
          g.scalar(kDropoutScale, CUDNN_DATA_FLOAT, true);
      probabilities = g.virtualTensor(s.type, sd);
      g.pointwise(CUDNN_POINTWISE_MUL, kept, dropoutScale, probabilities);
    } else {
      // Without dropout the probabilities go to the second matmul in the
      // inputs' 16-bit type (cuDNN's frontend does the same).
      probabilities = g.virtualTensor(s.type, sd, true);
      g.pointwise(CUDNN_POINTWISE_DIV, exps, rowSum, probabilities);
    }
    g.matmul(probabilities, g.value(), g.output(kOutput));
  });
}

std::unique_ptr<CudnnAttentionPlan> CudnnAttentionPlan::backward(
    cudnnHandle_t handle, const CudnnAttentionShape &shape, std::string &why) {
  return planFirstForm(handle, shape, why, [](CudnnGraphBuilder &g) {
    const CudnnAttentionShape &s = g.s;
    Dims sd = g.scoreDims(), rd = g.rowDims();
    Dims transposedScores{s.batch, s.heads, s.keys, s.queries};
    Dims transposedStrides{s.heads * s.queries * s.keys, s.queries * s.keys, 1,
                           s.keys};
    Dims od{s.batch, s.heads, s.queries, s.valueDim};
    cudnnBackendDescriptor_t scale = g.scalar(kScale, CUDNN_DATA_FLOAT, true);
    cudnnBackendDescriptor_t maskValue =
        g.scalar(kMaskValue, CUDNN_DATA_FLOAT, true);
    cudnnBackendDescriptor_t gradOutput = g.output(kGradOutput);
    cudnnBackendDescriptor_t output = g.output(kOutput);
    // D = rowsum(dO * O) * (1 - p): the softmax backward's row term.
    cudnnBackendDescriptor_t product = g.virtualTensor(CUDNN_DATA_FLOAT, od);
    g.pointwise(CUDNN_POINTWISE_MUL, gradOutput, output, product);
    cudnnBackendDescriptor_t rowSum = g.virtualTensor(CUDNN_DATA_FLOAT, rd);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, product, rowSum);
    cudnnBackendDescriptor_t keepProbability =
        g.scalar(kKeepProbability, CUDNN_DATA_FLOAT, true);
    cudnnBackendDescriptor_t rowDot = g.tensor(
        kRowDot, CUDNN_DATA_FLOAT, rd, CudnnGraphBuilder::packed(rd), false);
    g.pointwise(CUDNN_POINTWISE_MUL, rowSum, keepProbability, rowDot);
    // P recomputed from the statistics.
    cudnnBackendDescriptor_t q = g.query();
    cudnnBackendDescriptor_t kt = g.keyTransposed();
    cudnnBackendDescriptor_t scores = g.scores(q, kt, scale, maskValue);
    cudnnBackendDescriptor_t stats = g.tensor(
        kStats, CUDNN_DATA_FLOAT, rd, CudnnGraphBuilder::packed(rd), false);
    cudnnBackendDescriptor_t shifted = g.virtualTensor(CUDNN_DATA_FLOAT, sd);
    g.pointwise(CUDNN_POINTWISE_SUB, scores, stats, shifted);
    cudnnBackendDescriptor_t probabilities =
        g.virtualTensor(CUDNN_DATA_FLOAT, sd);
    g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, probabilities);
    // dV = dropped(P)^T dO.
    cudnnBackendDescriptor_t keep = nullptr, dropoutScale = nullptr;
    cudnnBackendDescriptor_t dropped;
    if (g.dropout()) {
      keep = g.dropoutMask(sd);
      cudnnBackendDescriptor_t kept = g.virtualTensor(s.type, sd, true);
      g.pointwise(CUDNN_POINTWISE_MUL, probabilities, keep, kept);
      dropoutScale = g.scalar(kDropoutScale, CUDNN_DATA_FLOAT, true);
      dropped = g.virtualTensor(s.type, sd);
      g.pointwise(CUDNN_POINTWISE_MUL, kept, dropoutScale, dropped);
    } else {
      dropped = probabilities;
    }
    cudnnBackendDescriptor_t droppedTransposed = g.tensor(
        g.nextVirtual++, s.type, transposedScores, transposedStrides, true);
    g.reshape(dropped, droppedTransposed);
    Dims kvd{s.batch, s.kvHeads, s.keys, s.valueDim};
    g.matmul(droppedTransposed, gradOutput,
             g.tensor(kGradValue, s.type, kvd, CudnnGraphBuilder::packed(kvd),
                      false));
    // dS = P * (dropout(dO V^T) - D) * scale.
    Dims vtStrides{s.kvHeads * s.keys * s.valueDim, s.keys * s.valueDim, 1,
                   s.valueDim};
    cudnnBackendDescriptor_t vt =
        g.tensor(kValueTransposed, s.type,
                 {s.batch, s.kvHeads, s.valueDim, s.keys}, vtStrides, false);
    cudnnBackendDescriptor_t gradDropped =
        g.virtualTensor(CUDNN_DATA_FLOAT, sd);
    g.matmul(gradOutput, vt, gradDropped);
    cudnnBackendDescriptor_t gradKept = gradDropped;
    if (keep) {
      gradKept = g.virtualTensor(CUDNN_DATA_FLOAT, sd);
      g.pointwise(CUDNN_POINTWISE_MUL, gradDropped, keep, gradKept);
    }
    cudnnBackendDescriptor_t centred = g.virtualTensor(CUDNN_DATA_FLOAT, sd);
    g.pointwise(CUDNN_POINTWISE_SUB, gradKept, rowDot, centred);
    cudnnBackendDescriptor_t gradScores = g.virtualTensor(CUDNN_DATA_FLOAT, sd);
    g.pointwise(CUDNN_POINTWISE_MUL, centred, probabilities, gradScores);
    if (dropoutScale) {
      cudnnBackendDescriptor_t rescaled = g.virtualTensor(CUDNN_DATA_FLOAT, sd);
      g.pointwise(CUDNN_POINTWISE_MUL, gradScores, dropoutScale, rescaled);
      gradScores = rescaled;
    }
    cudnnBackendDescriptor_t gradScaled = g.virtualTensor(CUDNN_DATA_FLOAT, sd);
    g.pointwise(CUDNN_POINTWISE_MUL, gradScores, scale, gradScaled);
    // dQ = dS K (K from K^T by a reshape), dK = dS^T Q.
    Dims kd{s.batch, s.kvHeads, s.keys, s.headDim};
    cudnnBackendDescriptor_t key = g.tensor(
        g.nextVirtual++, s.type, kd, CudnnGraphBuilder::packed(kd), true);
    g.reshape(kt, key);
    Dims qd{s.batch, s.heads, s.queries, s.headDim};
    cudnnBackendDescriptor_t gradQuery =
        g.tensor(kGradQuery, s.type, qd, CudnnGraphBuilder::packed(qd), false);
    if (g.form.accumulate) {
      cudnnBackendDescriptor_t accumulator =
          g.tensor(kGradQueryAccumulator, CUDNN_DATA_FLOAT, qd,
                   CudnnGraphBuilder::packed(qd), false, false, true);
      g.matmul(gradScaled, key, accumulator);
      g.pointwise(CUDNN_POINTWISE_IDENTITY, accumulator, nullptr, gradQuery);
    } else {
      g.matmul(gradScaled, key, gradQuery);
    }
    cudnnBackendDescriptor_t gradScaledTransposed =
        g.tensor(g.nextVirtual++, CUDNN_DATA_FLOAT, transposedScores,
                 transposedStrides, true);
    g.reshape(gradScaled, gradScaledTransposed);
    g.matmul(
        gradScaledTransposed, q,
        g.tensor(kGradKey, s.type, kd, CudnnGraphBuilder::packed(kd), false));
  });
}

int64_t CudnnAttentionPlan::scratchBytes(const CudnnAttentionShape &s) {
  return cudnnScratchBytes(s.batch * s.heads * s.queries, s.headDim);
}

int64_t CudnnAttentionPlan::rowDotBytes(int64_t rows) {
  return cudnnRowDotBytes(rows);
}

CudnnAttentionPlan::~CudnnAttentionPlan() {
  if (variantPack)
    cudnnBackendDestroyDescriptor(variantPack);
  if (plan)
    cudnnBackendDestroyDescriptor(plan);
}

cudnnStatus_t
CudnnAttentionPlan::execute(cudnnHandle_t handle,
                            const std::vector<std::pair<int64_t, void *>> &data,
                            void *workspacePointer) {
  // The last pack is kept while the pointers stay the same (one site a
  // problem). The executor shares a plan among the sites of one problem
  // (every layer of a GPT), whose pointers differ, so there the pack is
  // rebuilt at each call: host time in an eager step only, since a
  // captured step replays cuDNN's kernels without it. A pack per site
  // would remove that; not done.
  std::vector<void *> pointers;
  for (const auto &entry : data)
    pointers.push_back(entry.second);
  if (!variantPack || pointers != packPointers ||
      workspacePointer != packWorkspace) {
    if (variantPack)
      cudnnBackendDestroyDescriptor(variantPack);
    variantPack = nullptr;
    std::vector<int64_t> ids;
    for (const auto &entry : data)
      ids.push_back(entry.first);
    cudnnStatus_t status = cudnnBackendCreateDescriptor(
        CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &variantPack);
    if (status == CUDNN_STATUS_SUCCESS)
      status = cudnnBackendSetAttribute(
          variantPack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
          int64_t(ids.size()), ids.data());
    if (status == CUDNN_STATUS_SUCCESS)
      status = cudnnBackendSetAttribute(
          variantPack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
          CUDNN_TYPE_VOID_PTR, int64_t(pointers.size()), pointers.data());
    if (status == CUDNN_STATUS_SUCCESS)
      status = cudnnBackendSetAttribute(
          variantPack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR,
          1, &workspacePointer);
    if (status == CUDNN_STATUS_SUCCESS)
      status = cudnnBackendFinalize(variantPack);
    if (status != CUDNN_STATUS_SUCCESS) {
      if (variantPack)
        cudnnBackendDestroyDescriptor(variantPack);
      variantPack = nullptr;
      return status;
    }
    packPointers = pointers;
    packWorkspace = workspacePointer;
  }
  return cudnnBackendExecute(handle, plan, variantPack);
}

cudnnStatus_t CudnnAttentionPlan::run(cudnnHandle_t handle, cudaStream_t stream,
                                      const CudnnAttentionForwardArgs &a,
                                      void *workspacePointer) {
  cudnnStatus_t status = cudnnSetStream(handle, stream);
  if (status != CUDNN_STATUS_SUCCESS)
    return status;
  std::vector<std::pair<int64_t, void *>> data = {
      {kQuery, const_cast<void *>(a.query)},
      {kKeyTransposed, const_cast<void *>(a.key)},
      {kValue, const_cast<void *>(a.value)},
      {kOutput, a.output},
      {kStats, a.logSumExp},
      {kScale, &scaleValue},
  };
  if (shape.causal)
    data.push_back({kMaskValue, &maskValue});
  if (usesRandom) {
    data.push_back({kSeed, const_cast<int64_t *>(a.seed)});
    data.push_back({kOffset, const_cast<int64_t *>(a.offset)});
    data.push_back({kDropoutScale, &dropoutScale});
  }
  return execute(handle, data, workspacePointer);
}

cudnnStatus_t CudnnAttentionPlan::run(cudnnHandle_t handle, cudaStream_t stream,
                                      const CudnnAttentionBackwardArgs &a,
                                      void *workspacePointer) {
  cudnnStatus_t status = cudnnSetStream(handle, stream);
  if (status != CUDNN_STATUS_SUCCESS)
    return status;
  if (usesAccumulator &&
      cudaMemsetAsync(
          a.queryGradAccumulator, 0,
          size_t(shape.batch * shape.heads * shape.queries * shape.headDim * 4),
          stream) != cudaSuccess)
    return CUDNN_STATUS_EXECUTION_FAILED;
  std::vector<std::pair<int64_t, void *>> data = {
      {kQuery, const_cast<void *>(a.query)},
      {kKeyTransposed, const_cast<void *>(a.key)},
      {kValueTransposed, const_cast<void *>(a.value)},
      {kOutput, const_cast<void *>(a.output)},
      {kStats, const_cast<float *>(a.logSumExp)},
      {kGradOutput, const_cast<void *>(a.gradOutput)},
      {kGradQuery, a.gradQuery},
      {kGradKey, a.gradKey},
      {kGradValue, a.gradValue},
      {kRowDot, a.rowDot},
      {kScale, &scaleValue},
      {kKeepProbability, &keepProbability},
  };
  if (usesAccumulator)
    data.push_back({kGradQueryAccumulator, a.queryGradAccumulator});
  if (shape.causal)
    data.push_back({kMaskValue, &maskValue});
  if (usesRandom) {
    data.push_back({kSeed, const_cast<int64_t *>(a.seed)});
    data.push_back({kOffset, const_cast<int64_t *>(a.offset)});
    data.push_back({kDropoutScale, &dropoutScale});
  }
  return execute(handle, data, workspacePointer);
}

} // namespace mnemo::attention
