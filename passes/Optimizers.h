//===- Optimizers.h - Optimizers and schedules as mnemo IR ------*- C++ -*-===//
//
// What the `optimizer`, `schedule` and `clip_grad_norm` settings of the train
// section become in @train_step: per-parameter state, a learning-rate op and
// one update op per parameter, all in IR so the memory planner sees them.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_OPTIMIZERS_H
#define MNEMO_PASSES_OPTIMIZERS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <optional>
#include <string>
#include <vector>

namespace mnemo {

class Optimizer {
public:
  /// Reads the `mnemo.train` settings; emits an error at `loc` and fails
  /// when they name no optimizer.
  static mlir::FailureOr<Optimizer> fromSettings(mlir::DictionaryAttr train,
                                                 mlir::Location loc);

  /// The state a parameter of `paramType` carries between steps, by name
  /// and type: exp_avg and exp_avg_sq for Adam (for adamw8bit on tensors of
  /// 4096 elements or more, each as codes and block maxima);
  /// momentum_buffer for SGD with momentum.
  std::vector<std::pair<std::string, mlir::Type>>
  stateFor(mlir::Type paramType) const;
  /// adamw8bit on a tensor of at least 4096 elements.
  bool quantizesState(mlir::Type paramType) const;
  /// Elements per quantization block (adamw8bit's `block`, 2048).
  int64_t quantizationBlock() const;

  /// The learning rate at `step` (an i32 scalar, from 1) of `totalSteps`.
  mlir::Value learningRate(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value step, mlir::Value totalSteps) const;

  /// One update: returns the new parameter followed by its new state.
  /// With `skip` (an f32 scalar, f16 loss scaling), a nonzero skip leaves
  /// the parameter and its state as they are.
  llvm::SmallVector<mlir::Value> update(mlir::OpBuilder &b, mlir::Location loc,
                                        mlir::Value param, mlir::Value grad,
                                        mlir::ValueRange state, mlir::Value lr,
                                        mlir::Value step,
                                        mlir::Value skip = {}) const;

  /// The maximum global gradient norm, when the gradients are clipped.
  std::optional<double> clipNorm;

private:
  std::string kind; // sgd, adam, adamw, adamw8bit
  mlir::DictionaryAttr settings, schedule;
  std::vector<std::string> state;
};

} // namespace mnemo

#endif // MNEMO_PASSES_OPTIMIZERS_H
