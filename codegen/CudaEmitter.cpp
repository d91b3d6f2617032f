//===- CudaEmitter.cpp - CUDA for the GPU backend -------------------------===//
//
// One pass over each planned step function, in its scheduled order, as in
// the CPU emitter (StepLayout.h gives both the same layouts and fused
// expressions). Each op that is not a view or fused becomes:
//
// - an elementwise root: one generated kernel, a grid-stride loop over the
//   coalesced dimensions that evaluates the fused tree per element; with
//   128-bit loads and stores (float4) when the loop is flat, every array is
//   f32 and 16-byte aligned, and the count is a multiple of 4;
// - a matrix product: a cuBLASLt GEMM (the launcher's), strided-batched
//   where the batch dimensions flatten;
// - a convolution: cuDNN;
// - anything else: a generated wrapper kernel around one device function of
//   runtime/cuda/Kernels.cuh, with shapes and offsets as constants;
// - a run of Adam updates with the same settings: one multi-tensor launch
//   over a table of the parameters.
//
// Kernels address the plan through one argument (the regions' base
// pointers), so a launch has no per-call arguments and a captured CUDA
// graph replays the step as is.
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaEmitter.h"
#include "codegen/KernelContext.h"
#include "codegen/StepLayout.h"
#include "lang/ModelAttributes.h"
#include "lang/PlanAttributes.h"

#include "lang/MnemoOps.h"
#include "lang/ShapeRules.h"
#include "passes/BufferAnalysis.h"
#include "passes/Fusion.h"
#include "passes/PlanExport.h"
#include "passes/Workspace.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <set>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;

namespace {

constexpr int kThreads = kCudaThreads;

/// A pointer into a region as a kernel reads it: f32(r.A + 4096).
std::string devicePointer(const CType &type, MemoryRegion region,
                          int64_t offset) {
  return type.cast + "(r." + std::string(1, regionLetter(region)) + " + " +
         std::to_string(offset) + ")";
}

std::string dtypeOf(const CType &t) {
  if (t.cast == "bf16")
    return "DType::BF16";
  if (t.cast == "f16")
    return "DType::F16";
  return "DType::F32";
}

class CudaStepEmitter : public CudaKernelContext {
public:
  CudaStepEmitter(func::FuncOp func, llvm::raw_ostream &kernels,
                  llvm::raw_ostream &host, int &constantCount,
                  std::vector<std::string> &kernelNames, int &gemmSites,
                  int &convSites, std::set<std::string> &includes)
      : func(func), kernels(kernels), host(host),
        layouts(func, devicePointer, "__device__ const", kernels, constantCount,
                "CUDA"),
        kernelNames(kernelNames), gemmSites(gemmSites), convSites(convSites),
        includes(includes) {}

  LogicalResult emit();

  std::vector<std::string> opNames;
  /// The most workspace any op uses for partial sums.
  int64_t scratchBytes = 0;
  /// Why the step cannot run on the GPU (an op whose library this CUDA
  /// toolkit lacks): the executor refuses to start with this message, and
  /// the CPU backend still runs the program.
  std::string unsupported;

private:
  InFlightDiagnostic error(Operation *op, const Twine &message) {
    return layouts.error(op, message);
  }
  LogicalResult emitOp(Operation *op);
  LogicalResult emitAdamGroup(ArrayRef<AdamUpdateOp> group);
  LogicalResult emitAdam8bitGroup(ArrayRef<Adam8bitUpdateOp> group);
  /// clip_grad_norm's multiply of a gradient (in place) whose only reader
  /// is an AdamW (or adamw8bit) update: the multi-tensor launch scales the
  /// gradient as it reads it, and the multiply is not emitted. Null if `op`
  /// is not one.
  Value clipFoldedInto(Operation *op);
  /// A folded multiply, by its result: the raw gradient it scaled and the
  /// clipping coefficient.
  struct FoldedClip {
    Value grad, coefficient;
  };
  llvm::DenseMap<Value, FoldedClip> foldedClips;
  /// The gradient an update reads: the raw one when its clip is folded.
  Value gradientRead(Value grad) {
    auto it = foldedClips.find(grad);
    return it == foldedClips.end() ? grad : it->second.grad;
  }
  /// The coefficient folded into an update of `grad`, or null.
  Value clipOf(Value grad) { return foldedClips.lookup(grad).coefficient; }
  /// The multi-tensor launches' last arguments: the f16 loss-scaling skip
  /// flag and the folded clipping coefficient (null pointers when none).
  std::string skipAndClip(Operation *op, Value skip, Value grad) {
    Value clip = clipOf(grad);
    return (skip ? P(skip, op) : "(const float *)nullptr") + ", " +
           (clip ? P(clip, op) : "(const float *)nullptr");
  }
  LogicalResult emitLoop(Operation *root);
  LogicalResult emitMatmul(Operation *op, bool ta, bool tb, bool batched);
  /// The elementwise root right after a matrix product that cuBLASLt's
  /// epilogue can compute instead (z + bias, relu(z + bias)); null if none.
  Operation *epilogueRoot(MatmulOp m, Operation *next, Value &bias,
                          std::string &epilogue);
  /// Set while a GEMM absorbs the next root: it writes the root's result.
  Operation *absorbed = nullptr;
  Value absorbedBias;
  std::string absorbedEpilogue;

  /// Opens a generated kernel and returns its index; the caller writes the
  /// body and closes it with "}\n".
  int beginKernel(int maxThreads);
  void launch(int kernel, int64_t gridX, int64_t gridY, int block) {
    body << "  L.launch(" << kernel << ", " << gridX << ", " << gridY << ", "
         << block << ");\n";
  }
  /// A kernel whose body is one statement.
  void kernelCall(const std::string &statement, int64_t gridX, int block,
                  int64_t gridY = 1) {
    int k = beginKernel(block);
    kernels << "  " << statement << "\n}\n\n";
    launch(k, gridX, gridY, block);
  }
  /// A pointer for a host-side call (cuBLASLt, cuDNN, memset); GEMM
  /// operands may be strided views (their strides become transposes and
  /// leading dimensions).
  std::string hostPointer(Value v, Operation *user, bool strided = false);
  std::string P(Value v, Operation *user);
  std::string res(Operation *op, unsigned i = 0) {
    return layouts[op->getResult(i)].pointer;
  }
  std::string T(Value v) {
    CType t = ctypeOf(v.getType());
    return t.name;
  }

  // What an op family's emission model sees (CudaKernelContext).
  std::string operand(Value v) override { return P(v, kernelOp); }
  std::string result(unsigned i) override { return res(kernelOp, i); }
  std::string elementType(Value v) override { return T(v); }
  void launch(const std::string &statement, int64_t blocks, int threads,
              int64_t blocksY) override {
    kernelCall(statement, blocks, threads, blocksY);
  }
  void gemm(const CudaGemm &g) override {
    std::string A = hostPointer(g.a, kernelOp), B = hostPointer(g.b, kernelOp),
                C = hostPointer(g.c, kernelOp);
    body << "  {\n    static const GemmCall call = {" << gemmSites++ << ", "
         << (g.transposeA ? "true" : "false") << ", "
         << (g.transposeB ? "true" : "false") << ", " << g.m << ", " << g.n
         << ", " << g.k << ", " << g.lda << ", " << g.ldb << ", " << g.ldc
         << ", 1, 0, 0, 0, DType::" << g.type
         << ", Epilogue::None, 0, 0, 0, 0};\n    L.gemm(call, " << A << ", "
         << B << ", " << C << ", nullptr);\n  }\n";
  }
  void convolution(const CudaConvolution &c) override {
    const ConvGeometry &g = c.geometry;
    std::string first = hostPointer(c.first, kernelOp),
                second = hostPointer(c.second, kernelOp),
                out = hostPointer(c.result, kernelOp);
    body << "  {\n    static const ConvCall call = {" << convSites++
         << ", ConvKind::" << c.kind << ", " << g.n << ", " << g.c << ", "
         << g.h << ", " << g.w << ", " << g.o << ", " << g.kh << ", " << g.kw
         << ", " << g.ho << ", " << g.wo << ", " << g.strideH << ", "
         << g.strideW << ", " << g.padH << ", " << g.padW << ", "
         << dtypeOf(ctypeOf(c.result.getType())) << "};\n"
         << "    L.conv(call, " << first << ", " << second << ", " << out
         << ");\n  }\n";
  }
  FailureOr<std::string> tensorRef(Value v) override {
    Layout l = layouts.lookup(v);
    if (l.isSplat() || !l.region)
      return error(kernelOp, "internal error: a tensor a device table "
                             "refers to is a constant");
    return "{" + std::to_string(int(*l.region)) + ", " +
           std::to_string(l.offset) + ", " + std::to_string(product(l.shape)) +
           "}";
  }
  std::string deviceTable(StringRef type,
                          ArrayRef<std::string> entries) override {
    // Numbered by the kernel that follows, as the optimizers' tables.
    std::string name = "table" + std::to_string(kernelNames.size()) + "_" +
                       std::to_string(tablesBeforeKernel++);
    kernels << "__device__ const " << type << " " << name << "[] = {"
            << llvm::join(entries, ", ") << "};\n";
    return name;
  }
  /// Tables declared since the last kernel began (their names' suffix).
  int tablesBeforeKernel = 0;
  std::string scratch(int64_t bytes) override {
    auto declared = llvm::dyn_cast<CudaScratchOpInterface>(kernelOp);
    if (!declared || bytes > declared.getCudaScratchBytes()) {
      error(kernelOp, "internal error: the op's CUDA kernels ask for " +
                          std::to_string(bytes) +
                          " bytes of scratch, more than it declares "
                          "(CudaScratchOpInterface)");
      failedOperand = true;
    }
    needScratch(bytes);
    return "r.W";
  }
  void zero(Value v) override {
    auto type = llvm::cast<ShapedType>(v.getType());
    body << "  L.zero(" << hostPointer(v, kernelOp) << ", "
         << type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8)
         << ");\n";
  }
  InFlightDiagnostic error(const Twine &message) override {
    return error(kernelOp, message);
  }
  void refuse(const std::string &why) override {
    if (unsupported.empty())
      unsupported = why;
  }
  void include(StringRef header) override {
    // At file scope, before the first kernel that calls it.
    if (includes.insert(header.str()).second)
      kernels << "#include \"" << header << "\"\n\n";
  }
  /// The op a family's model is emitting.
  Operation *kernelOp = nullptr;
  void needScratch(int64_t bytes) {
    scratchBytes = std::max(scratchBytes, (bytes + 255) / 256 * 256);
  }

  func::FuncOp func;
  llvm::raw_ostream &kernels, &host;
  StepLayouts layouts;
  std::vector<std::string> &kernelNames;
  int &gemmSites, &convSites;
  /// The family headers the kernels' source includes (every step's).
  std::set<std::string> &includes;
  /// The body of the current op's host code.
  std::string bodyText;
  llvm::raw_string_ostream body{bodyText};
  bool failedOperand = false;
};

int CudaStepEmitter::beginKernel(int maxThreads) {
  int index = int(kernelNames.size());
  tablesBeforeKernel = 0;
  std::string name = func.getName().str() + "_k" + std::to_string(index);
  kernelNames.push_back(name);
  kernels << "extern \"C\" __global__ void __launch_bounds__(" << maxThreads
          << ") " << name << "(const Regions r) {\n";
  return index;
}

std::string CudaStepEmitter::hostPointer(Value v, Operation *user,
                                         bool strided) {
  Layout l = layouts.lookup(v);
  if (l.isSplat() || !l.region || (!strided && !l.isContiguous())) {
    error(user, "a cuBLASLt or cuDNN operand must live in the plan (not a "
                "constant or a strided view)");
    failedOperand = true;
    return "nullptr";
  }
  return std::string(1, regionLetter(*l.region)) + " + " +
         std::to_string(l.offset);
}

std::string CudaStepEmitter::P(Value v, Operation *user) {
  FailureOr<std::string> p = layouts.pointer(v, user);
  if (failed(p)) {
    failedOperand = true;
    return "nullptr";
  }
  return *p;
}

LogicalResult CudaStepEmitter::emitLoop(Operation *root) {
  FailureOr<Loop> built = layouts.buildLoop(root);
  if (failed(built))
    return failure();
  Loop &loop = *built;
  const Layout &result = layouts[root->getResult(0)];
  CoalescedLoop c = coalesce(loop, rowMajorStrides(loop.shape));
  size_t arrays = c.strides.size(), outArray = arrays - 1;
  int64_t total = product(c.dims);

  std::vector<std::string> pointers;
  std::vector<const Loop::Leaf *> leaves;
  for (const Loop::Leaf &leaf : loop.leaves)
    pointers.push_back(leaf.pointer);
  pointers.push_back(result.pointer);

  // float4 when the loop is flat and every array is f32, aligned, and read
  // contiguously (or is one scalar).
  bool vectorize = c.dims.size() == 1 && total % 4 == 0 &&
                   result.type.cast == "f32" && result.offset % 16 == 0;
  for (size_t k = 0; vectorize && k < loop.leaves.size(); ++k) {
    const Loop::Leaf &leaf = loop.leaves[k];
    int64_t s = c.strides[k][0];
    vectorize = s == 0 || (s == 1 && leaf.region && leaf.type.cast == "f32" &&
                           leaf.offset % 16 == 0);
  }

  int k = beginKernel(kThreads);
  if (loop.usesDropout)
    kernels << "  const int64_t dropoutStep = r.control[kDropoutStep];\n";
  for (size_t a = 0; a < arrays; ++a)
    kernels << "  auto *const p" << a << " = " << pointers[a] << ";\n";
  auto statements = [&](const std::vector<std::string> &reads,
                        const std::string &flat, const std::string &out,
                        const std::string &indent) {
    kernels << indent << "{\n";
    for (const std::string &s : loop.statements)
      kernels << indent << "  " << substitute(s, reads, flat) << "\n";
    kernels << indent << "  " << out << " = "
            << substitute(loop.value, reads, flat) << ";\n";
    kernels << indent << "}\n";
  };
  std::string stride = "int64_t(gridDim.x) * blockDim.x";
  std::string first = "int64_t(blockIdx.x) * blockDim.x + threadIdx.x";
  if (c.dims.empty()) {
    std::vector<std::string> reads;
    for (size_t a = 0; a < arrays; ++a)
      reads.push_back("p" + std::to_string(a) + "[0]");
    kernels << "  if (" << first << " != 0)\n    return;\n";
    statements(reads, "0", reads[outArray], "  ");
    kernels << "}\n\n";
    launch(k, 1, 1, 32);
    return success();
  }
  if (vectorize) {
    int64_t vectors = total / 4;
    kernels << "  for (int64_t v = " << first << "; v < " << vectors
            << "; v += " << stride << ") {\n";
    for (size_t a = 0; a + 1 < arrays; ++a)
      if (c.strides[a][0] == 1)
        kernels << "    const float4 in" << a
                << " = reinterpret_cast<const float4 *>(p" << a << ")[v];\n";
    kernels << "    float4 out;\n";
    static const char *const lanes[] = {"x", "y", "z", "w"};
    for (int lane = 0; lane < 4; ++lane) {
      std::vector<std::string> reads;
      for (size_t a = 0; a + 1 < arrays; ++a)
        reads.push_back(c.strides[a][0] == 1
                            ? "in" + std::to_string(a) + "." + lanes[lane]
                            : "p" + std::to_string(a) + "[0]");
      reads.push_back("out." + std::string(lanes[lane]));
      statements(reads, "(v * 4 + " + std::to_string(lane) + ")",
                 reads[outArray], "    ");
    }
    kernels << "    reinterpret_cast<float4 *>(p" << outArray
            << ")[v] = out;\n  }\n}\n\n";
    launch(k, gridFor(vectors), 1, kThreads);
    return success();
  }
  // One element per iteration: the flat index into coordinates over the
  // coalesced dimensions, then each array's offset.
  kernels << "  for (int64_t i = " << first << "; i < " << total
          << "; i += " << stride << ") {\n";
  std::vector<std::string> offsets(arrays);
  kernels << "    int64_t rest = i;\n";
  for (int64_t d = int64_t(c.dims.size()) - 1; d >= 0; --d) {
    std::string coord = "c" + std::to_string(d);
    if (d == 0)
      kernels << "    const int64_t " << coord << " = rest;\n";
    else
      kernels << "    const int64_t " << coord << " = rest % " << c.dims[d]
              << ";\n    rest /= " << c.dims[d] << ";\n";
    for (size_t a = 0; a < arrays; ++a) {
      int64_t s = c.strides[a][d];
      if (s == 0)
        continue;
      offsets[a] += (offsets[a].empty() ? "" : " + ") + coord +
                    (s == 1 ? "" : " * " + std::to_string(s));
    }
  }
  std::vector<std::string> reads;
  for (size_t a = 0; a < arrays; ++a)
    reads.push_back("p" + std::to_string(a) + "[" +
                    (offsets[a].empty() ? "0" : offsets[a]) + "]");
  statements(reads, "i", reads[outArray], "    ");
  kernels << "  }\n}\n\n";
  launch(k, gridFor(total), 1, kThreads);
  return success();
}

LogicalResult CudaStepEmitter::emitMatmul(Operation *op, bool ta, bool tb,
                                          bool batched) {
  Value lhs = op->getOperand(0), rhs = op->getOperand(1),
        result = op->getResult(0);
  FailureOr<GemmProblem> problem = layouts.gemmProblem(op, ta, tb);
  if (failed(problem))
    return failure();
  const Layout &a = problem->a, &b = problem->b, &c = problem->c;
  if (!a.region || !b.region)
    return error(op, "a matrix product of a constant is not supported");
  const GemmOperand *ga = &problem->ga, *gb = &problem->gb;
  int64_t m = problem->m, n = problem->n, k = problem->k;
  Shape batch = problem->batch;
  Shape aStrides = ga->batchStrides;
  Shape bStrides = batched ? gb->batchStrides : Shape(batch.size(), 0);
  Shape cStrides(c.strides.begin(), c.strides.end() - 2);
  // The rows of a contiguous, untransposed lhs are one matrix.
  if (!batched && !ta && a.isContiguous()) {
    m *= product(batch);
    batch.clear();
    aStrides.clear();
    bStrides.clear();
    cStrides.clear();
  }
  // Batch dimensions that every operand walks uniformly merge into one
  // strided batch; what is left is a host loop over GEMMs.
  Shape dims;
  std::vector<Shape> strides(3);
  for (size_t d = 0; d < batch.size(); ++d) {
    if (batch[d] == 1)
      continue;
    bool merge = !dims.empty() && strides[0].back() == aStrides[d] * batch[d] &&
                 strides[1].back() == bStrides[d] * batch[d] &&
                 strides[2].back() == cStrides[d] * batch[d];
    if (merge) {
      dims.back() *= batch[d];
      strides[0].back() = aStrides[d];
      strides[1].back() = bStrides[d];
      strides[2].back() = cStrides[d];
    } else {
      dims.push_back(batch[d]);
      strides[0].push_back(aStrides[d]);
      strides[1].push_back(bStrides[d]);
      strides[2].push_back(cStrides[d]);
    }
  }
  int64_t inner = dims.empty() ? 1 : dims.back();
  int64_t outer = dims.empty() ? 1 : product(dims) / inner;
  if (dims.size() > 2)
    return error(op, "a batched product whose batch dimensions do not "
                     "flatten into two is not supported");
  int site = gemmSites++;
  // With an epilogue, the product goes straight to the root's buffer.
  Value into = absorbed ? absorbed->getResult(0) : result;
  std::string A = hostPointer(lhs, op, true), B = hostPointer(rhs, op, true),
              C = hostPointer(into, op);
  std::string bias =
      absorbed ? hostPointer(absorbedBias, op) : std::string("nullptr");
  if (absorbed && (!batch.empty() || !dims.empty()))
    return error(op, "internal error: an epilogue on a batched product");
  if (failedOperand)
    return failure();
  body << "  {\n    static const GemmCall call = {" << site << ", "
       << (ga->transpose ? "true" : "false") << ", "
       << (gb->transpose ? "true" : "false") << ", " << m << ", " << n << ", "
       << k << ", " << ga->ld << ", " << gb->ld << ", " << n << ", " << inner
       << ", " << (dims.empty() ? 0 : strides[0].back()) << ", "
       << (dims.empty() ? 0 : strides[1].back()) << ", "
       << (dims.empty() ? 0 : strides[2].back()) << ", " << dtypeOf(c.type)
       << ", Epilogue::" << (absorbed ? absorbedEpilogue : "None") << ", ";
  // Two batch dimensions: one call over both (pointer arrays).
  if (outer == 1)
    body << "0, 0, 0, 0";
  else
    body << outer << ", " << strides[0][0] << ", " << strides[1][0] << ", "
         << strides[2][0];
  body << "};\n    L.gemm(call, " << A << ", " << B << ", " << C << ", " << bias
       << ");\n  }\n";
  return success();
}

Operation *CudaStepEmitter::epilogueRoot(MatmulOp m, Operation *next,
                                         Value &bias, std::string &epilogue) {
  Value z = m.getResult();
  if (!next || !z.hasOneUse() || m.getTransposeLhs() ||
      ctypeOf(z.getType()).cast != "f32")
    return nullptr;
  Layout a = layouts.lookup(m.getLhs());
  if (!a.isContiguous())
    return nullptr;
  // add(z, broadcast(b)) with b the bias row of the product's n columns.
  auto biasAdd = [&](Operation *op) -> bool {
    auto add = llvm::dyn_cast_or_null<AddOp>(op);
    if (!add)
      return false;
    Value other = add.getLhs() == z   ? add.getRhs()
                  : add.getRhs() == z ? add.getLhs()
                                      : Value();
    auto broadcast = other ? other.getDefiningOp<BroadcastOp>() : BroadcastOp();
    if (!broadcast || !isFused(broadcast) || !other.hasOneUse())
      return false;
    Layout b = layouts.lookup(broadcast.getInput());
    Shape zs = shapeOf(z);
    if (b.isSplat() || !b.region || b.shape.size() != 1 ||
        b.shape[0] != zs.back() || b.type.cast != "f32")
      return false;
    bias = broadcast.getInput();
    return shapeOf(add.getResult()) == zs;
  };
  // The root's buffer may reuse one that dies at the product (its lhs, say):
  // the GEMM writes it while still reading its operands, so they must not
  // overlap.
  auto extent = [](const Layout &l) {
    int64_t last = 0;
    for (size_t d = 0; d < l.shape.size(); ++d)
      last += (l.shape[d] - 1) * l.strides[d];
    return std::make_pair(l.offset, l.offset + (last + 1) * l.type.bytes);
  };
  auto overlapsOperands = [&](Operation *root) {
    Layout out = layouts.lookup(root->getResult(0));
    for (Value operand : {m.getLhs(), m.getRhs()}) {
      Layout in = layouts.lookup(operand);
      if (in.region != out.region)
        continue;
      auto [b0, e0] = extent(in);
      auto [b1, e1] = extent(out);
      if (b0 < e1 && b1 < e0)
        return true;
    }
    return false;
  };
  if (!isFused(next) && biasAdd(next) && !overlapsOperands(next)) {
    epilogue = "Bias";
    return next;
  }
  if (auto relu = llvm::dyn_cast<ReluOp>(next); relu && !isFused(next)) {
    Operation *inner = relu.getInput().getDefiningOp();
    if (inner && isFused(inner) && inner->getResult(0).hasOneUse() &&
        biasAdd(inner) && !overlapsOperands(next)) {
      epilogue = "ReluBias";
      return next;
    }
  }
  return nullptr;
}

LogicalResult CudaStepEmitter::emitAdamGroup(ArrayRef<AdamUpdateOp> group) {
  AdamUpdateOp a = group.front();
  Operation *op = a;
  std::string table = "adam" + std::to_string(kernelNames.size());
  auto ref = [&](Value v) {
    Layout l = layouts.lookup(v);
    return "{" + std::to_string(int(*l.region)) + ", " +
           std::to_string(l.offset) + ", " + std::to_string(product(l.shape)) +
           "}";
  };
  kernels << "__device__ const AdamTensor " << table << "[] = {\n";
  int64_t first = 0;
  for (AdamUpdateOp u : group) {
    for (Value v :
         {u.getParam(), u.getGrad(), u.getExpAvg(), u.getExpAvgSq()}) {
      Layout l = layouts.lookup(v);
      if (l.isSplat() || !l.region)
        return error(u, "internal error: an optimizer operand is a constant");
    }
    kernels << "    {" << ref(u.getParam()) << ", "
            << ref(gradientRead(u.getGrad())) << ", " << ref(u.getExpAvg())
            << ", " << ref(u.getExpAvgSq()) << ", " << ref(u->getResult(0))
            << ", " << ref(u->getResult(1)) << ", " << ref(u->getResult(2))
            << ", " << first << "},\n";
    first += product(shapeOf(u.getParam()));
  }
  kernels << "};\n";
  std::string type = T(a.getParam());
  int k = beginKernel(kThreads);
  kernels << "  adamMultiTensor<" << type << ">(r, " << table << ", "
          << group.size() << ", " << first << ", " << P(a.getLr(), op) << ", "
          << P(a.getStep(), op) << ", "
          << doubleLiteral(a.getBeta1().convertToDouble()) << ", "
          << doubleLiteral(a.getBeta2().convertToDouble()) << ", "
          << doubleLiteral(a.getEps().convertToDouble()) << ", "
          << doubleLiteral(a.getWeightDecay().convertToDouble()) << ", "
          << (a.getDecoupled() ? "true" : "false") << ", "
          << skipAndClip(op, a.getSkip(), a.getGrad()) << ");\n}\n\n";
  launch(k, gridFor(first), 1, kThreads);
  return success();
}

Value CudaStepEmitter::clipFoldedInto(Operation *op) {
  auto mul = llvm::dyn_cast<MulOp>(op);
  if (!mul || isFused(mul) || !mul.getResult().hasOneUse())
    return Value();
  Operation *user = *mul.getResult().getUsers().begin();
  auto adam = llvm::dyn_cast<AdamUpdateOp>(user);
  auto adam8 = llvm::dyn_cast<Adam8bitUpdateOp>(user);
  if (!(adam && adam.getGrad() == mul.getResult()) &&
      !(adam8 && adam8.getGrad() == mul.getResult()))
    return Value();
  for (auto [grad, other] : {std::pair(mul.getLhs(), mul.getRhs()),
                             std::pair(mul.getRhs(), mul.getLhs())}) {
    auto broadcast = other.getDefiningOp<BroadcastOp>();
    if (!broadcast || !isFused(broadcast) ||
        !broadcast.getInput().getDefiningOp<ClipCoefficientOp>())
      continue;
    Operation *producer = grad.getDefiningOp();
    if (producer && isFused(producer))
      continue;
    // In place, so the raw gradient stays where the product would have
    // been, untouched until the update reads it.
    Layout in = layouts.lookup(grad), out = layouts.lookup(mul.getResult());
    if (in.isSplat() || !in.region || in.region != out.region ||
        in.offset != out.offset || !in.isContiguous() || !out.isContiguous() ||
        shapeOf(grad) != shapeOf(mul.getResult()))
      continue;
    foldedClips[mul.getResult()] = {grad, broadcast.getInput()};
    return grad;
  }
  return Value();
}

LogicalResult
CudaStepEmitter::emitAdam8bitGroup(ArrayRef<Adam8bitUpdateOp> group) {
  Adam8bitUpdateOp a = group.front();
  Operation *op = a;
  std::string table = "adam8_" + std::to_string(kernelNames.size());
  kernels << "__device__ const Adam8bitTensor " << table << "[] = {\n";
  int64_t firstBlock = 0;
  for (Adam8bitUpdateOp u : group) {
    if (!llvm::cast<ShapedType>(u.getParam().getType())
             .getElementType()
             .isF32())
      return error(u, "adamw8bit needs f32 parameters");
    auto ref = [&](Value v) -> std::string {
      Layout l = layouts.lookup(v);
      if (l.isSplat() || !l.region) {
        failedOperand = true;
        error(u, "internal error: an optimizer operand is a constant");
      }
      return "{" + std::to_string(int(*l.region)) + ", " +
             std::to_string(l.offset) + ", " +
             std::to_string(product(l.shape)) + "}";
    };
    int64_t n = product(shapeOf(u.getParam()));
    kernels << "    {" << ref(u.getParam()) << ", "
            << ref(gradientRead(u.getGrad())) << ", " << ref(u.getExpAvgCodes())
            << ", " << ref(u.getExpAvgAbsmax()) << ", "
            << ref(u.getExpAvgSqCodes()) << ", " << ref(u.getExpAvgSqAbsmax())
            << ", " << ref(u->getResult(0)) << ", " << ref(u->getResult(1))
            << ", " << ref(u->getResult(2)) << ", " << ref(u->getResult(3))
            << ", " << ref(u->getResult(4)) << ", " << n << ", " << firstBlock
            << "},\n";
    firstBlock += ceilDiv(n, a.getBlockSize());
  }
  kernels << "};\n";
  if (failedOperand)
    return failure();
  if (a.getBlockSize() > 4096)
    return error(op, "adamw8bit's block may be at most 4096 elements on the "
                     "GPU");
  int k = beginKernel(kThreads);
  kernels << "  adam8bitMultiTensor(r, " << table << ", " << group.size()
          << ", " << firstBlock << ", " << a.getBlockSize() << ", "
          << P(a.getLr(), op) << ", " << P(a.getStep(), op) << ", "
          << doubleLiteral(a.getBeta1().convertToDouble()) << ", "
          << doubleLiteral(a.getBeta2().convertToDouble()) << ", "
          << doubleLiteral(a.getEps().convertToDouble()) << ", "
          << doubleLiteral(a.getWeightDecay().convertToDouble()) << ", "
          << skipAndClip(op, a.getSkip(), a.getGrad()) << ");\n}\n\n";
  launch(k, std::min<int64_t>(firstBlock, 1 << 20), 1, kThreads);
  return success();
}

LogicalResult CudaStepEmitter::emitOp(Operation *op) {
  if (llvm::isa<MatmulOp, BatchMatmulOp>(op) || isElementwiseKernel(op) ||
      llvm::isa<BroadcastOp, TransposeOp, ReshapeOp>(op)) {
    if (auto m = llvm::dyn_cast<MatmulOp>(op))
      return emitMatmul(op, m.getTransposeLhs(), m.getTransposeRhs(), false);
    if (auto m = llvm::dyn_cast<BatchMatmulOp>(op))
      return emitMatmul(op, m.getTransposeLhs(), m.getTransposeRhs(), true);
    return emitLoop(op);
  }
  if (auto kernel = llvm::dyn_cast<CudaKernelOpInterface>(op)) {
    kernelOp = op;
    failedOperand = false;
    if (failed(kernel.emitCudaKernel(*this)) || failedOperand)
      return failure();
    return success();
  }
  LogicalResult result =
      llvm::TypeSwitch<Operation *, LogicalResult>(op)
          .Case([&](LrScheduleOp s) {
            kernelCall(
                "lrSchedule(" +
                    std::string(s.getKind() == "cosine" ? "true" : "false") +
                    ", " + P(s.getStep(), op) + ", " +
                    P(s.getTotalSteps(), op) + ", " +
                    doubleLiteral(s.getBaseLr().convertToDouble()) + ", " +
                    std::to_string(s.getWarmup()) + ", " +
                    std::to_string(s.getSteps()) + ", " +
                    doubleLiteral(s.getMinLr().convertToDouble()) + ", " +
                    res(op) + ");",
                1, 1);
            return success();
          })
          .Case([&](GlobalNormOp n) -> LogicalResult {
            std::string table = "norm" + std::to_string(kernelNames.size());
            kernels << "__device__ const TensorRef " << table << "[] = {";
            int64_t total = 0;
            for (auto [i, v] : llvm::enumerate(n.getInputs())) {
              Layout l = layouts.lookup(v);
              if (l.isSplat() || !l.region)
                return error(op, "internal error: a gradient is a constant");
              kernels << (i ? ", " : "") << "{" << int(*l.region) << ", "
                      << l.offset << ", " << product(l.shape) << "}";
              total += product(l.shape);
            }
            kernels << "};\n";
            int64_t blocks = sumOfSquaresBlocks(total);
            needScratch(blocks * 4);
            kernelCall("sumOfSquaresPartial<" + T(n.getInputs().front()) +
                           ">(r, " + table + ", " +
                           std::to_string(n.getInputs().size()) +
                           ", f32(r.W));",
                       blocks, kThreads);
            kernelCall("finishSumOfSquares(f32(r.W), " +
                           std::to_string(blocks) + ", 1.0f, true, " + res(op) +
                           ");",
                       1, 1024);
            return success();
          })
          .Case([&](LossScaleUpdateOp u) {
            kernelCall(
                "lossScaleUpdate(" + P(u.getNorm(), op) + ", " +
                    P(u.getScale(), op) + ", " + P(u.getCount(), op) + ", " +
                    res(op, 0) + ", " + res(op, 1) + ", " + res(op, 2) + ", " +
                    doubleLiteral(u.getGrowthFactor().convertToDouble()) +
                    ", " +
                    doubleLiteral(u.getBackoffFactor().convertToDouble()) +
                    ", " + std::to_string(u.getGrowthInterval()) + ");",
                1, 1);
            return success();
          })
          .Case([&](ClipCoefficientOp c) {
            kernelCall("clipCoefficient(" + P(c.getNorm(), op) + ", " +
                           doubleLiteral(c.getMaxNorm().convertToDouble()) +
                           ", " + res(op) + ");",
                       1, 1);
            return success();
          })
          .Case([&](SgdUpdateOp s) {
            int64_t n = product(shapeOf(s.getParam()));
            kernelCall(
                "sgdUpdate<" + T(s.getParam()) + ">(" + std::to_string(n) +
                    ", " + P(s.getParam(), op) + ", " + P(s.getGrad(), op) +
                    ", " + P(s.getMomentumBuffer(), op) + ", " + res(op, 0) +
                    ", " + res(op, 1) + ", " + P(s.getLr(), op) + ", " +
                    P(s.getStep(), op) + ", " +
                    doubleLiteral(s.getMomentum().convertToDouble()) + ", " +
                    doubleLiteral(s.getDampening().convertToDouble()) + ", " +
                    doubleLiteral(s.getWeightDecay().convertToDouble()) + ", " +
                    (s.getNesterov() ? "true" : "false") + ");",
                ceilDiv(n, kThreads), kThreads);
            return success();
          })
          .Default([&](Operation *) {
            return error(op, "this op has no CUDA kernel");
          });
  if (failed(result) || failedOperand)
    return failure();
  return success();
}

/// adamw8bit updates that one multi-tensor launch can do together.
bool sameAdam8bitSettings(Adam8bitUpdateOp a, Adam8bitUpdateOp b) {
  return a.getLr() == b.getLr() && a.getStep() == b.getStep() &&
         a.getBeta1() == b.getBeta1() && a.getBeta2() == b.getBeta2() &&
         a.getEps() == b.getEps() && a.getWeightDecay() == b.getWeightDecay() &&
         a.getBlockSize() == b.getBlockSize() && a.getSkip() == b.getSkip();
}

/// Adam updates that one multi-tensor launch can do together.
bool sameAdamSettings(AdamUpdateOp a, AdamUpdateOp b) {
  return a.getLr() == b.getLr() && a.getStep() == b.getStep() &&
         a.getBeta1() == b.getBeta1() && a.getBeta2() == b.getBeta2() &&
         a.getEps() == b.getEps() && a.getWeightDecay() == b.getWeightDecay() &&
         a.getDecoupled() == b.getDecoupled() && a.getSkip() == b.getSkip() &&
         ctypeOf(a.getParam().getType()).name ==
             ctypeOf(b.getParam().getType()).name;
}

LogicalResult CudaStepEmitter::emit() {
  Block &block = func.getBody().front();
  if (failed(layouts.assignArguments()))
    return failure();
  host << "void " << func.getName() << "_cuda(StepLauncher &L) {\n"
       << "  uint8_t *const A = L.regions.arena, *const P = "
          "L.regions.parameters,\n"
       << "                *const G = L.regions.gradients, *const S = "
          "L.regions.optimizerState,\n"
       << "                *const I = L.regions.inputs, *const W = "
          "L.regions.workspace;\n"
       << "  (void)A; (void)P; (void)G; (void)S; (void)I; (void)W;\n";
  std::vector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  for (size_t i = 0; i < ops.size(); ++i) {
    Operation *op = ops[i];
    if (failed(layouts.assign(op)))
      return failure();
    if (layouts.isView(op))
      continue;
    std::string name = describeLocation(op->getLoc()) + ": " +
                       op->getName().getStringRef().str();
    bodyText.clear();
    LogicalResult emitted = success();
    auto record = [&](const std::string &what) {
      host << "  // " << what << "\n  L.beginOp(" << opNames.size() << ");\n"
           << body.str() << "  L.endOp(" << opNames.size() << ");\n";
      opNames.push_back(what);
    };
    if (llvm::isa<AdamUpdateOp, Adam8bitUpdateOp>(op)) {
      // The optimizer's run: updates (with the clipping multiplies folded
      // into them, and views between them). The updates are independent
      // (each writes its own parameter and state, which nothing in the run
      // reads), so they are grouped by kind and settings, one multi-tensor
      // launch a group, whatever order the schedule gave them.
      std::vector<Operation *> run;
      size_t j = i;
      for (; j < ops.size(); ++j) {
        Operation *o = ops[j];
        if (j > i && failed(layouts.assign(o)))
          return failure();
        if (llvm::isa<AdamUpdateOp, Adam8bitUpdateOp>(o))
          run.push_back(o);
        else if (!layouts.isView(o) && !clipFoldedInto(o))
          break;
      }
      i = j - 1;
      std::vector<bool> taken(run.size(), false);
      for (size_t first = 0; first < run.size(); ++first) {
        if (taken[first])
          continue;
        bodyText.clear();
        std::string what = describeLocation(run[first]->getLoc()) + ": " +
                           run[first]->getName().getStringRef().str();
        // The run's updates of run[first]'s kind and settings.
        auto collect = [&](auto head, auto sameSettings) {
          SmallVector<decltype(head)> group;
          for (size_t k = first; k < run.size(); ++k) {
            auto u = llvm::dyn_cast<decltype(head)>(run[k]);
            if (!taken[k] && u && sameSettings(head, u) &&
                clipOf(u.getGrad()) == clipOf(head.getGrad())) {
              group.push_back(u);
              taken[k] = true;
            }
          }
          if (group.size() > 1)
            what += " x" + std::to_string(group.size()) + " (multi-tensor)";
          return group;
        };
        if (auto adam = llvm::dyn_cast<AdamUpdateOp>(run[first]))
          emitted = emitAdamGroup(collect(adam, sameAdamSettings));
        else
          emitted = emitAdam8bitGroup(collect(
              llvm::cast<Adam8bitUpdateOp>(run[first]), sameAdam8bitSettings));
        if (failed(emitted) || failedOperand)
          return failure();
        record(what);
      }
      continue;
    } else if (clipFoldedInto(op)) {
      // Scaled by the AdamW launch that reads the gradient.
      continue;
    } else if (auto matmul = llvm::dyn_cast<MatmulOp>(op)) {
      // The next op that writes: a bias add (and ReLU) that cuBLASLt's
      // epilogue computes while the product is in registers. Only the
      // very next op, so that no buffer the root's reuses is still live.
      size_t j = i + 1;
      while (j < ops.size() &&
             (llvm::isa<ConstantOp>(ops[j]) || isFused(ops[j])))
        ++j;
      Operation *next = j < ops.size() ? ops[j] : nullptr;
      // Their layouts now (assigning is idempotent), to compare buffers.
      for (size_t k = i + 1; k <= j && k < ops.size(); ++k)
        if (failed(layouts.assign(ops[k])))
          return failure();
      absorbed = epilogueRoot(matmul, next, absorbedBias, absorbedEpilogue);
      if (absorbed) {
        name += " + " + absorbed->getName().getStringRef().str() +
                " (cuBLASLt epilogue " + absorbedEpilogue + ")";
      }
      emitted = emitOp(op);
      if (absorbed)
        i = j;
      absorbed = nullptr;
    } else {
      emitted = emitOp(op);
    }
    if (failed(emitted))
      return failure();
    record(name);
  }
  host << "}\n\n";
  return success();
}

} // namespace

FailureOr<CudaCode> mnemo::emitCuda(ModuleOp module, StringRef sourceFile) {
  SmallVector<func::FuncOp> steps = stepFunctions(module);
  // An inference plan (CompressWeights) has @eval_step alone.
  if (steps.empty())
    return emitError(module.getLoc())
           << "the model has no train section, so there is no trainer to "
              "generate";
  for (func::FuncOp f : steps)
    if (failed(BufferAnalysis::analyzePlanned(f)))
      return failure();

  std::string kernelText, hostText;
  llvm::raw_string_ostream kernels(kernelText), host(hostText);
  int constantCount = 0, gemmSites = 0, convSites = 0;
  std::vector<std::string> kernelNames;
  std::map<std::string, std::vector<std::string>> opNames;
  std::set<std::string> includes;
  registerFamilyEmissionModels(*module.getContext());
  int64_t scratch = 0, planWorkspace = 0;
  std::string unsupported;
  StringRef modelName = model::modelName(module);
  kernels << "// Generated by mnemoc from " << sourceFile << " (model "
          << (modelName.empty() ? "?" : modelName)
          << "): the CUDA kernels of its steps, compiled by NVRTC when the "
             "trainer starts. Do not edit.\n"
          << "#include \"mnemo/Kernels.cuh\"\n\n"
          << "using namespace mnemo::cuda;\n\n";
  for (func::FuncOp f : steps) {
    CudaStepEmitter emitter(f, kernels, host, constantCount, kernelNames,
                            gemmSites, convSites, includes);
    if (failed(emitter.emit()))
      return failure();
    opNames[f.getName().str()] = emitter.opNames;
    scratch = std::max(scratch, emitter.scratchBytes);
    if (unsupported.empty())
      unsupported = emitter.unsupported;
    planWorkspace =
        std::max(planWorkspace, plan::stepPlan(f).getCudaWorkspaceBytes());
  }
  // One workspace for cuBLASLt, cuDNN (limited to what the CPU's im2col
  // needed) and the kernels' partial sums; they never overlap in time. The
  // plan sized it (PlanMemory, passes/Workspace.h), so that the memory
  // report and --memory-budget count it: the kernels must fit.
  if (scratch > planWorkspace)
    return module.emitError()
           << "internal error: the CUDA kernels need " << scratch
           << " bytes of workspace and the plan has " << planWorkspace
           << " (passes/Workspace.cpp disagrees with "
           << "codegen/CudaEmitter.cpp)";
  int64_t workspace = planWorkspace;

  CudaCode code;
  code.kernels = kernels.str();
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "// Generated by mnemoc from " << sourceFile << " (model "
     << (modelName.empty() ? "?" : modelName) << "). Do not edit.\n"
     << "//\n"
     << "// The CUDA steps: host functions that enqueue every op through the\n"
     << "// runtime's StepLauncher at the plan's offsets (A arena, P "
        "parameters,\n"
     << "// G gradients, S optimizer state, I batch, W workspace), and the\n"
     << "// kernels' source, which the runtime compiles with NVRTC.\n\n"
     << "#include \"runtime/cuda/CudaModel.h\"\n\n"
     << "#include <cstdint>\n\n"
     << "using namespace mnemo::cuda;\n\n"
     << "namespace {\n\n"
     << "// The kernels, as NVRTC compiles them (mnemoc --emit=cuda-kernels "
        "prints them alone).\n"
     << "const char *const kernelSource =\n";
  // Raw string literals have a length limit in some compilers: pieces.
  StringRef rest = code.kernels;
  while (!rest.empty()) {
    size_t cut = std::min<size_t>(rest.size(), 8000);
    if (cut < rest.size()) {
      size_t nl = rest.substr(0, cut).rfind('\n');
      if (nl != StringRef::npos)
        cut = nl + 1;
    }
    os << "    R\"mnemo(" << rest.substr(0, cut) << ")mnemo\"\n";
    rest = rest.drop_front(cut);
  }
  os << "    ;\n\n"
     << "const char *const kernelNames[] = {\n";
  for (const std::string &name : kernelNames)
    os << "    \"" << name << "\",\n";
  if (kernelNames.empty())
    os << "    \"\",\n";
  os << "};\n\n" << host.str();
  auto stepInfo = [&](StringRef name) -> std::string {
    if (!module.lookupSymbol<func::FuncOp>(name))
      return "CudaStepInfo{}";
    std::string array = name.str() + "Ops";
    os << "const char *const " << array << "[] = {\n";
    for (const std::string &op : opNames[name.str()])
      os << "    " << cString(op) << ",\n";
    if (opNames[name.str()].empty())
      os << "    \"\",\n";
    os << "};\n";
    return "CudaStepInfo{" + name.str() + "_cuda, " +
           std::to_string(opNames[name.str()].size()) + ", " + array + "}";
  };
  std::string train = stepInfo("train_step"), eval = stepInfo("eval_step");
  os << "\nconst CudaModelInfo model = {kernelSource, " << kernelNames.size()
     << ", kernelNames, " << workspace << ",\n    " << train << ",\n    "
     << eval << ",\n    "
     << (unsupported.empty() ? std::string("nullptr") : cString(unsupported))
     << "};\n\n"
     << "} // namespace\n\n"
     << "extern \"C\" const CudaModelInfo *mnemoCudaModel() { return &model; "
        "}\n";
  code.host = os.str();
  return code;
}
