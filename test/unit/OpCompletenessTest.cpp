//===- OpCompletenessTest.cpp - Every op declares what the passes need ----===//
//
// An op added to lang/MnemoOps.td without deciding what the pipeline must
// know of it fails here, not in a user's run. Today: its mixed-precision
// category (exactly one AMP trait, so the amp pass never guesses), its
// recompute cost (remat's price), its fusion class (exactly one, so
// fuse-elementwise never fuses an op the emitters cannot put in a loop) and,
// for an elementwise op that declares a formula, that ElementwiseFormulas.h has
// it with the op's operand and constant counts (the interpreter evaluates it
// and both backends call it). Its gradient rule (or NoGradient) is checked with
// the rules themselves, in GradientCheckTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelContext.h"
#include "lang/MnemoDialect.h"
#include "lang/MnemoOps.h"
#include "lang/interpreter/OpContext.h"

#include "mlir/IR/Builders.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace mlir;
using namespace mnemo;

namespace {

TEST(OpCompleteness, EveryOpHasExactlyOneAmpCategory) {
  MLIRContext context;
  context.getOrLoadDialect<MnemoDialect>();
  int ops = 0;
  for (RegisteredOperationName op : context.getRegisteredOperations()) {
    if (op.getDialectNamespace() != "mnemo")
      continue;
    ++ops;
    int categories = int(op.hasTrait<AmpLowPrecision>()) +
                     int(op.hasTrait<AmpF32>()) + int(op.hasTrait<AmpFollow>());
    EXPECT_EQ(categories, 1)
        << op.getStringRef().str()
        << " must declare exactly one of Mnemo_AmpLowPrecision, "
           "Mnemo_AmpF32, Mnemo_AmpFollow (MnemoInterfaces.td)";
  }
  EXPECT_GT(ops, 50); // the dialect's ops were found at all
}

// PyTorch autocast's lists, which the traits encode: products in the low
// type, reductions, exponentials, normalizations and losses in f32.
TEST(OpCompleteness, AmpCategoriesFollowAutocast) {
  MLIRContext context;
  context.getOrLoadDialect<MnemoDialect>();
  auto categoryOf = [&](StringRef name) {
    std::optional<RegisteredOperationName> op =
        RegisteredOperationName::lookup(name, &context);
    EXPECT_TRUE(op.has_value()) << name.str();
    if (!op)
      return std::string("?");
    return std::string(op->hasTrait<AmpLowPrecision>() ? "low"
                       : op->hasTrait<AmpF32>()        ? "f32"
                                                       : "follow");
  };
  for (const char *op : {"mnemo.matmul", "mnemo.batch_matmul", "mnemo.conv2d",
                         "mnemo.attention"})
    EXPECT_EQ(categoryOf(op), "low") << op;
  for (const char *op :
       {"mnemo.sum", "mnemo.mean", "mnemo.exp", "mnemo.log", "mnemo.pow",
        "mnemo.rsqrt", "mnemo.softmax", "mnemo.log_softmax", "mnemo.layernorm",
        "mnemo.rmsnorm", "mnemo.cross_entropy", "mnemo.mse", "mnemo.accuracy"})
    EXPECT_EQ(categoryOf(op), "f32") << op;
  // Autocast lists no cast for batch norm: it runs in its input's type with
  // f32 parameters and statistics (torch 1.13's CPU autocast records
  // native_batch_norm as bf16, f32, f32; test/reference/amp-dtypes.test).
  for (const char *op :
       {"mnemo.add", "mnemo.relu", "mnemo.gelu", "mnemo.dropout",
        "mnemo.reshape", "mnemo.max", "mnemo.batch_norm"})
    EXPECT_EQ(categoryOf(op), "follow") << op;
  std::optional<RegisteredOperationName> batchNorm =
      RegisteredOperationName::lookup("mnemo.batch_norm", &context);
  ASSERT_TRUE(batchNorm.has_value());
  EXPECT_TRUE(batchNorm->hasTrait<AmpParametersStayF32>());
  EXPECT_TRUE(batchNorm->hasTrait<AmpStatisticsStayF32>());
}

// Remat prices a recomputation by what the op declares; an op outside
// Mnemo_Op's class would be free to recompute, however large.
TEST(OpCompleteness, EveryOpHasARecomputeCost) {
  MLIRContext context;
  context.getOrLoadDialect<MnemoDialect>();
  for (RegisteredOperationName op : context.getRegisteredOperations())
    if (op.getDialectNamespace() == "mnemo")
      EXPECT_TRUE(op.hasInterface<RecomputeCostOpInterface>())
          << op.getStringRef().str()
          << " declares no recompute cost (RecomputeCostOpInterface)";
}

TEST(OpCompleteness, EveryOpHasExactlyOneFusionClass) {
  MLIRContext context;
  context.getOrLoadDialect<MnemoDialect>();
  for (RegisteredOperationName op : context.getRegisteredOperations()) {
    if (op.getDialectNamespace() != "mnemo")
      continue;
    std::string name = op.getStringRef().str();
    bool elementwise = op.hasTrait<FusionElementwise>();
    EXPECT_NE(elementwise, op.hasTrait<FusionKernel>())
        << name
        << " must declare exactly one of Mnemo_FusionElementwise, "
           "Mnemo_FusionKernel (MnemoInterfaces.td)";
    // What a fused loop needs: one result, the shape of its operands
    // (compare and logical have results of another element type, and say
    // so with the shape-only trait; where and cast verify their shapes
    // themselves, in the shape rules' words).
    if (elementwise)
      EXPECT_TRUE(op.hasTrait<OpTrait::SameOperandsAndResultType>() ||
                  op.hasTrait<OpTrait::SameOperandsAndResultShape>() ||
                  name == "mnemo.where" || name == "mnemo.cast")
          << name << " is elementwise but its operands and result differ";
  }
}

/// An op of `name` with `operands` f32 operands, and every attribute it
/// declares set to the first of a few candidates its constraint accepts (a
/// required exponent needs one; defaulted ones could stay unset).
Operation *createDefault(OpBuilder &builder, RegisteredOperationName name,
                         unsigned operands, Value input) {
  MLIRContext *context = builder.getContext();
  ScopedDiagnosticHandler quiet(context,
                                [](Diagnostic &) { return success(); });
  auto emitError = [&] { return mlir::emitError(builder.getUnknownLoc()); };
  NamedAttrList attributes;
  for (StringAttr attribute : name.getAttributeNames())
    for (Attribute candidate : {Attribute(builder.getF64FloatAttr(2.0)),
                                Attribute(builder.getBoolAttr(true)),
                                Attribute(builder.getI64IntegerAttr(1))}) {
      NamedAttrList tried = attributes;
      tried.set(attribute, candidate);
      if (succeeded(name.verifyInherentAttrs(tried, emitError))) {
        attributes = tried;
        break;
      }
    }
  OperationState state(builder.getUnknownLoc(), name);
  state.addOperands(SmallVector<Value>(operands, input));
  state.addTypes(input.getType());
  state.addAttributes(attributes);
  return builder.create(state);
}

TEST(OpCompleteness, EveryFormulaOpHasItsFormula) {
  MLIRContext context;
  context.getOrLoadDialect<MnemoDialect>();
  OpBuilder builder(&context);
  auto type = RankedTensorType::get({2}, builder.getF32Type());
  // An f32 value for the ops' operands: any op with one result will do,
  // since nothing here is verified or run.
  OperationState sourceState(builder.getUnknownLoc(), "mnemo.causal_mask");
  sourceState.addTypes(type);
  Operation *source = builder.create(sourceState);
  int formulas = 0;
  for (RegisteredOperationName op : context.getRegisteredOperations()) {
    if (op.getDialectNamespace() != "mnemo")
      continue;
    std::string name = op.getStringRef().str();
    if (op.hasTrait<FusionElementwise>() &&
        !op.hasInterface<ElementwiseFormulaOpInterface>()) {
      // The operators, casts, selections, comparisons, logic and dropout:
      // rendered by the family's own rules, which know exactly these.
      EXPECT_TRUE(llvm::is_contained(
          {"mnemo.add", "mnemo.sub", "mnemo.mul", "mnemo.div", "mnemo.cast",
           "mnemo.where", "mnemo.compare", "mnemo.logical", "mnemo.dropout"},
          name))
          << name << " is elementwise but declares no formula";
      continue;
    }
    if (!op.hasInterface<ElementwiseFormulaOpInterface>())
      continue;
    ++formulas;
    EXPECT_TRUE(op.hasTrait<FusionElementwise>()) << name;
    // Every formula op takes one f32 operand, or two for an activation's
    // backward op (grad, input).
    unsigned operands = llvm::StringRef(name).ends_with("_grad") ? 2 : 1;
    Operation *instance =
        createDefault(builder, op, operands, source->getResult(0));
    auto formula = llvm::cast<ElementwiseFormulaOpInterface>(instance);
    std::optional<interp::FormulaArity> arity =
        interp::elementwiseFormulaArity(formula.getFormulaName());
    ASSERT_TRUE(arity.has_value())
        << name << ": no formula '" << formula.getFormulaName().str()
        << "' in MNEMO_ELEMENTWISE_FORMULAS (ElementwiseFormulas.h)";
    EXPECT_EQ(arity->operands, int(operands)) << name;
    EXPECT_EQ(arity->constants, int(formula.getFormulaConstants().size()))
        << name;
    instance->erase();
  }
  source->erase();
  EXPECT_GE(formulas, 16); // neg ... softplus_grad were found at all
}

// Every op's family (lang/ops/*) gives it its interpreter, CPU and CUDA
// models; an op without one would fail in whichever backend lacks it, and
// the interpreter and the emitters have no cases of their own to fall back
// on. Elementwise ops are evaluated by their family's model and rendered
// inside fused loops, never as kernels; a constant is evaluated by its
// model, and the layouts make it a literal or a static array in both
// backends.
TEST(OpCompleteness, EveryOpHasAllItsModels) {
  MLIRContext context;
  context.getOrLoadDialect<MnemoDialect>();
  interp::registerFamilyInterpreterModels(context);
  codegen::registerFamilyEmissionModels(context);
  int kernelOps = 0, multiTensor = 0;
  for (RegisteredOperationName op : context.getRegisteredOperations()) {
    if (op.getDialectNamespace() != "mnemo")
      continue;
    std::string name = op.getStringRef().str();
    bool interpreted = op.hasInterface<InterpretedOpInterface>();
    bool cpu = op.hasInterface<CpuKernelOpInterface>();
    bool cuda = op.hasInterface<CudaKernelOpInterface>();
    EXPECT_TRUE(interpreted) << name << " has no interpreter model";
    if (op.hasTrait<FusionElementwise>() ||
        op.hasTrait<OpTrait::ConstantLike>()) {
      EXPECT_FALSE(cpu || cuda) << name << " is fused or laid out, not a "
                                << "kernel";
      continue;
    }
    ++kernelOps;
    multiTensor += op.hasInterface<CudaMultiTensorOpInterface>();
    EXPECT_TRUE(cpu) << name << " has no CPU emission model";
    EXPECT_TRUE(cuda) << name << " has no CUDA emission model";
  }
  // Every op but the 15 elementwise ones and the constant: logsumexp, the
  // matrix products (2), normalization (4), softmax (2), embedding (2),
  // losses (4), reductions (4), pooling (4), data movement (7), pruning
  // (2), quantization (8), convolution (3) and the optimizer (7).
  EXPECT_GE(kernelOps, 50);
  // adam_update and adamw8bit's: their CUDA launches update many tensors.
  EXPECT_EQ(multiTensor, 2);
}

} // namespace
