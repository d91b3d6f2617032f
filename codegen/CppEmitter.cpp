//===- CppEmitter.cpp - C++ for the CPU backend ---------------------------===//
//
// One pass over each planned step function, in its scheduled order:
//
// - Every value gets a Layout: a typed pointer into a region of the plan
//   (arena, parameters, gradients, optimizer state, inputs) and strides.
//   Views (reshapes, strided transposes) get their source's pointer; splat
//   constants get a literal; fused values get nothing (they are computed
//   inside their consumer's loop).
// - Each op that is not fused becomes one loop (an elementwise root) or
//   what its family's CPU model writes through CpuKernelContext
//   (lang/ops/FAMILY/FAMILYEmission.cpp): calls of the family's kernels with
//   its shapes as constants, sgemm, or the copy loop of a materialized
//   broadcast or transpose.
//
// The loop of an elementwise root evaluates the whole tree of fused
// producers per element. Its dimensions are coalesced wherever every
// operand and the result agree, so the common cases become one flat loop
// (same shapes) or an outer loop over rows around a contiguous inner loop
// (a broadcast bias), which the C++ compiler vectorizes.
//
//===----------------------------------------------------------------------===//

#include "codegen/CppEmitter.h"
#include "codegen/KernelContext.h"
#include "codegen/StepLayout.h"
#include "lang/ModelAttributes.h"
#include "lang/PlanAttributes.h"

#include "lang/MnemoOps.h"
#include "passes/BufferAnalysis.h"
#include "passes/Fusion.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/xxhash.h"

#include <map>
#include <set>

using namespace mlir;
using namespace mnemo;
using namespace mnemo::codegen;

namespace {

/// Renders a pointer into a region of the plan as host C++.
/// The generated code's name of a region (runtime/MemoryRegion.h).
std::string regionEnumerator(MemoryRegion region) {
  static const char *const names[] = {
      "Arena",  "Parameters", "Gradients", "OptimizerState",
      "Inputs", "Workspace",  "Buffers"};
  static_assert(std::size(names) == kMemoryRegionCount);
  return std::string("mnemo::MemoryRegion::") + names[int(region)];
}

/// The generated code's name of an argument role (runtime/ArgumentRole.h).
std::string roleEnumerator(ArgumentRole role) {
  static const char *const names[] = {
      "Input", "Target", "Param", "Buffer", "OptState", "Step", "TotalSteps"};
  static_assert(std::size(names) == kArgumentRoleCount);
  return std::string("mnemo::ArgumentRole::") + names[int(role)];
}

std::string hostPointer(const CType &type, MemoryRegion region,
                        int64_t offset) {
  return type.cast + "(" + std::string(1, regionLetter(region)) + " + " +
         std::to_string(offset) + ")";
}

/// The elementwise loops of every step, each distinct one defined once as
/// a function of its arrays. The layers of a deep model run the same loops
/// on other arrays, and the eval step repeats the forward's: GPT-2 small's
/// bf16 steps have 1107 loops but 27 distinct ones, and written inline,
/// each copy was vectorized again (model.cpp took 80 s to compile, 30 s
/// with the loops shared).
struct LoopFunctions {
  /// A definition without its name, and the name it got.
  std::map<std::string, std::string> names;
  std::string definitions;
};

class StepEmitter : public CpuKernelContext {
public:
  StepEmitter(func::FuncOp func, llvm::raw_ostream &os,
              llvm::raw_ostream &constants, int &constantCount,
              LoopFunctions &loops, std::set<std::string> &includes)
      : func(func), current(&os),
        layouts(func, hostPointer, "alignas(64) const", constants,
                constantCount, "CPU"),
        constants(constants), constantCount(constantCount), loops(loops),
        includes(includes) {}

  LogicalResult emit();

  /// "mlp.mn:13:21 fc1: mnemo.matmul" for each timed op, in order.
  std::vector<std::string> opNames;

private:
  InFlightDiagnostic error(Operation *op, const Twine &message) {
    return layouts.error(op, message);
  }
  LogicalResult emitOp(Operation *op);
  LogicalResult emitOpCode(Operation *op);
  LogicalResult emitOpBody(Operation *op);
  /// The call of the function that runs an elementwise root's loop.
  LogicalResult emitLoop(Operation *root);
  /// That function's body.
  static void writeLoop(const Loop &loop, llvm::raw_ostream &os);

  // What an op family's emission model sees (CpuKernelContext).
  std::string operand(Value v) override {
    if (opFailed) // one error per op
      return "nullptr";
    FailureOr<std::string> pointer = layouts.pointer(v, kernelOp);
    opFailed = failed(pointer);
    return opFailed ? "nullptr" : *pointer;
  }
  std::string result(unsigned i) override {
    return layouts[kernelOp->getResult(i)].pointer;
  }
  void include(StringRef header) override { includes.insert(header.str()); }
  std::string constantArray(ArrayRef<int64_t> values) override {
    return layouts.shapeArray(Shape(values.begin(), values.end()));
  }
  std::string fileScopeObject(StringRef type, StringRef arguments) override {
    std::string name = "site" + std::to_string(constantCount++);
    constants << type << " " << name << "(" << arguments << ");\n";
    return name;
  }
  std::string workspace(int64_t bytes) override {
    auto declared = llvm::dyn_cast<CpuWorkspaceOpInterface>(kernelOp);
    if (!opFailed && (!declared || bytes > declared.getCpuWorkspaceBytes())) {
      error(kernelOp, "internal error: the op's CPU kernels ask for " +
                          std::to_string(bytes) +
                          " bytes of workspace, more than it declares "
                          "(CpuWorkspaceOpInterface)");
      opFailed = true;
    }
    return "f32(W)";
  }
  FailureOr<GemmProblem> gemmProblem(bool ta, bool tb) override {
    return layouts.gemmProblem(kernelOp, ta, tb);
  }
  LogicalResult copyLoop() override { return emitLoop(kernelOp); }
  InFlightDiagnostic error(const Twine &message) override {
    return error(kernelOp, message);
  }

  func::FuncOp func;
  /// Where code goes: the function, or an op's body being indented.
  llvm::raw_ostream *current;
  llvm::raw_ostream &out() override { return *current; }
  StepLayouts layouts;
  /// The op a family's model is emitting, and whether an operand or the
  /// workspace it asked for could not be given (its emission then fails).
  Operation *kernelOp = nullptr;
  bool opFailed = false;
  /// File-scope declarations, and the counter that names them.
  llvm::raw_ostream &constants;
  int &constantCount;
  LoopFunctions &loops;
  /// The family kernel headers the file includes.
  std::set<std::string> &includes;
};

LogicalResult StepEmitter::emitLoop(Operation *root) {
  FailureOr<Loop> built = layouts.buildLoop(root);
  if (failed(built))
    return failure();
  Loop &loop = *built;
  const Layout &resultLayout = layouts[root->getResult(0)];
  // The arrays the loop reads (p0, ...), then the one it writes.
  std::vector<std::string> pointers, parameters;
  for (const Loop::Leaf &leaf : loop.leaves) {
    parameters.push_back("const " + leaf.type.name + " *p" +
                         std::to_string(pointers.size()));
    pointers.push_back(leaf.pointer);
  }
  parameters.push_back(resultLayout.type.name + " *p" +
                       std::to_string(pointers.size()));
  pointers.push_back(resultLayout.pointer);
  if (loop.usesDropout) {
    parameters.push_back("int64_t dropoutStep");
    pointers.push_back("dropoutStep");
  }
  std::string definition;
  llvm::raw_string_ostream os(definition);
  os << "(" << llvm::join(parameters, ", ") << ") {\n";
  writeLoop(loop, os);
  os << "}\n\n";
  // The same loop on other arrays (another layer's) calls the same
  // function.
  auto [it, added] = loops.names.try_emplace(
      definition, "loop" + std::to_string(loops.names.size()));
  if (added)
    loops.definitions += "void " + it->second + definition;
  out() << "  " << it->second << "(" << llvm::join(pointers, ", ") << ");\n";
  return success();
}

void StepEmitter::writeLoop(const Loop &loop, llvm::raw_ostream &os) {
  const std::string &value = loop.value;
  // The result is the last array: contiguous over the loop's shape.
  CoalescedLoop c = coalesce(loop, rowMajorStrides(loop.shape));
  const Shape &dims = c.dims;
  const std::vector<Shape> &strides = c.strides;
  size_t outLeaf = strides.size() - 1;
  auto index = [](const std::string &base, const std::string &i, int64_t s) {
    std::string term = s == 0 ? "" : s == 1 ? i : i + " * " + std::to_string(s);
    if (base.empty())
      return term.empty() ? std::string("0") : term;
    return term.empty() ? base : base + " + " + term;
  };
  auto body = [&](const std::vector<std::string> &reads,
                  const std::string &flat, const std::string &indent) {
    for (const std::string &s : loop.statements)
      os << indent << substitute(s, reads, flat) << "\n";
    os << indent
       << substitute(reads[outLeaf] + " = " + value + ";", reads, flat) << "\n";
  };
  std::vector<std::string> reads(strides.size());
  if (dims.empty()) {
    for (size_t k = 0; k < reads.size(); ++k)
      reads[k] = "p" + std::to_string(k) + "[0]";
    body(reads, "0", "  ");
    return;
  }
  int64_t total = product(dims);
  if (dims.size() == 1) {
    for (size_t k = 0; k < reads.size(); ++k)
      reads[k] =
          "p" + std::to_string(k) + "[" + index("", "i", strides[k][0]) + "]";
    os << "  parallelFor(" << total
       << ", 8192, [&](int64_t begin, int64_t end) {\n"
       << "    for (int64_t i = begin; i < end; ++i) {\n";
    body(reads, "i", "      ");
    os << "    }\n  });\n";
    return;
  }
  int64_t inner = dims.back();
  int64_t outer = total / inner;
  os << "  parallelFor(" << outer << ", " << std::max<int64_t>(1, 8192 / inner)
     << ", [&](int64_t begin, int64_t end) {\n"
     << "    for (int64_t o = begin; o < end; ++o) {\n";
  // The outer coordinates, then each array's offset of the row.
  int64_t after = 1;
  std::vector<std::string> coords(dims.size() - 1);
  for (int64_t d = int64_t(dims.size()) - 2; d >= 0; --d) {
    coords[d] = "c" + std::to_string(d);
    os << "      const int64_t " << coords[d] << " = o";
    if (after != 1)
      os << " / " << after;
    if (d != 0)
      os << " % " << dims[d];
    os << ";\n";
    after *= dims[d];
  }
  for (size_t k = 0; k < reads.size(); ++k) {
    std::string base;
    for (size_t d = 0; d + 1 < dims.size(); ++d)
      if (strides[k][d] != 0)
        base += (base.empty() ? "" : " + ") + coords[d] + " * " +
                std::to_string(strides[k][d]);
    os << "      const int64_t b" << k << " = " << (base.empty() ? "0" : base)
       << ";\n";
    reads[k] = "p" + std::to_string(k) + "[" +
               index("b" + std::to_string(k), "j", strides[k].back()) + "]";
  }
  os << "      for (int64_t j = 0; j < " << inner << "; ++j) {\n";
  body(reads, "o * " + std::to_string(inner) + " + j", "        ");
  os << "      }\n    }\n  });\n";
}

LogicalResult StepEmitter::emitOp(Operation *op) {
  // Data parallelism: the sums over the ranks this op reads must have
  // finished; those it completes start after it (even where the op itself
  // writes nothing).
  GradientSyncAttr sync = plan::gradientSync(op);
  if (sync)
    for (int64_t bucket : sync.getAwait())
      out() << "  if (memory.exchange) memory.exchange->awaitGradients("
            << bucket << ");\n";
  LogicalResult emitted = emitOpCode(op);
  if (sync)
    for (int64_t bucket : sync.getReady())
      out() << "  if (memory.exchange) memory.exchange->gradientsReady("
            << bucket << ");\n";
  return emitted;
}

LogicalResult StepEmitter::emitOpCode(Operation *op) {
  // Views, constants and fused values write nothing.
  if (layouts.isView(op))
    return success();

  std::string name = describeLocation(op->getLoc()) + ": " +
                     op->getName().getStringRef().str();
  out() << "  // " << name << "\n";
  // Every op is timed when the trainer runs with --profile (a null check
  // otherwise).
  out() << "  {\n    const double opStart = opClock(memory.opSeconds);\n";
  int index = int(opNames.size());
  opNames.push_back(name);
  // The body, indented one level inside the timer's scope.
  std::string body;
  llvm::raw_string_ostream bodyStream(body);
  llvm::raw_ostream *outer = current;
  current = &bodyStream;
  LogicalResult emitted = emitOpBody(op);
  current = outer;
  llvm::SmallVector<StringRef> lines;
  StringRef(bodyStream.str()).split(lines, '\n', -1, false);
  for (StringRef line : lines)
    out() << "  " << line << "\n";
  out() << "    opTime(memory.opSeconds, " << index << ", opStart);\n  }\n";
  return emitted;
}

LogicalResult StepEmitter::emitOpBody(Operation *op) {
  if (isElementwiseKernel(op))
    return emitLoop(op);
  kernelOp = op;
  opFailed = false;
  if (auto kernel = llvm::dyn_cast<CpuKernelOpInterface>(op))
    return failure(failed(kernel.emitCpuKernel(*this)) || opFailed);
  return error(op, "this op has no CPU kernel");
}

LogicalResult StepEmitter::emit() {
  Block &body = func.getBody().front();
  if (failed(layouts.assignArguments()))
    return failure();
  out() << "void " << func.getName()
        << "(const StepMemory &memory, int64_t dropoutStep) {\n"
        << "  uint8_t *const A = memory.arena, *const P = memory.parameters,\n"
        << "                *const G = memory.gradients, *const S = "
           "memory.optimizerState,\n"
        << "                *const I = memory.inputs, *const W = "
           "memory.workspace,\n"
        << "                *const B = memory.buffers;\n"
        << "  (void)A; (void)P; (void)G; (void)S; (void)I; (void)W; (void)B;\n"
        << "  (void)dropoutStep;\n";
  for (Operation &op : body.without_terminator()) {
    if (failed(layouts.assign(&op)) || failed(emitOp(&op)))
      return failure();
  }
  // Sums nothing in the step reads still finish before it returns.
  if (GradientSyncAttr sync = plan::gradientSync(body.getTerminator()))
    for (int64_t bucket : sync.getAwait())
      out() << "  if (memory.exchange) memory.exchange->awaitGradients("
            << bucket << ");\n";
  // ZeRO-1: each rank updated its part; all of them get every parameter.
  if (GradientBucketsAttr buckets = plan::gradientBuckets(func);
      buckets && buckets.getShardBytes())
    out() << "  if (memory.exchange) memory.exchange->gatherParameters();\n";
  out() << "}\n\n";
  return success();
}

/// The largest value `arg` may hold when a kernel reads it as an index:
/// classes for a target, rows for embedding indices (through reshapes).
int64_t indexLimit(Value arg) {
  int64_t limit = 0;
  auto tighten = [&](int64_t l) {
    limit = limit == 0 ? l : std::min(limit, l);
  };
  SmallVector<Value> work{arg};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (llvm::isa<ReshapeOp>(user))
        work.push_back(user->getResult(0));
      else if (auto ce = llvm::dyn_cast<CrossEntropyOp>(user))
        tighten(shapeOf(ce.getLogits()).back());
      else if (auto ce = llvm::dyn_cast<LinearCrossEntropyOp>(user))
        tighten(shapeOf(ce.getWeight())[ce.getTransposeWeight() ? 0 : 1]);
      else if (auto acc = llvm::dyn_cast<AccuracyOp>(user))
        tighten(shapeOf(acc.getLogits()).back());
      else if (auto e = llvm::dyn_cast<EmbeddingOp>(user);
               e && use.getOperandNumber() == 1)
        tighten(shapeOf(e.getTable())[0]);
    }
  }
  return limit;
}

/// The target value a loss reading `arg` skips (its ignore_index), if any:
/// a recorded batch may hold it where `arg` is otherwise an index.
std::optional<int64_t> ignoredIndex(Value arg) {
  for (Operation *user : arg.getUsers()) {
    if (auto ce = llvm::dyn_cast<CrossEntropyOp>(user))
      return int64_t(ce.getIgnoreIndex());
    if (auto ce = llvm::dyn_cast<LinearCrossEntropyOp>(user))
      return int64_t(ce.getIgnoreIndex());
  }
  return std::nullopt;
}

void emitStepInfo(func::FuncOp func, StringRef prefix,
                  const std::vector<std::string> &opNames,
                  llvm::raw_ostream &os) {
  Block &body = func.getBody().front();
  os << "const char *const " << prefix << "Ops[] = {\n";
  for (const std::string &name : opNames)
    os << "    " << cString(name) << ",\n";
  if (opNames.empty())
    os << "    \"\",\n";
  os << "};\n";
  os << "const ArgumentInfo " << prefix << "Arguments[] = {\n";
  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    Shape shape = shapeOf(arg);
    os << "    {" << cString(model::argumentName(func, i)) << ", "
       << roleEnumerator(
              model::argumentRole(func, i).value_or(ArgumentRole::Input))
       << ", " << cString(dtypeName(arg.getType())) << ", " << shape.size()
       << ", {" << listOf(shape) << "}, "
       << regionEnumerator(plan::slot(func, i).getRegion()) << ", "
       << plan::slot(func, i).getOffset() << ", " << storageBytes(arg.getType())
       << ", " << cString(jsonString(model::argumentInit(func, i))) << ", "
       << indexLimit(arg) << ", " << (ignoredIndex(arg) ? "true" : "false")
       << ", " << ignoredIndex(arg).value_or(0) << "},\n";
  }
  os << "};\n";
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
  os << "const ResultInfo " << prefix << "Results[] = {\n";
  int results = 0;
  for (auto [r, v] : llvm::enumerate(ret.getOperands())) {
    StringRef name = model::resultName(func, r);
    Operation *def = v.getDefiningOp();
    if (name.empty() || !def || plan::reusedArgument(func, r))
      continue;
    int64_t offset =
        plan::arenaOffset(def, llvm::cast<OpResult>(v).getResultNumber());
    if (offset < 0 || llvm::cast<ShapedType>(v.getType()).getRank() != 0)
      continue;
    os << "    {" << cString(name) << ", " << offset << "},\n";
    ++results;
  }
  if (results == 0)
    os << "    {\"\", -1},\n";
  os << "};\n";
  GradientBucketsAttr buckets = plan::gradientBuckets(func);
  if (buckets) {
    os << "const mnemo::runtime::GradientBucket " << prefix
       << "GradientBuckets[] = {\n";
    for (auto [offset, bytes] :
         llvm::zip(buckets.getOffsets(), buckets.getSizes()))
      os << "    {" << offset << ", " << bytes << "},\n";
    os << "};\n";
  }
  // ZeRO-1: the parameters the updates write, and their gradients' places.
  int places = 0;
  if (buckets && buckets.getShardBytes()) {
    os << "const mnemo::runtime::ParameterPlace " << prefix
       << "ParameterPlaces[] = {\n";
    for (Operation &op : body) {
      if (!llvm::isa<AdamUpdateOp, SgdUpdateOp>(op))
        continue;
      auto param = llvm::cast<BlockArgument>(op.getOperand(0));
      auto grad = llvm::cast<OpResult>(op.getOperand(1));
      os << "    {" << plan::slot(func, param.getArgNumber()).getOffset()
         << ", "
         << plan::placement(grad.getOwner())
                .getGradientOffsets()[grad.getResultNumber()]
         << ", " << 4 * llvm::cast<ShapedType>(param.getType()).getNumElements()
         << "},\n";
      ++places;
    }
    os << "};\n";
  }
  StepPlanAttr stepPlan = plan::stepPlan(func);
  os << "const StepInfo " << prefix << "Info = {" << func.getName() << ", "
     << stepPlan.getArenaBytes() << ", " << stepPlan.getGradientBytes() << ", "
     << stepPlan.getWorkspaceBytes() << ", " << body.getNumArguments() << ", "
     << prefix << "Arguments, " << results << ", " << prefix << "Results, "
     << opNames.size() << ", " << prefix << "Ops";
  if (buckets)
    os << ", " << buckets.getOffsets().size() << ", " << prefix
       << "GradientBuckets";
  if (places)
    os << ", " << buckets.getShardBytes() << ", " << buckets.getStateTensors()
       << ", " << places << ", " << prefix << "ParameterPlaces";
  os << "};\n\n";
}

} // namespace

LogicalResult mnemo::emitCpp(ModuleOp module, StringRef sourceFile,
                             llvm::raw_ostream &os) {
  SmallVector<func::FuncOp> steps = stepFunctions(module);
  // An inference plan (CompressWeights) has @eval_step alone.
  if (steps.empty())
    return emitError(module.getLoc())
           << "the model has no train section, so there is no trainer to "
              "generate";
  func::FuncOp train = module.lookupSymbol<func::FuncOp>("train_step");
  for (func::FuncOp f : steps)
    if (failed(BufferAnalysis::analyzePlanned(f)))
      return failure();
  // Parameters and the batch live in regions that both steps share: their
  // offsets must agree.
  if (func::FuncOp eval = module.lookupSymbol<func::FuncOp>("eval_step");
      eval && train) {
    llvm::StringMap<int64_t> trainOffsets;
    for (unsigned i = 0; i < train.getNumArguments(); ++i)
      if (StringRef name = model::argumentName(train, i); !name.empty())
        trainOffsets[name] = plan::slot(train, i).getOffset();
    for (unsigned i = 0; i < eval.getNumArguments(); ++i) {
      StringRef name = model::argumentName(eval, i);
      int64_t offset = plan::slot(eval, i).getOffset();
      if (!name.empty() && trainOffsets.count(name) &&
          trainOffsets[name] != offset)
        return eval.emitError()
               << "internal error: argument '" << name
               << "' is planned at different offsets in @train_step and "
                  "@eval_step";
    }
  }

  std::string code, constantsText;
  llvm::raw_string_ostream codeStream(code), constantStream(constantsText);
  int constantCount = 0;
  std::map<std::string, std::vector<std::string>> opNames;
  std::set<std::string> includes;
  LoopFunctions loops;
  registerFamilyEmissionModels(*module.getContext());
  for (func::FuncOp f : steps) {
    StepEmitter emitter(f, codeStream, constantStream, constantCount, loops,
                        includes);
    if (failed(emitter.emit()))
      return failure();
    opNames[f.getName().str()] = emitter.opNames;
  }

  StringRef modelName = model::modelName(module);
  // The ranks the plan is for, and a hash of the steps' code that ranks
  // compare at start (runtime/Ranks.h).
  int64_t worldSize = 1;
  if (train)
    if (GradientBucketsAttr buckets = plan::gradientBuckets(train))
      worldSize = buckets.getWorldSize();
  std::string planHash = llvm::utohexstr(llvm::xxh3_64bits(
      constantStream.str() + loops.definitions + codeStream.str()));
  os << "// Generated by mnemoc from " << sourceFile << " (model "
     << (modelName.empty() ? "?" : modelName) << "). Do not edit.\n"
     << "//\n"
     << "// Every tensor lives at the offset the memory plan gave it: A is "
        "the\n"
     << "// arena, P the parameters, G their gradients, S the optimizer "
        "state,\n"
     << "// I the batch and W the kernels' workspace.\n\n"
     << "#include \"runtime/Model.h\"\n"
     << "#include \"runtime/cpu/Kernels.h\"\n";
  for (const std::string &header : includes)
    os << "#include \"" << header << "\"\n";
  os << "\n#include <cmath>\n#include <cstdint>\n#include <limits>\n\n"
     << "using namespace mnemo::cpu;\n"
     << "using mnemo::runtime::ArgumentInfo;\n"
     << "using mnemo::runtime::ModelInfo;\n"
     << "using mnemo::runtime::ResultInfo;\n"
     << "using mnemo::runtime::StepInfo;\n"
     << "using mnemo::runtime::StepMemory;\n\n"
     << "namespace {\n\n"
     << "inline float *f32(uint8_t *p) { return reinterpret_cast<float *>(p); "
        "}\n"
     << "inline int64_t *i64(uint8_t *p) { return reinterpret_cast<int64_t "
        "*>(p); }\n"
     << "inline int32_t *i32(uint8_t *p) { return reinterpret_cast<int32_t "
        "*>(p); }\n"
     << "inline int16_t *i16(uint8_t *p) { return "
        "reinterpret_cast<int16_t *>(p); }\n"
     << "inline int8_t *i8(uint8_t *p) { return reinterpret_cast<int8_t *>(p); "
        "}\n"
     << "inline uint8_t *u8(uint8_t *p) { return p; }\n"
     << "inline bf16_t *bf16(uint8_t *p) { return reinterpret_cast<bf16_t "
        "*>(p); }\n"
     << "inline f16_t *f16(uint8_t *p) { return reinterpret_cast<f16_t *>(p); "
        "}\n\n"
     << constantStream.str() << "\n"
     << loops.definitions << codeStream.str();
  if (train)
    emitStepInfo(train, "train", opNames["train_step"], os);
  func::FuncOp eval = module.lookupSymbol<func::FuncOp>("eval_step");
  if (eval)
    emitStepInfo(eval, "eval", opNames["eval_step"], os);
  os << "const ModelInfo model = {\n"
     << "    " << cString(modelName) << ",\n"
     << "    " << cString(sourceFile) << ",\n"
     << "    " << cString(jsonString(model::hyperparams(module))) << ",\n"
     << "    " << cString(jsonString(model::trainSettings(module))) << ",\n"
     << "    " << (train ? "trainInfo" : "StepInfo{}") << ",\n"
     << "    " << (eval ? "evalInfo" : "StepInfo{}") << ",\n"
     << "    " << worldSize << ",\n"
     << "    \"" << planHash << "\",\n"
     << "    " << cString(model::precision(module)) << ",\n};\n\n"
     << "} // namespace\n\n"
     << "extern \"C\" const ModelInfo *mnemoModel() { return &model; }\n";
  return success();
}
