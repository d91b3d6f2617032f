//===- MatmulEmission.cpp - Matrix products in the CPU and CUDA code ------===//
//
// The code generation models of matmul and batch_matmul, from the GEMM the
// step layouts see (StepLayout.h's GemmProblem: operands read through their
// strides as transposes and leading dimensions):
// - on the CPU, OpenBLAS sgemm (runtime/cpu/Kernels.h gemm, batchedGemm);
//   on 16-bit storage a MatmulSite (MatmulKernels.h: oneDNN's 16-bit
//   matmul, or gemmHalf widening in the workspace the op declares), or
//   batchedGemmHalf for a batch; a plain product of an untransposed,
//   contiguous lhs is one GEMM over all its rows;
// - on the GPU, one cuBLASLt call (CudaKernelContext::gemm): the batch
//   dimensions that every operand walks uniformly merge into a strided
//   batch, a second one becomes pointer tables, and a bias add (with a
//   ReLU) that the CUDA emitter let the product absorb is its epilogue.
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelContext.h"
#include "codegen/StepLayout.h"
#include "lang/MnemoOps.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;

namespace {

const char *boolean(bool value) { return value ? "true" : "false"; }

template <typename Op>
constexpr bool kBatched = std::is_same_v<Op, BatchMatmulOp>;

template <typename Op> LogicalResult emitCpu(Op op, CpuKernelContext &context) {
  constexpr bool batched = kBatched<Op>;
  bool ta = op.getTransposeLhs();
  FailureOr<GemmProblem> problem =
      context.gemmProblem(ta, op.getTransposeRhs());
  if (failed(problem))
    return failure();
  const Layout &a = problem->a, &c = problem->c;
  const GemmOperand &ga = problem->ga, &gb = problem->gb;
  int64_t m = problem->m, n = problem->n, k = problem->k;
  const Shape &batch = problem->batch;
  // f32 goes to sgemm; 16-bit storage to a site or batchedGemmHalf, with
  // the workspace the op declares and no alpha or beta.
  bool half = c.type.isHalf;
  int64_t workspaceBytes =
      half ? llvm::cast<CpuWorkspaceOpInterface>(*op).getCpuWorkspaceBytes()
           : 0;
  std::string workspace =
      half ? ", " + context.workspace(workspaceBytes) : std::string();
  auto arguments = [&](int64_t rows) {
    return llvm::formatv("{0}, {1}, {2}, {3}, {4}, {5}{6}, {7}, {8}, {9}, "
                         "{10}{11}, {12}{13}",
                         boolean(ga.transpose), boolean(gb.transpose), rows, n,
                         k, half ? "" : "1.0f, ", ga.pointer, ga.ld, gb.pointer,
                         gb.ld, half ? "" : "0.0f, ", c.pointer, n, workspace)
        .str();
  };
  // One product of `rows` rows: sgemm, or a 16-bit site set up before the
  // first step (oneDNN's 16-bit matmul where this CPU has a fast one, else
  // gemmHalf; MatmulKernels.h).
  auto single = [&](int64_t rows) -> std::string {
    if (!half)
      return "  gemm(" + arguments(rows) + ");\n";
    context.include("lang/ops/matmul/MatmulKernels.h");
    std::string site = context.fileScopeObject(
        "MatmulSite",
        llvm::formatv("MatmulShape{{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}, "
                      "MatmulData::{8}, {9}",
                      boolean(ga.transpose), boolean(gb.transpose), rows, n, k,
                      ga.ld, gb.ld, n, c.type.name == "bf16_t" ? "BF16" : "F16",
                      workspaceBytes)
            .str());
    return llvm::formatv("  {0}.run({1}, {2}, {3}{4});\n", site, ga.pointer,
                         gb.pointer, c.pointer, workspace);
  };
  // The rows of a contiguous, untransposed lhs are one matrix.
  if (!batched && !ta && a.isContiguous()) {
    context.out() << single(product(batch) * m);
    return success();
  }
  if (batch.empty()) {
    context.out() << single(m);
    return success();
  }
  if (batch.size() > 4)
    return context.error("more than four batch dimensions are not supported");
  Shape cStrides(c.strides.begin(), c.strides.end() - 2);
  Shape bStrides = batched ? gb.batchStrides : Shape(batch.size(), 0);
  context.out() << llvm::formatv(
      "  {{\n    static const BatchLayout batch = {{{0}, {{{1}}, {{{2}}, "
      "{{{3}}, {{{4}}};\n    {5}(batch, {6});\n  }\n",
      batch.size(), listOf(batch), listOf(ga.batchStrides), listOf(bStrides),
      listOf(cStrides), half ? "batchedGemmHalf" : "batchedGemm", arguments(m));
  return success();
}

/// cuBLASLt's name of a storage type (runtime/cuda/CudaModel.h DType).
StringRef dtypeOf(const CType &type) {
  return type.cast == "bf16" ? "BF16" : type.cast == "f16" ? "F16" : "F32";
}

template <typename Op>
LogicalResult emitCuda(Op op, CudaKernelContext &context) {
  constexpr bool batched = kBatched<Op>;
  bool ta = op.getTransposeLhs();
  FailureOr<GemmProblem> problem =
      context.gemmProblem(ta, op.getTransposeRhs());
  if (failed(problem))
    return failure();
  const Layout &a = problem->a, &b = problem->b, &c = problem->c;
  if (!a.region || !b.region)
    return context.error("a matrix product of a constant is not supported");
  Shape batch = problem->batch;
  Shape aStrides = problem->ga.batchStrides;
  Shape bStrides = batched ? problem->gb.batchStrides : Shape(batch.size(), 0);
  Shape cStrides(c.strides.begin(), c.strides.end() - 2);
  CudaGemm gemm;
  gemm.a = op.getLhs();
  gemm.b = op.getRhs();
  gemm.c = op.getResult();
  gemm.stridedOperands = true;
  gemm.transposeA = problem->ga.transpose;
  gemm.transposeB = problem->gb.transpose;
  gemm.m = problem->m;
  gemm.n = gemm.ldc = problem->n;
  gemm.k = problem->k;
  gemm.lda = problem->ga.ld;
  gemm.ldb = problem->gb.ld;
  gemm.type = dtypeOf(c.type);
  // The rows of a contiguous, untransposed lhs are one matrix.
  if (!batched && !ta && a.isContiguous()) {
    gemm.m *= product(batch);
    batch.clear();
  }
  // Batch dimensions that every operand walks uniformly merge into one
  // strided batch; what is left is an outer batch of pointer tables.
  Shape dims;
  std::vector<Shape> strides(3);
  for (size_t d = 0; d < batch.size(); ++d) {
    if (batch[d] == 1)
      continue;
    bool merge = !dims.empty() && strides[0].back() == aStrides[d] * batch[d] &&
                 strides[1].back() == bStrides[d] * batch[d] &&
                 strides[2].back() == cStrides[d] * batch[d];
    if (!merge) {
      dims.push_back(batch[d]);
      for (Shape &s : strides)
        s.push_back(0);
    } else {
      dims.back() *= batch[d];
    }
    strides[0].back() = aStrides[d];
    strides[1].back() = bStrides[d];
    strides[2].back() = cStrides[d];
  }
  if (dims.size() > 2)
    return context.error("a batched product whose batch dimensions do not "
                         "flatten into two is not supported");
  if (!dims.empty()) {
    gemm.batch = dims.back();
    gemm.strideA = strides[0].back();
    gemm.strideB = strides[1].back();
    gemm.strideC = strides[2].back();
  }
  if (dims.size() == 2) {
    gemm.outer = dims[0];
    gemm.outerStrideA = strides[0][0];
    gemm.outerStrideB = strides[1][0];
    gemm.outerStrideC = strides[2][0];
  }
  // With an epilogue, the product goes straight to the absorbed root's
  // result.
  if (CudaEpilogue epilogue = context.epilogue(); epilogue.root) {
    if (!batch.empty() || !dims.empty())
      return context.error("internal error: an epilogue on a batched product");
    gemm.c = epilogue.root->getResult(0);
    gemm.bias = epilogue.bias;
    gemm.epilogue = epilogue.kind;
  }
  context.gemm(gemm);
  return success();
}

} // namespace

/// Called by registerFamilyEmissionModels (generated).
void codegen::registerMatmulEmissionModels(MLIRContext &context) {
  KernelFunctions<MatmulOp, emitCpu<MatmulOp>, emitCuda<MatmulOp>>::attach(
      context);
  KernelFunctions<BatchMatmulOp, emitCpu<BatchMatmulOp>,
                  emitCuda<BatchMatmulOp>>::attach(context);
}
