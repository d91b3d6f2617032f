//===- Diagnostics.h - Clang-style errors for model files -------*- C++ -*-===//
//
// Every message is `file:line:col: error: text`, then the source line and a
// caret (llvm::SourceMgr prints them as clang does). Counts errors so that the
// driver can exit with status 1, and stops printing after a limit so that a
// badly broken file cannot flood the terminal.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_FRONTEND_DIAGNOSTICS_H
#define MNEMO_FRONTEND_DIAGNOSTICS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"

#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mnemo {

class Diagnostics {
public:
  /// Messages go to `os`; pass llvm::nulls() to only count them.
  Diagnostics(llvm::SourceMgr &sourceMgr, llvm::raw_ostream &os);

  void error(llvm::SMLoc loc, const llvm::Twine &message,
             llvm::ArrayRef<llvm::SMRange> ranges = {});
  void note(llvm::SMLoc loc, const llvm::Twine &message);
  /// An error with no position (a missing file, a bad -D).
  void error(const llvm::Twine &message);

  unsigned errorCount() const { return numErrors; }
  bool hadError() const { return numErrors != 0; }

  llvm::SourceMgr &getSourceMgr() { return sourceMgr; }

  /// Printing stops after this many errors (they are still counted).
  static constexpr unsigned kErrorLimit = 20;

private:
  void print(llvm::SMLoc loc, llvm::SourceMgr::DiagKind kind,
             const llvm::Twine &message, llvm::ArrayRef<llvm::SMRange> ranges);

  llvm::SourceMgr &sourceMgr;
  llvm::raw_ostream &os;
  unsigned numErrors = 0;
  bool suppressNotes = false; // notes of an error past the limit
};

/// The candidate closest to a misspelled `name` (by edit distance, allowing
/// about one edit per three characters), or "" when none is close enough to
/// be worth suggesting.
std::string closestMatch(llvm::StringRef name,
                         llvm::ArrayRef<std::string> candidates);

/// Up to `count` candidates nearest to `name` by edit distance, nearest
/// first (ties in alphabetical order), leaving out those that share too
/// little with it to help (more edits than `name` has characters).
std::vector<std::string> nearestMatches(llvm::StringRef name,
                                        llvm::ArrayRef<std::string> candidates,
                                        size_t count);

} // namespace mnemo

#endif // MNEMO_FRONTEND_DIAGNOSTICS_H
