//===- MLIRGen.cpp - Graph to the mnemo dialect ---------------------------===//

#include "frontend/MLIRGen.h"
#include "frontend/Graph.h"
#include "lang/MnemoDialect.h"
#include "lang/ModelAttributes.h"
#include "lang/PlanAttributes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"

#include "llvm/ADT/STLExtras.h"

#include <map>

using namespace mlir;
using namespace mnemo;

namespace {
class MLIRGenerator {
public:
  MLIRGenerator(MLIRContext &context, const Graph &graph)
      : builder(&context), graph(graph) {}

  OwningOpRef<ModuleOp> generate() {
    OwningOpRef<ModuleOp> module =
        ModuleOp::create(fileLoc({graph.fileName, 1, 1}));
    model::setModelName(*module, graph.modelName);
    SmallVector<NamedAttribute> hyper;
    for (const Setting &s : graph.hyperParams)
      hyper.push_back(builder.getNamedAttr(s.key, config(s.value)));
    model::setHyperparams(*module, builder.getDictionaryAttr(hyper));
    if (!graph.train.empty())
      model::setTrainSettings(*module, trainAttr());

    SmallVector<Type> argTypes, resultTypes;
    for (const GraphArg &arg : graph.args)
      argTypes.push_back(tensorType(graph.values[arg.value]));
    for (int out : graph.outputs)
      resultTypes.push_back(tensorType(graph.values[out]));
    for (auto [buffer, updated] : graph.bufferUpdates)
      resultTypes.push_back(tensorType(graph.values[updated]));

    builder.setInsertionPointToEnd(module->getBody());
    auto func = builder.create<func::FuncOp>(
        fileLoc({graph.fileName, 1, 1}), "forward",
        builder.getFunctionType(argTypes, resultTypes));
    Block *entry = func.addEntryBlock();
    // Set at once: each setArgAttrs(i, ...) would rebuild (and keep, as
    // attributes are never freed) the whole list, quadratic in arguments.
    SmallVector<DictionaryAttr> argAttrs;
    for (auto [i, arg] : llvm::enumerate(graph.args)) {
      values[arg.value] = entry->getArgument(i);
      entry->getArgument(i).setLoc(
          NameLoc::get(builder.getStringAttr(arg.name), fileLoc(arg.pos)));
      argAttrs.push_back(model::argumentAttrs(
          builder, arg.role, arg.name,
          arg.role == ArgRole::Param || arg.role == ArgRole::Buffer
              ? llvm::cast<DictionaryAttr>(config(arg.init))
              : DictionaryAttr()));
    }
    func.setAllArgAttrs(argAttrs);
    SmallVector<DictionaryAttr> resultAttrs;
    for (const std::string &name : graph.outputNames)
      resultAttrs.push_back(
          builder.getDictionaryAttr(model::resultNameAttr(builder, name)));
    // A buffer's new value is a result named after it, marked as the new
    // value of its argument (what the training step writes back).
    for (auto [buffer, updated] : graph.bufferUpdates)
      for (auto [i, arg] : llvm::enumerate(graph.args))
        if (arg.value == buffer)
          resultAttrs.push_back(builder.getDictionaryAttr(
              {model::resultNameAttr(builder, arg.name),
               plan::reusedArgumentAttr(builder, i)}));
    func.setAllResultAttrs(resultAttrs);

    builder.setInsertionPointToEnd(entry);
    for (const Node &node : graph.nodes)
      if (!emit(node))
        return nullptr;
    SmallVector<Value> results;
    for (int out : graph.outputs)
      results.push_back(values.at(out));
    for (auto [buffer, updated] : graph.bufferUpdates)
      results.push_back(values.at(updated));
    builder.create<func::ReturnOp>(fileLoc({graph.fileName, 1, 1}), results);

    if (failed(verify(*module)))
      return nullptr;
    return module;
  }

private:
  Location fileLoc(const SourcePos &pos) {
    if (pos.file.empty())
      return builder.getUnknownLoc();
    return FileLineColLoc::get(builder.getStringAttr(pos.file), pos.line,
                               pos.col);
  }

  /// The expression, called from each layer call site outward; named after
  /// the layer instance that owns the op.
  Location nodeLoc(const Node &node) {
    Location loc = fileLoc(node.trace.back());
    for (size_t i = node.trace.size() - 1; i-- > 0;)
      loc = CallSiteLoc::get(fileLoc(node.trace[i]), loc);
    if (!node.scope.empty())
      loc = NameLoc::get(builder.getStringAttr(node.scope), loc);
    // An op of a `checkpoint { ... }` block carries the block's number in
    // its location, which rewrites keep (an attribute would not survive the
    // canonicalizer's new ops).
    if (node.checkpoint >= 0)
      loc = FusedLoc::get(builder.getContext(), {loc},
                          builder.getI64IntegerAttr(node.checkpoint));
    return loc;
  }

  Type elementType(ElementType dtype) {
    switch (dtype) {
    case ElementType::F32:
      return builder.getF32Type();
    case ElementType::F16:
      return builder.getF16Type();
    case ElementType::BF16:
      return builder.getBF16Type();
    case ElementType::I64:
      return builder.getI64Type();
    case ElementType::I32:
      return builder.getI32Type();
    case ElementType::I16:
      return builder.getIntegerType(16);
    case ElementType::I8:
      return builder.getI8Type();
    case ElementType::I1:
      return builder.getI1Type();
    }
    llvm_unreachable("an element type without an MLIR type");
  }

  RankedTensorType tensorType(const mnemo::TensorType &type) {
    return RankedTensorType::get(type.shape, elementType(type.dtype));
  }

  Attribute config(const ConfigValue &value) {
    switch (value.kind) {
    case ConfigValue::Kind::Int:
      return builder.getI64IntegerAttr(value.intValue);
    case ConfigValue::Kind::Float:
      return builder.getF64FloatAttr(value.floatValue);
    case ConfigValue::Kind::Bool:
      return builder.getBoolAttr(value.boolValue);
    case ConfigValue::Kind::String:
    case ConfigValue::Kind::Symbol:
      return builder.getStringAttr(value.text);
    case ConfigValue::Kind::List: {
      SmallVector<Attribute> elements;
      for (const ConfigValue &e : value.list)
        elements.push_back(config(e));
      return builder.getArrayAttr(elements);
    }
    case ConfigValue::Kind::Call: {
      SmallVector<NamedAttribute> entries{
          builder.getNamedAttr("kind", builder.getStringAttr(value.text))};
      for (const Setting &arg : value.args)
        entries.push_back(builder.getNamedAttr(arg.key, config(arg.value)));
      return builder.getDictionaryAttr(entries);
    }
    }
    return builder.getUnitAttr();
  }

  /// Directives may repeat, so prune and quantize become arrays.
  DictionaryAttr trainAttr() {
    SmallVector<NamedAttribute> entries;
    std::map<std::string, SmallVector<Attribute>> lists;
    for (const Setting &s : graph.train) {
      if (s.key == "prune" || s.key == "quantize")
        lists[s.key].push_back(config(s.value));
      else
        entries.push_back(builder.getNamedAttr(s.key, config(s.value)));
    }
    for (auto &[key, list] : lists)
      entries.push_back(builder.getNamedAttr(key, builder.getArrayAttr(list)));
    return builder.getDictionaryAttr(entries);
  }

  Attribute opAttr(const NamedAttr &attr, RankedTensorType resultType) {
    return std::visit(
        [&](const auto &v) -> Attribute {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t>)
            return builder.getI64IntegerAttr(v);
          else if constexpr (std::is_same_v<T, double>) {
            if (attr.name == "value") {
              Type element = resultType.getElementType();
              Attribute scalar =
                  llvm::isa<FloatType>(element)
                      ? Attribute(builder.getFloatAttr(element, v))
                      : Attribute(builder.getIntegerAttr(element, int64_t(v)));
              return DenseElementsAttr::get(resultType, scalar);
            }
            return builder.getF64FloatAttr(v);
          } else if constexpr (std::is_same_v<T, bool>)
            return builder.getBoolAttr(v);
          else if constexpr (std::is_same_v<T, std::string>)
            return builder.getStringAttr(v);
          else if constexpr (std::is_same_v<T, std::vector<double>>) {
            Type element = resultType.getElementType();
            SmallVector<Attribute> elements;
            for (double x : v)
              elements.push_back(
                  llvm::isa<FloatType>(element)
                      ? Attribute(builder.getFloatAttr(element, x))
                      : Attribute(builder.getIntegerAttr(element, int64_t(x))));
            return DenseElementsAttr::get(resultType, elements);
          } else
            return builder.getDenseI64ArrayAttr(v);
        },
        attr.value);
  }

  bool emit(const Node &node) {
    RankedTensorType resultType = tensorType(graph.values[node.result]);
    OperationState state(nodeLoc(node), "mnemo." + node.op);
    for (int operand : node.operands)
      state.addOperands(values.at(operand));
    state.addTypes(resultType);
    for (int more : node.moreResults)
      state.addTypes(tensorType(graph.values[more]));
    // Fused attention also returns each query row's log-sum-exp (f32), which
    // only its gradient reads: the graph knows the output alone.
    if (node.op == "attention") {
      ArrayRef<int64_t> shape = resultType.getShape();
      state.addTypes(
          RankedTensorType::get(shape.drop_back(), builder.getF32Type()));
    }
    for (const NamedAttr &attr : node.attrs)
      state.addAttribute(attr.name, opAttr(attr, resultType));
    Operation *op = builder.create(state);
    values[node.result] = op->getResult(0);
    for (auto [k, more] : llvm::enumerate(node.moreResults))
      values[more] = op->getResult(k + 1);
    return true;
  }

  OpBuilder builder;
  const Graph &graph;
  std::map<int, Value> values;
};
} // namespace

OwningOpRef<ModuleOp> mnemo::mlirGen(MLIRContext &context, const Graph &graph) {
  context.getOrLoadDialect<MnemoDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
  return MLIRGenerator(context, graph).generate();
}
