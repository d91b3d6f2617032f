//===- Program.h - A model file and everything it imports -------*- C++ -*-===//

#ifndef MNEMO_FRONTEND_PROGRAM_H
#define MNEMO_FRONTEND_PROGRAM_H

#include "frontend/AST.h"

#include "llvm/ADT/StringRef.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class MemoryBuffer;
} // namespace llvm

namespace mnemo {

class Diagnostics;

/// The parsed main file and its transitive imports, with one namespace of
/// layer and model definitions.
struct Program {
  std::vector<std::unique_ptr<Module>> modules; // main file first
  /// Every definition by name; where two files define one name, the file
  /// loaded first (the main file before its imports) wins.
  std::map<std::string, const Definition *> definitions;

  /// `name` as seen from a definition in `from`: its own file first, so a
  /// model named MLP in the main file does not capture std's uses of MLP.
  const Definition *find(const std::string &name, const Module *from) const;

  const Module &mainModule() const { return *modules.front(); }
  /// The models defined in the main file, in order.
  std::vector<const Definition *> mainModels() const;
};

/// Parses `buffer` and, recursively, what it imports. `import a.b` looks for
/// a/b.mn next to the importing file, then under each search path (the
/// standard library lives at <search path>/std/). Errors go to `diags`.
std::unique_ptr<Program>
loadProgram(std::unique_ptr<llvm::MemoryBuffer> buffer,
            const std::vector<std::string> &searchPaths, Diagnostics &diags);

/// The largest model file (or import) read: a model is a few kilobytes of
/// text, and a path such as /dev/zero must not be read without end.
constexpr uint64_t kMaxModelFileBytes = uint64_t(16) << 20;

/// Reads `path` ("-" for stdin), at most kMaxModelFileBytes, and calls the
/// above.
std::unique_ptr<Program>
loadProgramFile(llvm::StringRef path,
                const std::vector<std::string> &searchPaths,
                Diagnostics &diags);

} // namespace mnemo

#endif // MNEMO_FRONTEND_PROGRAM_H
