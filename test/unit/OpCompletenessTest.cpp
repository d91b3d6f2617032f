//===- OpCompletenessTest.cpp - Every op declares what the passes need ----===//
//
// An op added to lang/MnemoOps.td without deciding what the pipeline must
// know of it fails here, not in a user's run. Today: its mixed-precision
// category (exactly one AMP trait, so the amp pass never guesses) and its
// fusion class (exactly one, so fuse-elementwise never fuses an op the
// emitters cannot put in a loop). Its gradient rule (or NoGradient) is
// checked with the rules themselves, in GradientCheckTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "lang/MnemoDialect.h"
#include "lang/MnemoOps.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

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
  for (const char *op : {"mnemo.matmul", "mnemo.batch_matmul", "mnemo.conv2d"})
    EXPECT_EQ(categoryOf(op), "low") << op;
  for (const char *op :
       {"mnemo.sum", "mnemo.mean", "mnemo.exp", "mnemo.log", "mnemo.pow",
        "mnemo.rsqrt", "mnemo.softmax", "mnemo.log_softmax", "mnemo.layernorm",
        "mnemo.rmsnorm", "mnemo.cross_entropy", "mnemo.mse", "mnemo.accuracy"})
    EXPECT_EQ(categoryOf(op), "f32") << op;
  for (const char *op : {"mnemo.add", "mnemo.relu", "mnemo.gelu",
                         "mnemo.dropout", "mnemo.reshape", "mnemo.max"})
    EXPECT_EQ(categoryOf(op), "follow") << op;
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
    // (where and cast have operands of other element types).
    if (elementwise)
      EXPECT_TRUE(op.hasTrait<OpTrait::SameOperandsAndResultType>() ||
                  name == "mnemo.where" || name == "mnemo.cast")
          << name << " is elementwise but its operands and result differ";
  }
}

} // namespace
