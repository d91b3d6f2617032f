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
// - any other op: what its family's CUDA model writes through
//   CudaKernelContext (lang/ops/FAMILY/FAMILYEmission.cpp): wrapper kernels
//   around the family's device functions with shapes and offsets as
//   constants, cuBLASLt GEMMs, cuDNN convolutions, or a copy loop.
//
// Two decisions span several ops and are this file's: a matrix product
// absorbs the bias add (and ReLU) right after it into cuBLASLt's epilogue,
// and the updates of an optimizer run that share their settings become one
// multi-tensor launch (CudaMultiTensorOpInterface), with clip_grad_norm's
// multiplies of their gradients folded in.
//
// Kernels address the plan through one argument (the regions' base
// pointers and the launch site's offsets into them), so a captured CUDA
// graph replays the step as is, and a kernel that several sites launch
// (the same loop in every layer) is compiled once (KernelSet).
//
//===----------------------------------------------------------------------===//

#include "codegen/CudaEmitter.h"
#include "codegen/KernelContext.h"
#include "codegen/StepLayout.h"
#include "lang/ModelAttributes.h"
#include "lang/PlanAttributes.h"
#include "runtime/cuda/CudaModel.h"

#include "lang/MnemoOps.h"
#include "passes/BufferAnalysis.h"
#include "passes/Fusion.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/StringExtras.h"
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

/// The generated kernels of every step, each distinct one compiled once.
/// The layers of a deep model launch the same kernels at other offsets, and
/// the eval step repeats the forward's (GPT-2 small's bf16 steps: 1283
/// launches of 49 distinct kernels); NVRTC compiled every copy when the
/// trainer started (68 s for sm_90 there; 3 s now). A kernel reads its offsets
/// into the regions from its launch (Regions::site), as it reads their bases.
class KernelSet {
public:
  /// A kernel and the offsets its launch passes.
  struct Site {
    int kernel;
    std::vector<std::string> offsets;
  };
  /// Adds the kernel `text`, whose name is written kNameToken, for a
  /// launch in `step`. Kernels launched with an index of their own
  /// (`indexed`), or with more offsets than a launch passes, keep theirs
  /// as constants and are never shared.
  Site add(StringRef step, const std::string &text, bool indexed);
  /// The kernels' definitions (after everything at file scope they use).
  void write(llvm::raw_ostream &os) const;

  /// Where a kernel's text names itself: the name is chosen only once the
  /// text is known to be new (identical kernels share the first's name).
  static constexpr const char *kNameToken = "@KERNEL@";
  std::vector<std::string> names;
  /// Names the device tables the kernels read (table0, ...).
  int tableCount = 0;

private:
  std::vector<std::string> texts;
  std::map<std::string, int> byText;
};

/// `text` with each region offset (the 4096 of r.A + 4096) replaced by the
/// launch's r.site[k], and those offsets in order.
std::string withSiteOffsets(StringRef text, std::vector<std::string> &offsets) {
  std::string shared;
  static const StringRef letters = "APGSIWB";
  size_t at = 0;
  while (at < text.size()) {
    size_t found = text.find("r.", at);
    // r.X + DIGITS, where r is not the end of a longer name.
    bool isOffset =
        found != StringRef::npos && found + 6 < text.size() &&
        (found == 0 || !(llvm::isAlnum(text[found - 1]) ||
                         text[found - 1] == '_' || text[found - 1] == '.')) &&
        letters.contains(text[found + 2]) &&
        text.substr(found + 3, 3) == " + " && llvm::isDigit(text[found + 6]);
    if (!isOffset) {
      size_t end = found == StringRef::npos ? text.size() : found + 2;
      shared += text.slice(at, end).str();
      at = end;
      continue;
    }
    size_t digits = found + 6, end = digits;
    while (end < text.size() && llvm::isDigit(text[end]))
      ++end;
    shared += text.slice(at, digits).str() + "r.site[" +
              std::to_string(offsets.size()) + "]";
    offsets.push_back(text.slice(digits, end).str());
    at = end;
  }
  return shared;
}

KernelSet::Site KernelSet::add(StringRef step, const std::string &text,
                               bool indexed) {
  std::vector<std::string> offsets;
  std::string shared = withSiteOffsets(text, offsets);
  bool shares = !indexed && offsets.size() <= size_t(cuda::kMaxSiteOffsets);
  if (shares)
    if (auto it = byText.find(shared); it != byText.end())
      return {it->second, std::move(offsets)};
  int index = int(texts.size());
  names.push_back(step.str() + "_k" + std::to_string(index));
  if (!shares) {
    texts.push_back(text);
    return {index, {}};
  }
  byText[shared] = index;
  texts.push_back(std::move(shared));
  return {index, std::move(offsets)};
}

void KernelSet::write(llvm::raw_ostream &os) const {
  for (auto [k, text] : llvm::enumerate(texts)) {
    size_t at = text.find(kNameToken);
    os << StringRef(text).take_front(at) << names[k]
       << StringRef(text).drop_front(at + StringRef(kNameToken).size());
  }
}

class CudaStepEmitter : public CudaKernelContext {
public:
  CudaStepEmitter(func::FuncOp func, llvm::raw_ostream &fileScope,
                  llvm::raw_ostream &host, int &constantCount,
                  KernelSet &kernelSet, int &gemmSites, int &convSites,
                  int &attentionSites, std::set<std::string> &includes)
      : func(func), fileScope(fileScope), host(host),
        layouts(func, devicePointer, "__device__ const", fileScope,
                constantCount, "CUDA"),
        kernelSet(kernelSet), gemmSites(gemmSites), convSites(convSites),
        attentionSites(attentionSites), includes(includes) {}

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
  /// Emits the multi-tensor updates of the optimizer's run that starts at
  /// ops[i], one launch per group; advances i past the run.
  LogicalResult emitMultiTensorRun(ArrayRef<Operation *> ops, size_t &i);
  /// A multiply of a gradient (in place) by a broadcast scalar whose only
  /// reader is a multi-tensor update that folds it
  /// (CudaMultiTensorOpInterface): the launch scales the gradient as it
  /// reads it, and the multiply is not emitted. False if `op` is not one.
  bool foldsIntoUpdate(Operation *op);
  /// Whether an op between `from` and `to` writes over `v`'s bytes.
  bool overwrittenBefore(Value v, Operation *from, Operation *to);
  /// The folded multiplies, by their results.
  llvm::DenseMap<Value, ScaledValue> foldedScales;
  /// The updates of the launch being emitted.
  SmallVector<Operation *> launchGroup;
  /// Appends the host code of the op (or group) just emitted, timed as
  /// `what`, and clears it.
  void record(const std::string &what) {
    host << "  // " << what << "\n  L.beginOp(" << opNames.size() << ");\n"
         << body.str() << "  L.endOp(" << opNames.size() << ");\n";
    opNames.push_back(what);
    bodyText.clear();
  }
  LogicalResult emitLoop(Operation *root);
  /// The elementwise root right after a matrix product that cuBLASLt's
  /// epilogue can compute instead (z + bias, relu(z + bias)); null if none.
  Operation *epilogueRoot(MatmulOp m, Operation *next, Value &bias,
                          std::string &epilogue);
  /// Set while a GEMM absorbs the next root: it writes the root's result.
  Operation *absorbed = nullptr;
  Value absorbedBias;
  std::string absorbedEpilogue;

  /// Opens a generated kernel in `kernels`; the caller writes the body,
  /// closes it with "}\n" and launches it.
  void beginKernel(int maxThreads);
  /// Adds the kernel just written to the set and launches it, with its
  /// site's offsets (and `index`, where the kernel has its own).
  void launch(int64_t gridX, int64_t gridY, int block,
              const std::string &index = "") {
    KernelSet::Site site =
        kernelSet.add(func.getName(), kernels.str(), !index.empty());
    kernelText.clear();
    body << "  L.launch(" << site.kernel << ", " << gridX << ", " << gridY
         << ", " << block << ", " << (index.empty() ? "0" : index) << ", {"
         << llvm::join(site.offsets, ", ") << "});\n";
  }
  /// A pointer for a host-side call (cuBLASLt, cuDNN, memset); GEMM
  /// operands may be strided views (their strides become transposes and
  /// leading dimensions).
  std::string hostPointer(Value v, bool strided = false);
  /// A kernel's pointer to `v`, `elements` further on.
  std::string pointerAt(Value v, int64_t elements);

  // What an op family's emission model sees (CudaKernelContext).
  std::string operand(Value v) override { return pointerAt(v, 0); }
  std::string result(unsigned i) override {
    return layouts[kernelOp->getResult(i)].pointer;
  }
  std::string operandAt(Value v, int64_t elements) override {
    return pointerAt(v, elements);
  }
  std::string resultAt(unsigned i, int64_t elements) override {
    return pointerAt(kernelOp->getResult(i), elements);
  }
  std::string elementType(Value v) override {
    return ctypeOf(v.getType()).name;
  }
  /// A kernel whose body is one statement.
  void launch(const std::string &statement, int64_t blocks, int threads,
              int64_t blocksY) override {
    beginKernel(threads);
    kernels << "  " << statement << "\n}\n\n";
    launch(blocks, blocksY, threads);
  }
  void hostCode(const std::string &line) override {
    body << "  " << line << "\n";
  }
  void launchIndexed(const std::string &statement, int64_t blocks, int threads,
                     const std::string &index) override {
    beginKernel(threads);
    kernels << "  " << statement << "\n}\n\n";
    launch(blocks, 1, threads, index);
  }
  std::string hostOperand(Value v) override { return hostPointer(v); }
  std::string hostScratch(int64_t bytes) override {
    scratch(bytes); // declared and counted as the kernels' scratch is
    return "W";
  }
  void gemm(const CudaGemm &g) override {
    std::string A = !g.aAt.empty() ? g.aAt
                                   : hostPointer(g.a, g.stridedOperands),
                B = !g.bAt.empty() ? g.bAt
                                   : hostPointer(g.b, g.stridedOperands),
                C = !g.cAt.empty() ? g.cAt : hostPointer(g.c),
                bias = g.bias ? hostPointer(g.bias) : "nullptr";
    body << "  {\n    static const GemmCall call = {" << gemmSites++ << ", "
         << (g.transposeA ? "true" : "false") << ", "
         << (g.transposeB ? "true" : "false") << ", " << g.m << ", " << g.n
         << ", " << g.k << ", " << g.lda << ", " << g.ldb << ", " << g.ldc
         << ", " << g.batch << ", " << g.strideA << ", " << g.strideB << ", "
         << g.strideC << ", DType::" << g.type << ", Epilogue::" << g.epilogue
         << ", " << g.outer << ", " << g.outerStrideA << ", " << g.outerStrideB
         << ", " << g.outerStrideC << ", " << (g.accumulate ? "true" : "false")
         << ", " << (g.outputF32 ? "true" : "false") << ", "
         << g.reservedWorkspace << "};\n    L.gemm(call, " << A << ", " << B
         << ", " << C << ", " << bias << ");\n  }\n";
  }
  FailureOr<GemmProblem> gemmProblem(bool ta, bool tb) override {
    return layouts.gemmProblem(kernelOp, ta, tb);
  }
  LogicalResult copyLoop() override { return emitLoop(kernelOp); }
  CudaEpilogue epilogue() override {
    return {absorbed, absorbedBias, absorbedEpilogue};
  }
  void convolution(const CudaConvolution &c) override {
    const ConvGeometry &g = c.geometry;
    std::string first = hostPointer(c.first), second = hostPointer(c.second),
                out = hostPointer(c.result);
    body << "  {\n    static const ConvCall call = {" << convSites++
         << ", ConvKind::" << c.kind << ", " << g.n << ", " << g.c << ", "
         << g.h << ", " << g.w << ", " << g.o << ", " << g.kh << ", " << g.kw
         << ", " << g.ho << ", " << g.wo << ", " << g.strideH << ", "
         << g.strideW << ", " << g.padH << ", " << g.padW << ", "
         << dtypeOf(ctypeOf(c.result.getType())) << "};\n"
         << "    L.conv(call, " << first << ", " << second << ", " << out
         << ");\n  }\n";
  }
  void cudnnAttentionOrElse(const CudaAttention &a) override {
    auto pointer = [&](Value v) {
      return v ? hostPointer(v) : std::string("nullptr");
    };
    int site = attentionSites++;
    const attention::AttentionGeometry &g = a.geometry;
    body << "  static const AttentionCall attention" << site << " = {" << site
         << ", AttentionKind::" << (a.forward ? "Forward" : "Backward") << ", "
         << dtypeOf(ctypeOf(a.query.getType())) << ", " << g.batch << ", "
         << g.heads << ", " << g.kvHeads << ", " << g.queries << ", " << g.keys
         << ", " << g.headDim << ", " << g.valueDim << ", "
         << (g.causal ? "true" : "false") << ", "
         << llvm::formatv("{0:e9}f", g.scale).str() << ", "
         << llvm::formatv("{0:e17}", g.dropoutP).str() << ", " << g.seed
         << "};\n  if (!L.attention(attention" << site << ", {"
         << pointer(a.query) << ", " << pointer(a.key) << ", "
         << pointer(a.value) << ", " << pointer(a.output) << ", "
         << pointer(a.logSumExp) << ", " << pointer(a.gradOutput) << ", "
         << pointer(a.gradQuery) << ", " << pointer(a.gradKey) << ", "
         << pointer(a.gradValue) << "})) {\n";
  }
  using CudaKernelContext::tensorRef;
  std::string tensorRef(Value v, int64_t first, int64_t count) override {
    Layout l = layouts.lookup(v);
    int64_t elements = product(l.shape);
    if (count < 0)
      count = elements - first;
    if (l.isSplat() || !l.region || first < 0 || first + count > elements) {
      error(kernelOp, "internal error: a device table refers to a constant, "
                      "or to a piece outside its tensor");
      opFailed = true;
      return "{}";
    }
    return "{" + std::to_string(int(*l.region)) + ", " +
           std::to_string(l.offset + first * ctypeOf(v.getType()).bytes) +
           ", " + std::to_string(count) + "}";
  }
  std::string deviceTable(StringRef type,
                          ArrayRef<std::string> entries) override {
    std::string name = "table" + std::to_string(kernelSet.tableCount++);
    fileScope << "__device__ const " << type << " " << name << "[] = {\n";
    for (const std::string &entry : entries)
      fileScope << "    " << entry << ",\n";
    fileScope << "};\n";
    return name;
  }
  std::string scratch(int64_t bytes) override {
    auto declared = llvm::dyn_cast<CudaScratchOpInterface>(kernelOp);
    if (!declared || bytes > declared.getCudaScratchBytes()) {
      error(kernelOp, "internal error: the op's CUDA kernels ask for " +
                          std::to_string(bytes) +
                          " bytes of scratch, more than it declares "
                          "(CudaScratchOpInterface)");
      opFailed = true;
    }
    needScratch(bytes);
    return "r.W";
  }
  void zero(Value v) override {
    auto type = llvm::cast<ShapedType>(v.getType());
    body << "  L.zero(" << hostPointer(v) << ", "
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
    // At file scope, before the kernels.
    if (includes.insert(header.str()).second)
      fileScope << "#include \"" << header << "\"\n\n";
  }
  ArrayRef<Operation *> group() override {
    return launchGroup.empty() ? ArrayRef<Operation *>(kernelOp)
                               : ArrayRef<Operation *>(launchGroup);
  }
  ScaledValue foldedScale(Value v) override {
    auto it = foldedScales.find(v);
    return it == foldedScales.end() ? ScaledValue{v, Value()} : it->second;
  }
  /// The op a family's model is emitting.
  Operation *kernelOp = nullptr;
  void needScratch(int64_t bytes) {
    scratchBytes = std::max(scratchBytes, (bytes + 255) / 256 * 256);
  }

  func::FuncOp func;
  /// Includes, constants and tables; the host code.
  llvm::raw_ostream &fileScope, &host;
  /// The kernel being written.
  std::string kernelText;
  llvm::raw_string_ostream kernels{kernelText};
  StepLayouts layouts;
  KernelSet &kernelSet;
  int &gemmSites, &convSites, &attentionSites;
  /// The family headers the kernels' source includes (every step's).
  std::set<std::string> &includes;
  /// The body of the current op's host code.
  std::string bodyText;
  llvm::raw_string_ostream body{bodyText};
  /// Whether an operand, table entry or scratch the op asked for could not
  /// be given (its emission then fails).
  bool opFailed = false;
};

void CudaStepEmitter::beginKernel(int maxThreads) {
  kernelText.clear();
  kernels << "extern \"C\" __global__ void __launch_bounds__(" << maxThreads
          << ") " << KernelSet::kNameToken << "(const Regions r) {\n";
}

std::string CudaStepEmitter::hostPointer(Value v, bool strided) {
  Layout l = layouts.lookup(v);
  if (l.isSplat() || !l.region || (!strided && !l.isContiguous())) {
    error(kernelOp, "a cuBLASLt or cuDNN operand must live in the plan (not "
                    "a constant or a strided view)");
    opFailed = true;
    return "nullptr";
  }
  return std::string(1, regionLetter(*l.region)) + " + " +
         std::to_string(l.offset);
}

std::string CudaStepEmitter::pointerAt(Value v, int64_t elements) {
  FailureOr<std::string> p = layouts.pointerAt(v, kernelOp, elements);
  if (failed(p)) {
    opFailed = true;
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

  beginKernel(kThreads);
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
    launch(1, 1, 32);
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
    launch(gridFor(vectors), 1, kThreads);
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
  launch(gridFor(total), 1, kThreads);
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

bool CudaStepEmitter::overwrittenBefore(Value v, Operation *from,
                                        Operation *to) {
  // By the plan's placements: the layouts of the ops in between are not
  // assigned yet.
  Operation *producer = v.getDefiningOp();
  if (!producer)
    return false;
  unsigned index = llvm::cast<OpResult>(v).getResultNumber();
  int64_t begin = plan::arenaOffset(producer, index);
  if (begin < 0)
    return false;
  int64_t end = begin + storageBytes(v.getType());
  for (Operation *op = from->getNextNode(); op && op != to;
       op = op->getNextNode()) {
    PlacementAttr placed = plan::placement(op);
    if (!placed || placed.getStridedView())
      continue;
    for (OpResult result : op->getResults()) {
      int64_t written = plan::arenaOffset(op, result.getResultNumber());
      if (written >= 0 && written < end &&
          begin < written + storageBytes(result.getType()))
        return true;
    }
  }
  return false;
}

bool CudaStepEmitter::foldsIntoUpdate(Operation *op) {
  auto mul = llvm::dyn_cast<MulOp>(op);
  if (!mul || isFused(mul) || !mul.getResult().hasOneUse())
    return false;
  auto update = llvm::dyn_cast<CudaMultiTensorOpInterface>(
      *mul.getResult().getUsers().begin());
  if (!update || update.getUpdatedGradient() != mul.getResult())
    return false;
  for (auto [grad, other] : {std::pair(mul.getLhs(), mul.getRhs()),
                             std::pair(mul.getRhs(), mul.getLhs())}) {
    auto broadcast = other.getDefiningOp<BroadcastOp>();
    if (!broadcast || !isFused(broadcast) ||
        !update.foldsGradientScale(broadcast.getInput()))
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
    // The launch reads the scale where the update runs, after the plan
    // may have given its bytes to a value computed since the multiply
    // (the plan ends the scale's life at the multiply).
    if (overwrittenBefore(broadcast.getInput(), mul, update))
      continue;
    foldedScales[mul.getResult()] = {grad, broadcast.getInput()};
    return true;
  }
  return false;
}

LogicalResult CudaStepEmitter::emitMultiTensorRun(ArrayRef<Operation *> ops,
                                                  size_t &i) {
  // The optimizer's run: updates (with the multiplies folded into them, and
  // views between them). The updates are independent (each writes its own
  // parameter and state, which nothing in the run reads), so they are
  // grouped by kind and settings, one launch a group, whatever order the
  // schedule gave them.
  std::vector<CudaMultiTensorOpInterface> run;
  size_t j = i;
  for (; j < ops.size(); ++j) {
    Operation *o = ops[j];
    if (j > i && failed(layouts.assign(o)))
      return failure();
    if (auto update = llvm::dyn_cast<CudaMultiTensorOpInterface>(o))
      run.push_back(update);
    else if (!layouts.isView(o) && !foldsIntoUpdate(o))
      break;
  }
  i = j - 1;
  auto scaleOf = [&](CudaMultiTensorOpInterface u) {
    return foldedScale(u.getUpdatedGradient()).scale;
  };
  std::vector<bool> taken(run.size(), false);
  for (size_t first = 0; first < run.size(); ++first) {
    if (taken[first])
      continue;
    CudaMultiTensorOpInterface head = run[first];
    launchGroup.clear();
    for (size_t k = first; k < run.size(); ++k)
      if (!taken[k] && (k == first || head.sharesLaunchWith(run[k])) &&
          scaleOf(run[k]) == scaleOf(head)) {
        launchGroup.push_back(run[k]);
        taken[k] = true;
      }
    std::string what = describeLocation(head->getLoc()) + ": " +
                       head->getName().getStringRef().str();
    if (launchGroup.size() > 1)
      what += " x" + std::to_string(launchGroup.size()) + " (multi-tensor)";
    if (failed(emitOp(head)))
      return failure();
    record(what);
  }
  launchGroup.clear();
  return success();
}

LogicalResult CudaStepEmitter::emitOp(Operation *op) {
  if (isElementwiseKernel(op))
    return emitLoop(op);
  kernelOp = op;
  opFailed = false;
  if (auto kernel = llvm::dyn_cast<CudaKernelOpInterface>(op))
    return failure(failed(kernel.emitCudaKernel(*this)) || opFailed);
  return error(op, "this op has no CUDA kernel");
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
          "L.regions.workspace,\n"
       << "                *const B = L.regions.buffers;\n"
       << "  (void)A; (void)P; (void)G; (void)S; (void)I; (void)W; (void)B;\n";
  std::vector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  // Data parallelism: a bucket's sum is awaited before the first op that
  // reads it and starts after the op that finishes it (for ops emitted
  // together, before and after the group).
  auto awaits = [&](Operation *op) {
    if (GradientSyncAttr sync = plan::gradientSync(op))
      for (int64_t bucket : sync.getAwait())
        host << "  L.awaitGradients(" << bucket << ");\n";
  };
  auto readies = [&](Operation *op) {
    if (GradientSyncAttr sync = plan::gradientSync(op))
      for (int64_t bucket : sync.getReady())
        host << "  L.gradientsReady(" << bucket << ");\n";
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    Operation *op = ops[i];
    if (failed(layouts.assign(op)))
      return failure();
    if (layouts.isView(op)) {
      awaits(op);
      readies(op);
      continue;
    }
    std::string name = describeLocation(op->getLoc()) + ": " +
                       op->getName().getStringRef().str();
    size_t first = i;
    bodyText.clear();
    LogicalResult emitted = success();
    if (llvm::isa<CudaMultiTensorOpInterface>(op)) {
      for (size_t k = i; k < ops.size() &&
                         (llvm::isa<CudaMultiTensorOpInterface>(ops[k]) ||
                          layouts.isView(ops[k]) || foldsIntoUpdate(ops[k]));
           ++k)
        awaits(ops[k]);
      if (failed(emitMultiTensorRun(ops, i)))
        return failure();
      for (size_t k = first; k <= i; ++k)
        readies(ops[k]);
      continue;
    }
    if (foldsIntoUpdate(op)) { // scaled by the launch that reads it
      awaits(op);
      readies(op);
      continue;
    }
    if (auto matmul = llvm::dyn_cast<MatmulOp>(op)) {
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
      size_t last = absorbed ? j : i;
      for (size_t k = i; k <= last; ++k)
        awaits(ops[k]);
      emitted = emitOp(op);
      i = last;
      absorbed = nullptr;
    } else {
      awaits(op);
      emitted = emitOp(op);
    }
    if (failed(emitted))
      return failure();
    // record writes the op's code: the sums it completes start after it.
    record(name);
    for (size_t k = first; k <= i; ++k)
      readies(ops[k]);
  }
  awaits(block.getTerminator());
  // ZeRO-1: each rank updated its part; all of them get every parameter.
  if (GradientBucketsAttr buckets = plan::gradientBuckets(func);
      buckets && buckets.getShardBytes())
    host << "  L.gatherParameters();\n";
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
  int constantCount = 0, gemmSites = 0, convSites = 0, attentionSites = 0;
  KernelSet kernelSet;
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
    CudaStepEmitter emitter(f, kernels, host, constantCount, kernelSet,
                            gemmSites, convSites, attentionSites, includes);
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

  kernelSet.write(kernels);
  const std::vector<std::string> &kernelNames = kernelSet.names;

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
