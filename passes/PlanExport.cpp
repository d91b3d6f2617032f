//===- PlanExport.cpp - The memory plan as JSON ---------------------------===//

#include "passes/PlanExport.h"
#include "passes/BufferAnalysis.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mnemo;

static std::string typeString(Type type) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  std::string s;
  llvm::raw_string_ostream os(s);
  os << tensor.getElementType() << "[";
  for (int64_t i = 0; i < tensor.getRank(); ++i)
    os << (i ? "," : "") << tensor.getDimSize(i);
  os << "]";
  return os.str();
}

LogicalResult mnemo::writePlanJson(ModuleOp module, llvm::raw_ostream &os) {
  llvm::json::Array functions;
  for (StringRef name : {"train_step", "eval_step"}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      continue;
    auto arena = func->getAttrOfType<IntegerAttr>("mnemo.arena_bytes");
    if (!arena)
      return func.emitError(
          "has no memory plan (the plan-memory pass did not run)");
    FailureOr<BufferAnalysis> analysis = BufferAnalysis::analyze(func);
    if (failed(analysis))
      return failure();
    llvm::DenseMap<Operation *, int64_t> index;
    for (auto [i, op] : llvm::enumerate(analysis->order))
      index[op] = i;

    llvm::json::Array arguments;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto role = func.getArgAttrOfType<StringAttr>(i, "mnemo.role");
      auto argName = func.getArgAttrOfType<StringAttr>(i, "mnemo.name");
      Type type = func.getArgumentTypes()[i];
      arguments.push_back(
          llvm::json::Object{{"index", int64_t(i)},
                             {"name", argName ? argName.getValue().str() : ""},
                             {"role", role ? role.getValue().str() : ""},
                             {"type", typeString(type)},
                             {"bytes", storageBytes(type)}});
    }
    llvm::json::Array buffers;
    for (auto [id, b] : llvm::enumerate(analysis->buffers)) {
      auto root = llvm::cast<OpResult>(b.root);
      auto offsets =
          root.getOwner()->getAttrOfType<DenseI64ArrayAttr>("mnemo.offset");
      llvm::json::Array values;
      for (Value v : b.values) {
        auto result = llvm::cast<OpResult>(v);
        values.push_back(llvm::json::Object{
            {"op_index", index.lookup(result.getOwner())},
            {"result", int64_t(result.getResultNumber())},
            {"op", result.getOwner()->getName().getStringRef().str()},
            {"type", typeString(v.getType())}});
      }
      buffers.push_back(llvm::json::Object{
          {"id", int64_t(id)},
          {"offset", offsets ? offsets[root.getResultNumber()] : int64_t(-1)},
          {"bytes", b.interval.size},
          {"first_op", b.interval.start},
          {"last_op", b.interval.end},
          {"kind", spell(b.kind)},
          {"values", std::move(values)}});
    }
    functions.push_back(llvm::json::Object{
        {"function", name.str()},
        {"alignment", kArenaAlignment},
        {"arena_bytes", arena.getInt()},
        {"lower_bound_bytes",
         func->getAttrOfType<IntegerAttr>("mnemo.lower_bound_bytes").getInt()},
        {"naive_bytes",
         func->getAttrOfType<IntegerAttr>("mnemo.naive_bytes").getInt()},
        {"planner",
         func->getAttrOfType<StringAttr>("mnemo.planner").getValue().str()},
        {"ops", int64_t(analysis->order.size())},
        {"arguments", std::move(arguments)},
        {"buffers", std::move(buffers)}});
  }
  auto model = module->getAttrOfType<StringAttr>("mnemo.model");
  os << llvm::formatv("{0:2}",
                      llvm::json::Value(llvm::json::Object{
                          {"version", 1},
                          {"model", model ? model.getValue().str() : ""},
                          {"functions", std::move(functions)}}))
     << "\n";
  return success();
}
