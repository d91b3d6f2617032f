//===- Sema.h - From syntax to a typed graph --------------------*- C++ -*-===//
//
// Semantic analysis elaborates one model: it evaluates hyper-parameters
// (with -D overrides), instantiates every layer (naming parameters by path,
// as nn.Module does), runs the forward symbolically with shape and dtype
// inference, and validates the train section. The result is a Graph.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_FRONTEND_SEMA_H
#define MNEMO_FRONTEND_SEMA_H

#include "frontend/Graph.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mnemo {

class Diagnostics;
class Stmt;
struct Program;

struct ElaborateOptions {
  /// Which model of the main file; may be empty when it defines only one.
  std::string modelName;
  /// -D name=value, applied to the model's hyper-parameters.
  std::vector<std::pair<std::string, std::string>> overrides;
  /// --prune and --quantize: directives added to the train section (owned
  /// by the caller).
  std::vector<const Stmt *> directives;
};

/// Elaborates a model of `program`; nullopt after reporting errors.
std::optional<Graph> elaborate(const Program &program,
                               const ElaborateOptions &options,
                               Diagnostics &diags);

} // namespace mnemo

#endif // MNEMO_FRONTEND_SEMA_H
