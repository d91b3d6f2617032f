//===- Diagnostics.cpp - Clang-style errors for model files ---------------===//

#include "frontend/Diagnostics.h"

#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mnemo;

Diagnostics::Diagnostics(llvm::SourceMgr &sourceMgr, llvm::raw_ostream &os)
    : sourceMgr(sourceMgr), os(os) {}

void Diagnostics::print(llvm::SMLoc loc, llvm::SourceMgr::DiagKind kind,
                        const llvm::Twine &message,
                        llvm::ArrayRef<llvm::SMRange> ranges) {
  bool colors = os.has_colors();
  if (loc.isValid() && sourceMgr.FindBufferContainingLoc(loc)) {
    sourceMgr.PrintMessage(os, loc, kind, message, ranges, {}, colors);
    return;
  }
  const char *label = kind == llvm::SourceMgr::DK_Error     ? "error"
                      : kind == llvm::SourceMgr::DK_Warning ? "warning"
                                                            : "note";
  os << "mnemoc: " << label << ": " << message << "\n";
}

void Diagnostics::error(llvm::SMLoc loc, const llvm::Twine &message,
                        llvm::ArrayRef<llvm::SMRange> ranges) {
  ++numErrors;
  suppressNotes = numErrors > kErrorLimit;
  if (numErrors == kErrorLimit + 1)
    os << "mnemoc: error: too many errors; stopping here\n";
  if (!suppressNotes)
    print(loc, llvm::SourceMgr::DK_Error, message, ranges);
}

void Diagnostics::error(const llvm::Twine &message) {
  error(llvm::SMLoc(), message);
}

void Diagnostics::note(llvm::SMLoc loc, const llvm::Twine &message) {
  if (!suppressNotes)
    print(loc, llvm::SourceMgr::DK_Note, message, {});
}

std::string mnemo::closestMatch(llvm::StringRef name,
                                llvm::ArrayRef<std::string> candidates) {
  std::string best;
  unsigned bestDistance = (name.size() + 2) / 3 + 1;
  for (const std::string &candidate : candidates) {
    if (candidate == name)
      continue;
    unsigned distance = name.edit_distance(candidate, true, bestDistance);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = candidate;
    }
  }
  return best;
}

std::vector<std::string>
mnemo::nearestMatches(llvm::StringRef name,
                      llvm::ArrayRef<std::string> candidates, size_t count) {
  std::vector<std::pair<unsigned, std::string>> scored;
  for (const std::string &candidate : candidates) {
    unsigned distance = name.edit_distance(candidate, true, name.size() + 1);
    if (candidate != name && distance <= name.size())
      scored.emplace_back(distance, candidate);
  }
  std::sort(scored.begin(), scored.end());
  scored.erase(std::unique(scored.begin(), scored.end()), scored.end());
  std::vector<std::string> nearest;
  for (size_t i = 0; i < scored.size() && i < count; ++i)
    nearest.push_back(scored[i].second);
  return nearest;
}
