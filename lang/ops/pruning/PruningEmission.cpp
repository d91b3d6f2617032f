//===- PruningEmission.cpp - Pruning in the CPU and CUDA code -------------===//
//
// The code generation models of prune_masks and apply_mask: calls of the
// CPU kernels (PruningKernels.h) with the targets on the stack, so a step
// allocates nothing; on the GPU, the mask update in one thread block that
// walks a device table of its targets, and the zeroing as a grid over the
// elements (PruningKernels.cuh).
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelContext.h"
#include "codegen/StepLayout.h"
#include "lang/MnemoOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;

namespace {

/// The directive's method as the CPU kernels' prune::Method and the CUDA
/// kernel's number (0 magnitude, 1 structured, 2 N:M).
int methodNumber(PruneMasksOp p) {
  return p.getMethod() == "magnitude"    ? 0
         : p.getMethod() == "structured" ? 1
                                         : 2;
}

LogicalResult emitPruneMasksCpu(PruneMasksOp p, CpuKernelContext &context) {
  static const char *const methods[] = {"Magnitude", "Structured", "NM"};
  std::string step = context.operand(p.getStep());
  std::vector<std::string> targets, masks;
  for (auto [i, weight] : llvm::enumerate(p.getWeights())) {
    std::string w = context.operand(weight),
                mask = context.operand(p.getMasks()[i]);
    Shape shape = shapeOf(weight);
    targets.push_back(llvm::formatv(
        "{{{0}, reinterpret_cast<uint32_t *>({1}), {2}, {3}}", w,
        context.result(i), context.constantArray(shape), shape.size()));
    masks.push_back("reinterpret_cast<const uint32_t *>(" + mask + ")");
  }
  context.include("lang/ops/pruning/PruningKernels.h");
  context.out() << llvm::formatv(
      "  {{\n"
      "    static const mnemo::prune::Spec spec = {{mnemo::prune::Method::"
      "{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}};\n"
      "    mnemo::prune::Target targets[] = {{{9}};\n"
      "    const uint32_t *const masks[] = {{{10}};\n"
      "    *{11} = pruneMasks(spec, *{12}, {13}, targets, masks);\n"
      "  }\n",
      methods[methodNumber(p)],
      doubleLiteral(p.getSparsity().convertToDouble()), p.getStart(),
      p.getEnd(), p.getEvery(), p.getNorm() == "l1" ? "true" : "false",
      p.getDim(), p.getN(), p.getM(), llvm::join(targets, ", "),
      llvm::join(masks, ", "), context.result(p.getNewMasks().size()), step,
      targets.size());
  return success();
}

LogicalResult emitApplyMaskCpu(ApplyMaskOp a, CpuKernelContext &context) {
  std::string input = context.operand(a.getInput()),
              mask = context.operand(a.getMask()),
              when = a.getWhen() ? context.operand(a.getWhen()) : "nullptr";
  return context.call(
      "lang/ops/pruning/PruningKernels.h",
      llvm::formatv(
          "applyMask({0}, {1}, {2}, reinterpret_cast<const uint32_t *>({3}), "
          "{4}, {5})",
          product(shapeOf(a.getInput())), ctypeOf(a.getInput().getType()).bytes,
          input, mask, context.result(), when));
}

LogicalResult emitPruneMasksCuda(PruneMasksOp p, CudaKernelContext &context) {
  // One PruneRef per target: its tensors and (structured) its slices.
  std::vector<std::string> targets;
  for (auto [i, weight] : llvm::enumerate(p.getWeights())) {
    Shape shape = shapeOf(weight);
    int64_t slices = 1, inner = 1;
    if (p.getMethod() == "structured") {
      slices = shape[p.getDim()];
      inner = product(ArrayRef<int64_t>(shape).drop_front(p.getDim() + 1));
      if (slices > 65536) // kMaxPruneSlices: one bit each in shared memory
        return context.error("structured pruning on the GPU takes at most "
                             "65536 slices");
    }
    std::string w = context.tensorRef(weight),
                mask = context.tensorRef(p.getMasks()[i]),
                out = context.tensorRef(p.getNewMasks()[i]);
    targets.push_back(llvm::formatv("{{{0}, {1}, {2}, {3}, {4}}", w, mask, out,
                                    slices, inner));
  }
  context.include("lang/ops/pruning/PruningKernels.cuh");
  std::string table = context.deviceTable("PruneRef", targets);
  context.launch(
      llvm::formatv(
          "pruneMasks(r, {0}, {1}, {2}, {3}, {4}, {5}ll, {6}ll, "
          "{7}ll, {8}, {9}, {10}, {11});",
          table, targets.size(), context.operand(p.getStep()), methodNumber(p),
          doubleLiteral(p.getSparsity().convertToDouble()), p.getStart(),
          p.getEnd(), p.getEvery(), p.getNorm() == "l1" ? "true" : "false",
          p.getN(), p.getM(), context.result(p.getNewMasks().size())),
      1, kCudaThreads);
  return success();
}

LogicalResult emitApplyMaskCuda(ApplyMaskOp a, CudaKernelContext &context) {
  int64_t n = product(shapeOf(a.getInput()));
  // The elements as bits of their width: a zero pattern is zero in f32,
  // the 16-bit floats and the 8-bit optimizer codes alike.
  int64_t bytes = ctypeOf(a.getInput().getType()).bytes;
  std::string bits = bytes == 4   ? "uint32_t"
                     : bytes == 2 ? "uint16_t"
                                  : "uint8_t";
  context.include("lang/ops/pruning/PruningKernels.cuh");
  context.launch(
      llvm::formatv("applyMask<{0}>({1}, reinterpret_cast<const {0} *>({2}), "
                    "reinterpret_cast<const uint32_t *>({3}), "
                    "reinterpret_cast<{0} *>({4}), {5});",
                    bits, n, context.operand(a.getInput()),
                    context.operand(a.getMask()), context.result(),
                    a.getWhen() ? context.operand(a.getWhen()) : "nullptr"),
      gridFor(n), kCudaThreads);
  return success();
}

} // namespace

/// Called by registerFamilyEmissionModels (generated).
void codegen::registerPruningEmissionModels(MLIRContext &context) {
  KernelFunctions<PruneMasksOp, emitPruneMasksCpu, emitPruneMasksCuda>::attach(
      context);
  KernelFunctions<ApplyMaskOp, emitApplyMaskCpu, emitApplyMaskCuda>::attach(
      context);
}
