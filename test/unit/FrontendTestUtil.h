//===- FrontendTestUtil.h - Compile model text in a unit test ---*- C++ -*-===//

#ifndef MNEMO_TEST_UNIT_FRONTENDTESTUTIL_H
#define MNEMO_TEST_UNIT_FRONTENDTESTUTIL_H

#include "frontend/Diagnostics.h"
#include "frontend/Graph.h"
#include "frontend/Program.h"
#include "frontend/Sema.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <optional>
#include <string>

namespace mnemo::test {

/// Parses and elaborates `source` (named test.mn); the diagnostics text is
/// kept in `errors`.
struct Compiled {
  std::string errors;
  unsigned errorCount = 0;
  std::optional<Graph> graph;
};

inline Compiled
compile(const std::string &source,
        std::vector<std::pair<std::string, std::string>> overrides = {}) {
  Compiled result;
  llvm::SourceMgr sourceMgr;
  llvm::raw_string_ostream os(result.errors);
  Diagnostics diags(sourceMgr, os);
  auto program =
      loadProgram(llvm::MemoryBuffer::getMemBufferCopy(source, "test.mn"),
                  {MNEMO_STDLIB_DIR}, diags);
  if (program && !diags.hadError()) {
    ElaborateOptions options;
    options.overrides = std::move(overrides);
    result.graph = elaborate(*program, options, diags);
  }
  result.errorCount = diags.errorCount();
  os.flush();
  return result;
}

/// The type of the model's output, "f32[128,10]", or "" on failure.
inline std::string outputType(const Compiled &c) {
  if (!c.graph)
    return "";
  int out = c.graph->outputs.back();
  return c.graph->values[out].str();
}

} // namespace mnemo::test

#endif // MNEMO_TEST_UNIT_FRONTENDTESTUTIL_H
