//===- PlannedModule.cpp - What the emitters require of their input -------===//

#include "codegen/PlannedModule.h"
#include "passes/BufferAnalysis.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

static const char *const kPlanNote =
    " (run the default pipeline, or plan-memory, on it first)";

static LogicalResult checkStep(func::FuncOp func) {
  for (const char *name :
       {"mnemo.arena_bytes", "mnemo.gradient_bytes", "mnemo.workspace_bytes",
        "mnemo.cuda_workspace_bytes"})
    if (!func->getAttrOfType<IntegerAttr>(name))
      return emitError(func.getLoc())
             << "@" << func.getName() << " has no memory plan: '" << name
             << "' is missing" << kPlanNote;
  int64_t arena =
      func->getAttrOfType<IntegerAttr>("mnemo.arena_bytes").getInt();
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (!func.getArgAttrOfType<StringAttr>(i, "mnemo.region") ||
        !func.getArgAttrOfType<IntegerAttr>(i, "mnemo.offset"))
      return emitError(func.getLoc())
             << "@" << func.getName() << ": argument " << i
             << " has no planned region and offset" << kPlanNote;
  for (Operation &op : func.getBody().front().without_terminator()) {
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("mnemo.offset");
    auto sizes = op.getAttrOfType<DenseI64ArrayAttr>("mnemo.size");
    if (!offsets || !sizes)
      return op.emitError() << "has no planned offset and size" << kPlanNote;
    unsigned results = op.getNumResults();
    if (offsets.size() != results || sizes.size() != results)
      return op.emitError() << "has " << offsets.size() << " planned offsets "
                            << "and " << sizes.size() << " sizes for "
                            << results << " results";
    for (unsigned r = 0; r < results; ++r)
      if (offsets[r] < -1 || sizes[r] < 0 ||
          (offsets[r] >= 0 && offsets[r] + sizes[r] > arena))
        return op.emitError()
               << "result " << r << " is planned at [" << offsets[r] << ", +"
               << sizes[r] << "), outside the arena of " << arena << " bytes";
    for (const char *name : {"mnemo.alias_arg", "mnemo.gradient_offset"})
      if (Attribute a = op.getAttr(name)) {
        auto values = llvm::dyn_cast<DenseI64ArrayAttr>(a);
        if (!values || values.size() != results)
          return op.emitError()
                 << "'" << name << "' must hold one i64 per result";
      }
  }
  return success();
}

LogicalResult mnemo::checkPlannedModule(ModuleOp module) {
  SmallVector<func::FuncOp> steps = stepFunctions(module);
  if (steps.empty())
    return emitError(module.getLoc())
           << "the model has no train section, so there is no trainer to "
              "generate";
  for (func::FuncOp f : steps)
    if (failed(checkStep(f)))
      return failure();
  return success();
}
