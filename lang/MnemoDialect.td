//===- MnemoDialect.td - The mnemo dialect -----------------*- tablegen -*-===//

#ifndef MNEMO_DIALECT_TD
#define MNEMO_DIALECT_TD

include "mlir/IR/OpBase.td"
include "lang/MnemoInterfaces.td"

def Mnemo_Dialect : Dialect {
  let name = "mnemo";
  let cppNamespace = "::mnemo";
  let summary = "Tensor operations of Mnemo models, with static shapes";
  let description = [{
    The `mnemo` dialect is what a Mnemo model file becomes. Every value is a
    statically shaped tensor of `f32`, `f16`, `bf16`, `i32`, `i8` or `i1`
    (masks); every op's verifier checks shapes with the same rules the
    frontend uses (`lang/ShapeRules.h`). Broadcasting is always explicit
    (`mnemo.broadcast`), so elementwise ops take operands of one type.

    A model becomes `func.func @forward`, whose arguments are the model's
    inputs, targets and parameters. Argument attributes say which is which
    (`mnemo.role`), name parameters by path (`mnemo.name = "blocks.3.attn.wq"`)
    and record how to initialize them (`mnemo.init`).
  }];
  let hasConstantMaterializer = 1;
  // The memory plan's attributes (lang/MnemoAttrs.td) and their checks on
  // the ops, functions, arguments and results that carry them; the model's
  // own attributes (lang/ModelAttributes.h) are checked there too.
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

// Every op declares what recomputing it costs (MnemoInterfaces.td).
class Mnemo_Op<string mnemonic, list<Trait> traits = []>
    : Op<Mnemo_Dialect, mnemonic,
         !listconcat(traits, [Mnemo_RecomputeCostOpInterface])>;

def Mnemo_FloatTensor : StaticShapeTensorOf<[F32, F16, BF16]>;
def Mnemo_IndexTensor : StaticShapeTensorOf<[I32, I8]>;
def Mnemo_MaskTensor : StaticShapeTensorOf<[I1]>;
def Mnemo_NumericTensor : StaticShapeTensorOf<[F32, F16, BF16, I32, I8]>;
def Mnemo_AnyTensor : StaticShapeTensorOf<[F32, F16, BF16, I32, I8, I1]>;

#endif // MNEMO_DIALECT_TD
