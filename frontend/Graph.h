//===- Graph.h - The elaborated, typed model --------------------*- C++ -*-===//
//
// What semantic analysis produces from a model: every layer instantiated,
// every hyper-parameter evaluated, every tensor typed. It is a flat list of
// ops named after mnemo dialect ops, so MLIRGen is a 1:1 translation, and it
// has no MLIR dependency, so Sema can be unit-tested on its own.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_FRONTEND_GRAPH_H
#define MNEMO_FRONTEND_GRAPH_H

#include "lang/ElementType.h"
#include "lang/ShapeRules.h"
#include "runtime/ArgumentRole.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace mnemo {

struct TensorType {
  ElementType dtype = ElementType::F32;
  shape::Shape shape;

  /// "f32[128,784]", the notation of the language and of error messages.
  std::string str() const;
  bool operator==(const TensorType &o) const {
    return dtype == o.dtype && shape == o.shape;
  }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
};

struct SourcePos {
  std::string file;
  unsigned line = 0, col = 0;
};

/// Where an op came from: the expression first, then each layer call site
/// outward to the model's forward.
using SourceTrace = std::vector<SourcePos>;

struct Setting;

/// A compile-time value of a setting or an initializer, already validated.
struct ConfigValue {
  enum class Kind { Int, Float, Bool, String, Symbol, List, Call };
  Kind kind = Kind::Int;
  int64_t intValue = 0;
  double floatValue = 0;
  bool boolValue = false;
  std::string text;              // String, Symbol, Call (the name)
  std::vector<ConfigValue> list; // List
  std::vector<Setting> args;     // Call: every parameter, defaults filled in

  static ConfigValue ofInt(int64_t v);
  static ConfigValue ofFloat(double v);
  static ConfigValue ofBool(bool v);
  static ConfigValue ofString(std::string s);
  static ConfigValue ofSymbol(std::string s);
  static ConfigValue ofCall(std::string name, std::vector<Setting> args = {});

  /// The number, for Int and Float.
  double number() const {
    return kind == Kind::Int ? double(intValue) : floatValue;
  }
  /// The argument named `key` of a Call, or nullptr.
  const ConfigValue *arg(const std::string &key) const;
  /// Mnemo source notation: normal(std=0.02, mean=0).
  std::string str() const;
};

struct Setting {
  std::string key;
  ConfigValue value;
};

/// An attribute of a graph op; mapped to the matching MLIR attribute. A
/// constant's `value` is a splat (a double) or its elements (doubles).
using AttrValue = std::variant<int64_t, double, bool, std::string,
                               std::vector<int64_t>, std::vector<double>>;

struct NamedAttr {
  std::string name;
  AttrValue value;
};

/// A model argument is an input, a target, a parameter or a buffer (the
/// step functions add the other roles).
using ArgRole = ArgumentRole;

struct GraphArg {
  std::string name; // parameters: the module path, blocks.3.attn.wq
  ArgRole role;
  int value;        // id of the value this argument defines
  ConfigValue init; // parameters and buffers
  SourcePos pos;
};

struct Node {
  std::string op; // mnemo dialect op name without the prefix: "matmul"
  std::vector<int> operands;
  std::vector<NamedAttr> attrs;
  int result;
  /// The results after the first, for ops with several (batch_norm's
  /// statistics).
  std::vector<int> moreResults;
  std::string scope; // the layer instance path ("blocks.3.attn"), may be empty
  SourceTrace trace;
  /// The `checkpoint { ... }` block the op was computed in (numbered in
  /// program order), or -1.
  int checkpoint = -1;
};

struct Graph {
  std::string modelName;
  std::string fileName;
  std::vector<Setting> hyperParams; // resolved, overrides applied
  std::vector<TensorType> values;   // indexed by value id
  std::vector<GraphArg> args;       // inputs, targets, parameters, then buffers
  std::vector<Node> nodes;          // in program order
  std::vector<int> outputs;
  /// "loss", "output"; "eval_loss" and "eval_output" after them when the
  /// forward differs in evaluation (it reads `training` or updates a
  /// buffer): the nodes then hold both forwards, training's first.
  std::vector<std::string> outputNames;
  /// What the training forward leaves in each buffer it updates: (the
  /// buffer's argument value, its value at the end of the forward).
  std::vector<std::pair<int, int>> bufferUpdates;
  std::vector<Setting> train;           // the validated train section

  int addValue(TensorType type) {
    values.push_back(std::move(type));
    return int(values.size()) - 1;
  }
  int64_t parameterCount() const;
};

} // namespace mnemo

#endif // MNEMO_FRONTEND_GRAPH_H
