//===- FrontendFuzzer.cpp - libFuzzer entry for the frontend --------------===//
//
// Feeds arbitrary bytes through the whole frontend as a model file. Any crash,
// hang, sanitizer report or abort is a bug. When Sema accepts a model, the
// IR built from it must pass the dialect verifiers: a verifier complaint
// means Sema and the op definitions disagree, so it aborts too.
//
//===----------------------------------------------------------------------===//

#include "frontend/AST.h"
#include "frontend/Diagnostics.h"
#include "frontend/MLIRGen.h"
#include "frontend/Program.h"
#include "frontend/Sema.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>

using namespace mnemo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::SourceMgr sourceMgr;
  Diagnostics diags(sourceMgr, llvm::nulls());
  auto program =
      loadProgram(llvm::MemoryBuffer::getMemBufferCopy(text, "fuzz.mn"),
                  {MNEMO_STDLIB_DIR}, diags);
  if (!program)
    return 0;
  printAST(program->mainModule(), sourceMgr, llvm::nulls());
  if (diags.hadError())
    return 0;
  std::optional<Graph> graph = elaborate(*program, ElaborateOptions(), diags);
  if (!graph || diags.hadError())
    return 0;

  static mlir::MLIRContext *context = [] {
    auto *ctx = new mlir::MLIRContext();
    ctx->disableMultithreading();
    return ctx;
  }();
  std::string verifierErrors;
  mlir::ScopedDiagnosticHandler handler(context, [&](mlir::Diagnostic &diag) {
    verifierErrors += diag.str() + "\n";
    return mlir::success();
  });
  if (!mlirGen(*context, *graph)) {
    std::fprintf(stderr,
                 "Sema accepted a model whose IR does not verify:\n%s\n",
                 verifierErrors.c_str());
    std::abort();
  }
  return 0;
}
