//===- ElementwiseOps.td - The elementwise op family -------*- tablegen -*-===//
//
// Ops whose every result element is a function of the operands' elements at
// the same index. Each is computed by one formula of ElementwiseFormulas.h,
// named after its mnemonic, which the interpreter (in double), the CPU and
// the CUDA fused loops all use; its gradient rule is either in the op's
// entry here (activations) or in ElementwiseGradients.cpp.
//
// Adding an activation `foo` with a backward op of its own is one
// `defm Mnemo_Foo : Mnemo_Activation<...>` below, the formulas `foo` and
// `foo_grad` (with their row) in ElementwiseFormulas.h, and a builtin row in
// frontend/Builtins.cpp (docs/architecture.md, "Adding an op").
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_OPS_ELEMENTWISE_ELEMENTWISEOPS_TD
#define MNEMO_LANG_OPS_ELEMENTWISE_ELEMENTWISEOPS_TD

include "lang/MnemoDialect.td"
include "lang/MnemoInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Formula ops
//===----------------------------------------------------------------------===//

// An op computed by the formula of ElementwiseFormulas.h named after its
// mnemonic. `constants` are the names of the attributes the formula takes
// after the operands, in its order (each getter's value, as a double).
class Mnemo_FormulaOp<string mnemonic, list<Trait> traits,
                      list<string> constants = []>
    : Mnemo_Op<mnemonic, traits # [Mnemo_FusionElementwise, Pure,
        DeclareOpInterfaceMethods<Mnemo_ElementwiseFormulaOpInterface,
                                  ["getFormulaConstants"]>]> {
  code formulaConstantsDefinition = [{
    ::llvm::SmallVector<double> $cppClass::getFormulaConstants() {
      return {}] # !interleave(!foreach(c, constants,
                       "::mnemo::formulaConstant(get" # c # "())"), ", ") # [{};
    }
  }];
  let extraClassDefinition = formulaConstantsDefinition;
}

class Mnemo_UnaryOp<string mnemonic, string what, Trait amp = Mnemo_AmpFollow>
    : Mnemo_FormulaOp<mnemonic, [amp, SameOperandsAndResultType, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
  let summary = "elementwise " # what;
  let description = [{
    Computes }] # what # [{ of every element.

    ```mlir
    %y = mnemo.}] # mnemonic # [{ %x : tensor<128x512xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Mnemo_NegOp : Mnemo_UnaryOp<"neg", "the negation">;
def Mnemo_ExpOp : Mnemo_UnaryOp<"exp", "e to the power", Mnemo_AmpF32>;
def Mnemo_LogOp : Mnemo_UnaryOp<"log", "the natural logarithm", Mnemo_AmpF32>;
def Mnemo_SqrtOp : Mnemo_UnaryOp<"sqrt", "the square root">;
def Mnemo_RsqrtOp : Mnemo_UnaryOp<"rsqrt", "the reciprocal square root", Mnemo_AmpF32>;
def Mnemo_TanhOp : Mnemo_UnaryOp<"tanh", "the hyperbolic tangent">;
def Mnemo_SigmoidOp : Mnemo_UnaryOp<"sigmoid", "the logistic sigmoid">;
// In f32 under mixed precision: rotary embeddings take them of angles up to
// the context length, where a bf16 angle is off by whole radians.
def Mnemo_SinOp : Mnemo_UnaryOp<"sin", "the sine", Mnemo_AmpF32>;
def Mnemo_CosOp : Mnemo_UnaryOp<"cos", "the cosine", Mnemo_AmpF32>;

def Mnemo_PowOp : Mnemo_FormulaOp<"pow", [Mnemo_AmpF32, SameOperandsAndResultType, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>], ["Exponent"]> {
  let summary = "elementwise power by a constant exponent";
  let description = [{
    ```mlir
    %sq = mnemo.pow %x {exponent = 2.000000e+00 : f64} : tensor<16x64xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input, F64Attr:$exponent);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Activations: a forward op and the backward op its gradient rule emits,
// `grad * f'(input)` (a composition of forward ops would keep more memory
// alive, or lose precision). The backward reads the forward's input, or its
// output where that determines f' (relu, as PyTorch's threshold_backward):
// the output is what the next layer keeps anyway, so a product followed by
// a relu keeps one tensor for the backward, not two.
//===----------------------------------------------------------------------===//

// One entry defines both: `defm Mnemo_Foo` gives Mnemo_FooOp ("foo") and
// Mnemo_FooGradOp ("foo_grad"), with the same attributes, passed to the
// formulas `foo` and `foo_grad` as `constants`.
multiclass Mnemo_Activation<string mnemonic, string what, string details,
                            dag attributes = (ins),
                            list<string> constants = [],
                            string exampleAttributes = "",
                            bit gradFromOutput = 0> {
  defvar saved = !if(gradFromOutput, "output", "input");
  def Op : Mnemo_FormulaOp<mnemonic, [Mnemo_AmpFollow, SameOperandsAndResultType,
      DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>], constants> {
    let summary = "elementwise " # what;
    let description = details # [{

      ```mlir
      %y = mnemo.}] # mnemonic # [{ %x}] # exampleAttributes # [{ : tensor<128x512xf32>
      ```
    }];
    let arguments = !con((ins Mnemo_FloatTensor:$input), attributes);
    let results = (outs Mnemo_FloatTensor:$result);
    let assemblyFormat = "$input attr-dict `:` type($result)";
    let extraClassDefinition = formulaConstantsDefinition # [{
      ::llvm::SmallVector<::mlir::Value>
      $cppClass::buildGradient(::mlir::OpBuilder &builder,
                               ::llvm::ArrayRef<::mlir::Value> grads) {
        return ::mnemo::buildActivationGradient(getOperation(), builder, grads,
            /*fromOutput=*/}] # !if(gradFromOutput, "true", "false") # [{);
      }
    }];
  }
  def GradOp : Mnemo_FormulaOp<mnemonic # "_grad", [Mnemo_AmpFollow, Mnemo_NoGradient,
      SameOperandsAndResultType], constants> {
    let summary = "gradient of " # mnemonic;
    let description = [{
      `grad * f'(input)` for the activation }] # mnemonic # [{, from the
      forward's }] # saved # [{.

      ```mlir
      %dx = mnemo.}] # mnemonic # [{_grad %dy, }] # !if(gradFromOutput, "%y", "%x") # exampleAttributes # [{ : tensor<128x512xf32>
      ```
    }];
    let arguments = !con((ins Mnemo_FloatTensor:$grad),
                         !if(gradFromOutput, (ins Mnemo_FloatTensor:$output),
                                             (ins Mnemo_FloatTensor:$input)),
                         attributes);
    let results = (outs Mnemo_FloatTensor:$result);
    let assemblyFormat = "$grad `,` $" # saved # " attr-dict `:` type($result)";
  }
}

defm Mnemo_Relu : Mnemo_Activation<"relu", "max(x, 0)", [{
    `max(x, 0)`, with PyTorch's NaN semantics (a NaN passes through).
  }], (ins), [], "", /*gradFromOutput=*/1>;
defm Mnemo_Silu : Mnemo_Activation<"silu", "x * sigmoid(x)", [{
    `x * sigmoid(x)` (SiLU, or swish).
  }]>;
defm Mnemo_Gelu : Mnemo_Activation<"gelu", "GELU", [{
    `x * Phi(x)` with the exact normal CDF, or with PyTorch's tanh
    approximation when `approximate` is set (GPT-2 uses it).
  }], (ins DefaultValuedAttr<BoolAttr, "false">:$approximate), ["Approximate"],
  " {approximate = true}">;
defm Mnemo_Softplus : Mnemo_Activation<"softplus", "softplus", [{
    `torch.nn.Softplus`: `log(1 + exp(beta * x)) / beta`, and `x` itself
    where `beta * x > threshold`.
  }], (ins DefaultValuedAttr<F64Attr, "1.0">:$beta,
           DefaultValuedAttr<F64Attr, "20.0">:$threshold), ["Beta", "Threshold"],
  " {beta = 2.000000e+00 : f64, threshold = 1.000000e+01 : f64}">;

//===----------------------------------------------------------------------===//
// Arithmetic, selection, conversion and dropout: C++ operators rather than
// formulas (they apply to integers too, or need the element's index), which
// ElementwiseEmission.cpp and ElementwiseInterpreter.cpp render themselves.
//===----------------------------------------------------------------------===//

class Mnemo_BinaryOp<string mnemonic, string what, Trait amp = Mnemo_AmpFollow>
    : Mnemo_Op<mnemonic, [amp, Mnemo_FusionElementwise, Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
  let summary = "elementwise " # what;
  let description = [{
    Elementwise }] # what # [{ of two tensors of one type.
    Broadcasting is explicit: the frontend inserts `mnemo.broadcast`.

    ```mlir
    %z = mnemo.}] # mnemonic # [{ %x, %y : tensor<128x512xf32>
    ```
  }];
  let arguments = (ins Mnemo_NumericTensor:$lhs, Mnemo_NumericTensor:$rhs);
  let results = (outs Mnemo_NumericTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Mnemo_AddOp : Mnemo_BinaryOp<"add", "addition"> { let hasFolder = 1; }
def Mnemo_SubOp : Mnemo_BinaryOp<"sub", "subtraction"> { let hasFolder = 1; }
def Mnemo_MulOp : Mnemo_BinaryOp<"mul", "multiplication"> { let hasFolder = 1; }
def Mnemo_DivOp : Mnemo_BinaryOp<"div", "division"> { let hasFolder = 1; }

def Mnemo_CastOp : Mnemo_Op<"cast", [Mnemo_AmpFollow, Mnemo_FusionElementwise, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
  let summary = "elementwise conversion to another element type";
  let description = [{
    Float-to-float casts round to nearest even; float-to-integer casts
    truncate toward zero.

    ```mlir
    %h = mnemo.cast %x : tensor<128x784xf32> -> tensor<128x784xbf16>
    ```
  }];
  let arguments = (ins Mnemo_AnyTensor:$input);
  let results = (outs Mnemo_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Mnemo_WhereOp : Mnemo_Op<"where", [Mnemo_AmpFollow, Mnemo_FusionElementwise, Pure, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>,
    AllTypesMatch<["on_true", "on_false", "result"]>]> {
  let summary = "elementwise select by a mask";
  let description = [{
    `result[i] = condition[i] ? on_true[i] : on_false[i]`; all shapes agree.

    ```mlir
    %m = mnemo.where %mask, %scores, %neg_inf
        : tensor<16x4x64x64xi1>, tensor<16x4x64x64xf32>
    ```
  }];
  let arguments = (ins Mnemo_MaskTensor:$condition,
                       Mnemo_AnyTensor:$on_true, Mnemo_AnyTensor:$on_false);
  let results = (outs Mnemo_AnyTensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:` type($condition) `,`
    type($result)
  }];
  let hasVerifier = 1;
}

// Masks from tensors: comparisons and boolean logic. Their results are
// i1, so they have no gradient; `where` turns a mask into values.

def Mnemo_CompareOp : Mnemo_Op<"compare", [SameOperandsAndResultShape, Mnemo_AmpFollow, Mnemo_FusionElementwise, Pure, Mnemo_NoGradient]> {
  let summary = "an elementwise comparison, to a boolean mask";
  let description = [{
    `lhs PREDICATE rhs` per element, as torch's `==`, `!=`, `<`, `<=`, `>`,
    `>=` (predicates `eq ne lt le gt ge`). The operands have one shape and
    are both integers of one type, or both floating-point (mixed precision
    may leave them of different widths: they compare as values); NaN is
    unequal to everything, as in IEEE 754.

    ```mlir
    %pad = mnemo.compare %ids, %zero {predicate = "eq"}
        : tensor<8x128xi32>, tensor<8x128xi32> -> tensor<8x128xi1>
    ```
  }];
  let arguments = (ins Mnemo_NumericTensor:$lhs, Mnemo_NumericTensor:$rhs,
                       StrAttr:$predicate);
  let results = (outs Mnemo_MaskTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
  let hasVerifier = 1;
}

def Mnemo_LogicalOp : Mnemo_Op<"logical", [SameOperandsAndResultShape, Mnemo_AmpFollow, Mnemo_FusionElementwise, Pure, Mnemo_NoGradient]> {
  let summary = "elementwise boolean logic on masks";
  let description = [{
    `and`, `or` and `xor` of two masks, or `not` of one, as torch's `&`,
    `|`, `^` and `~` on bool tensors.

    ```mlir
    %keep = mnemo.logical %a, %b {kind = "and"} : (tensor<8x128xi1>, tensor<8x128xi1>) -> tensor<8x128xi1>
    ```
  }];
  let arguments = (ins Variadic<Mnemo_MaskTensor>:$inputs, StrAttr:$kind);
  let results = (outs Mnemo_MaskTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
}

def Mnemo_DropoutOp : Mnemo_Op<"dropout", [Mnemo_AmpFollow, Mnemo_FusionElementwise, Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<Mnemo_GradientOpInterface>]> {
  let summary = "inverted dropout with a fixed seed";
  let description = [{
    Zeroes each element with probability `p` and scales the rest by
    `1 / (1 - p)`. The mask is a pure function of `seed`, the step and the
    element index (ElementwiseFormulas.h's dropoutUniform), so the backward
    pass regenerates it instead of storing it.

    ```mlir
    %y = mnemo.dropout %x {p = 1.000000e-01 : f64, seed = 3 : i64}
        : tensor<16x64x128xf32>
    ```
  }];
  let arguments = (ins Mnemo_FloatTensor:$input, F64Attr:$p, I64Attr:$seed);
  let results = (outs Mnemo_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // MNEMO_LANG_OPS_ELEMENTWISE_ELEMENTWISEOPS_TD
