//===- PlanExport.cpp - The memory plan as JSON ---------------------------===//

#include "passes/PlanExport.h"
#include "lang/ModelAttributes.h"
#include "lang/PlanAttributes.h"
#include "passes/BufferAnalysis.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mnemo;

LogicalResult mnemo::writePlanJson(ModuleOp module, llvm::raw_ostream &os) {
  llvm::json::Array functions;
  for (func::FuncOp func : stepFunctions(module)) {
    std::string name = func.getName().str();
    FailureOr<BufferAnalysis> analysis = BufferAnalysis::analyzePlanned(func);
    if (failed(analysis))
      return failure();
    llvm::DenseMap<Operation *, int64_t> index;
    for (auto [i, op] : llvm::enumerate(analysis->order))
      index[op] = i;

    llvm::json::Array arguments;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      std::optional<ArgumentRole> role = model::argumentRole(func, i);
      Type type = func.getArgumentTypes()[i];
      arguments.push_back(llvm::json::Object{
          {"index", int64_t(i)},
          {"name", model::argumentName(func, i).str()},
          {"role", role ? argumentRoleName(*role) : ""},
          {"region", regionName(plan::slot(func, i).getRegion())},
          {"offset", plan::slot(func, i).getOffset()},
          {"type", tensorTypeString(type)},
          {"bytes", storageBytes(type)}});
    }
    llvm::json::Array buffers;
    for (auto [id, b] : llvm::enumerate(analysis->buffers)) {
      auto root = llvm::cast<OpResult>(b.root);
      PlacementAttr placement = plan::placement(root.getOwner());
      int64_t offset = placement.getOffsets()[root.getResultNumber()];
      int64_t gradientOffset =
          placement.getGradientOffsets().empty()
              ? int64_t(-1)
              : placement.getGradientOffsets()[root.getResultNumber()];
      llvm::json::Array values;
      for (Value v : b.values) {
        auto result = llvm::cast<OpResult>(v);
        values.push_back(llvm::json::Object{
            {"op_index", index.lookup(result.getOwner())},
            {"result", int64_t(result.getResultNumber())},
            {"op", result.getOwner()->getName().getStringRef().str()},
            {"type", tensorTypeString(v.getType())}});
      }
      buffers.push_back(llvm::json::Object{
          {"id", int64_t(id)},
          {"region", gradientOffset >= 0 ? "gradients" : "arena"},
          {"offset", gradientOffset >= 0 ? gradientOffset : offset},
          {"bytes", b.interval.size},
          {"first_op", b.interval.start},
          {"last_op", b.interval.end},
          {"kind", spell(b.kind)},
          {"values", std::move(values)}});
    }
    StepPlanAttr stepPlan = plan::stepPlan(func);
    functions.push_back(
        llvm::json::Object{{"function", name},
                           {"alignment", kArenaAlignment},
                           {"arena_bytes", stepPlan.getArenaBytes()},
                           {"lower_bound_bytes", stepPlan.getLowerBoundBytes()},
                           {"naive_bytes", stepPlan.getNaiveBytes()},
                           {"gradient_bytes", stepPlan.getGradientBytes()},
                           {"workspace_bytes", stepPlan.getWorkspaceBytes()},
                           {"planner", stepPlan.getPlanner().str()},
                           {"ops", int64_t(analysis->order.size())},
                           {"arguments", std::move(arguments)},
                           {"buffers", std::move(buffers)}});
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                   {"version", 1},
                                   {"model", model::modelName(module).str()},
                                   {"functions", std::move(functions)}}))
     << "\n";
  return success();
}

llvm::json::Value mnemo::attributeToJson(Attribute attr) {
  if (auto dict = llvm::dyn_cast_or_null<DictionaryAttr>(attr)) {
    llvm::json::Object o;
    for (NamedAttribute entry : dict)
      o[entry.getName().str()] = attributeToJson(entry.getValue());
    return o;
  }
  if (auto array = llvm::dyn_cast_or_null<ArrayAttr>(attr)) {
    llvm::json::Array a;
    for (Attribute element : array)
      a.push_back(attributeToJson(element));
    return a;
  }
  if (auto f = llvm::dyn_cast_or_null<FloatAttr>(attr))
    return f.getValueAsDouble();
  if (auto b = llvm::dyn_cast_or_null<BoolAttr>(attr))
    return b.getValue();
  if (auto i = llvm::dyn_cast_or_null<IntegerAttr>(attr))
    return i.getInt();
  if (auto s = llvm::dyn_cast_or_null<StringAttr>(attr))
    return s.getValue().str();
  return nullptr;
}
