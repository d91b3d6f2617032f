//===- Pruning.h - The train section's `prune` as mnemo IR ------*- C++ -*-===//
//
// What `prune PATTERN = method(...)` becomes in @train_step: a bitmask per
// pruned weight (state, one bit per element), the gradient masked before
// the optimizer, a `prune_masks` op per directive after it, and the new
// mask applied to the weight and to its optimizer state, so that pruned
// elements, Adam's moments included, stay exactly zero.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_PRUNING_H
#define MNEMO_PASSES_PRUNING_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <vector>

namespace mnemo {

class Pruning {
public:
  /// Reads the `prune` directives of the `mnemo.train` settings for the
  /// parameters named `names` (of `types`, declared at `locs`); emits an
  /// error at the parameter and fails when a directive cannot apply to it.
  static mlir::FailureOr<Pruning> fromSettings(
      mlir::DictionaryAttr train, llvm::ArrayRef<llvm::StringRef> names,
      llvm::ArrayRef<mlir::Type> types, llvm::ArrayRef<mlir::Location> locs);

  bool empty() const { return directives.empty(); }
  /// Whether parameter `k` is pruned.
  bool prunes(unsigned k) const { return directiveOf[k] >= 0; }
  /// The mask state of a pruned parameter: i32[ceil(n / 32)].
  mlir::Type maskType(mlir::Type paramType) const;

  /// The `prune_masks` ops of every directive, after the optimizer:
  /// `params[k]` is parameter k as updated, `masks[k]` its mask (null when
  /// not pruned). Returns the new masks, indexed the same way, and in
  /// `updated[k]` the flag of the op that updates mask k (1 on the steps
  /// that recompute it).
  llvm::SmallVector<mlir::Value>
  updateMasks(mlir::OpBuilder &b, mlir::Location loc, mlir::Value step,
              llvm::ArrayRef<mlir::Value> params,
              llvm::ArrayRef<mlir::Value> masks,
              llvm::SmallVectorImpl<mlir::Value> &updated) const;

  /// `value` with the elements that `mask` marks set to zero; with `when`,
  /// only when it is nonzero.
  static mlir::Value apply(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value value, mlir::Value mask,
                           mlir::Value when = {});

  /// A result that updates an argument in place, then what it masks, and
  /// so on: a pruned weight's update writes into the argument and the masks
  /// apply in place there, so the first op of the chain (the optimizer's)
  /// is the one that must follow the argument's last read.
  static llvm::SmallVector<mlir::Value> maskedChain(mlir::Value updated);

private:
  struct Directive {
    mlir::DictionaryAttr settings;
    llvm::SmallVector<unsigned> params;
  };
  std::vector<Directive> directives;
  std::vector<int> directiveOf; // per parameter; -1 when not pruned
};

} // namespace mnemo

#endif // MNEMO_PASSES_PRUNING_H
