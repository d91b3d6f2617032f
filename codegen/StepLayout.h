//===- StepLayout.h - Where a planned step's values live --------*- C++ -*-===//
//
// What the CPU and CUDA emitters share: one walk over a planned step that
// gives every value a Layout (a region of the plan and a byte offset, plus
// strides, or a literal), and the loop an elementwise root and its fused
// producers become, as backend-neutral C expressions. The emitters differ
// only in how they render a pointer and where a loop runs.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_CODEGEN_STEPLAYOUT_H
#define MNEMO_CODEGEN_STEPLAYOUT_H

#include "lang/ShapeRules.h"
#include "runtime/MemoryRegion.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mnemo::codegen {

using Shape = std::vector<int64_t>;

Shape shapeOf(mlir::Value v);
int64_t product(llvm::ArrayRef<int64_t> dims);
using shape::rowMajorStrides;
/// A float literal that C++ and CUDA read back exactly.
std::string floatLiteral(double value);
std::string doubleLiteral(double value);

std::string listOf(llvm::ArrayRef<int64_t> values);
/// "mlp.mn:13:21 fc1" for a comment above an op's code.
std::string describeLocation(mlir::Location loc);
/// A C string literal of any text.
std::string cString(llvm::StringRef text);
std::string jsonString(mlir::Attribute attr);
std::string dtypeName(mlir::Type type);

/// The C element type of a tensor type; empty when no backend stores it.
struct CType {
  std::string name, cast;
  int64_t bytes = 0;
  bool isFloat = false;
  /// bf16 and f16: stored in 16 bits, computed in f32.
  bool isHalf = false;
};
CType ctypeOf(mlir::Type type);

/// Where a value's elements are: a region of the plan and a byte offset in
/// it, or a constant array (no region), or a literal when every element is
/// the same; and strides over its shape.
struct Layout {
  std::optional<MemoryRegion> region;
  int64_t offset = 0;
  std::string pointer; // rendered by the backend; empty for a splat
  std::string splat;   // the literal of a splat constant
  CType type;
  Shape shape, strides;

  bool isSplat() const { return pointer.empty(); }
  bool isContiguous() const;
};

/// The loop an elementwise root becomes: leaves read through strides over
/// the loop's shape, statements that name leaf reads as {Lk} and the flat
/// index as {FLAT}, and the value the root stores.
struct Loop {
  Shape shape;
  struct Leaf {
    std::string pointer;
    Shape strides;
    /// The region and byte offset (none: a constant array).
    std::optional<MemoryRegion> region;
    int64_t offset = 0;
    CType type;
  };
  std::vector<Leaf> leaves;
  std::vector<std::string> statements;
  std::string value;
  llvm::DenseMap<mlir::Value, std::string> names;
  int temporaries = 0;
  bool usesDropout = false;
};

/// A loop's dimensions after size-1 dimensions are dropped and neighbours
/// that every array walks contiguously are merged; `strides[k]` are array
/// k's (the leaves, then the result).
struct CoalescedLoop {
  Shape dims;
  std::vector<Shape> strides;
};
CoalescedLoop coalesce(const Loop &loop, const Shape &resultStrides);

/// Replaces {Lk} and {FLAT} in a statement.
std::string substitute(std::string s, const std::vector<std::string> &reads,
                       const std::string &flat);

/// A GEMM operand: its layout's pointer, whether BLAS reads it transposed,
/// its leading dimension, and its batch dimensions' strides (row-major
/// view).
struct GemmOperand {
  std::string pointer;
  bool transpose = false;
  int64_t ld = 0;
  Shape batchStrides;
};
mlir::FailureOr<GemmOperand> gemmOperand(const Layout &l, bool opTranspose);

/// A matrix product's operands as BLAS sees them, and its sizes: C [batch...,
/// m, n] = op(A) op(B) with k the inner dimension.
struct GemmProblem {
  Layout a, b, c;
  GemmOperand ga, gb;
  int64_t m = 0, n = 0, k = 0;
  Shape batch;
};

class StepLayouts;

/// One element of an elementwise op, as a C expression over its operands'
/// (`x`), the same text for both backends; an error on the op when it has
/// none. Each op family that fuses provides its own
/// (lang/ops/elementwise/ElementwiseEmission.cpp).
mlir::FailureOr<std::string>
elementwiseExpression(mlir::Operation *op, llvm::ArrayRef<std::string> x,
                      Loop &loop, StepLayouts &layouts);

/// Every value of one planned step function and where it lives.
class StepLayouts {
public:
  /// Renders a pointer to `offset` bytes into `region` as type `type`.
  using PointerFormat = std::function<std::string(
      const CType &type, MemoryRegion region, int64_t offset)>;

  /// Non-splat constants are declared into `constants` with `qualifier`
  /// ("alignas(64) const" on the CPU, "__device__ const" in CUDA).
  StepLayouts(mlir::func::FuncOp func, PointerFormat format,
              std::string qualifier, llvm::raw_ostream &constants,
              int &constantCount, std::string backend)
      : func(func), format(std::move(format)), qualifier(std::move(qualifier)),
        constants(constants), constantCount(constantCount),
        backend(std::move(backend)) {}

  /// The step's arguments (call first).
  mlir::LogicalResult assignArguments();
  /// The op's results; views get their source's storage.
  mlir::LogicalResult assign(mlir::Operation *op);
  const Layout &operator[](mlir::Value v) { return layouts[v]; }
  Layout lookup(mlir::Value v) const { return layouts.lookup(v); }
  bool has(mlir::Value v) const { return layouts.count(v); }

  /// True for ops that write nothing: fused values, constants, views.
  bool isView(mlir::Operation *op) const;

  /// The loop of an elementwise root (or a copy: broadcast, materialized
  /// transpose, reshape of a strided view).
  mlir::FailureOr<Loop> buildLoop(mlir::Operation *root);

  /// A pointer to the value's contiguous elements (a splat gets a constant
  /// array of its own).
  mlir::FailureOr<std::string> pointer(mlir::Value v, mlir::Operation *user);
  /// The same, `elements` further on: in a planned region, one region
  /// offset (`r.A + N`), so that a CUDA kernel reads it as a site offset and
  /// kernels that differ only there are one (KernelSet).
  mlir::FailureOr<std::string> pointerAt(mlir::Value v, mlir::Operation *user,
                                         int64_t elements);

  /// The GEMM of a matmul or batch_matmul (transposing its operands as the
  /// op says); an error on the op when an operand is a splat constant.
  mlir::FailureOr<GemmProblem> gemmProblem(mlir::Operation *op, bool ta,
                                           bool tb);

  /// Declares a shape array among the constants and returns its name.
  std::string shapeArray(const Shape &shape);

  mlir::InFlightDiagnostic error(mlir::Operation *op,
                                 const llvm::Twine &message) {
    return op->emitError() << "the " << backend << " backend: " << message;
  }

private:
  mlir::FailureOr<std::string> expression(mlir::Value v, Loop &loop);
  mlir::FailureOr<std::string> opExpression(mlir::Operation *op, Loop &loop);
  std::string leafRead(Loop &loop, const Layout &layout, Shape strides);
  std::string place(const CType &type, MemoryRegion region, int64_t offset) {
    return format(type, region, offset);
  }

  mlir::func::FuncOp func;
  PointerFormat format;
  std::string qualifier;
  llvm::raw_ostream &constants;
  int &constantCount;
  std::string backend;
  llvm::DenseMap<mlir::Value, Layout> layouts;
};

} // namespace mnemo::codegen

#endif // MNEMO_CODEGEN_STEPLAYOUT_H
