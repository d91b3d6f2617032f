//===- LibrarySites.h - Ops set up on a library's primitives ----*- C++ -*-===//
//
// What the convolution and 16-bit matrix-product sites share
// (ConvolutionKernels.h, MatmulKernels.h): the registry of a kind's sites,
// and the start-up line that says what they run. A site is a
// namespace-scope object of the generated file that adds itself here when
// it is built (before main, on one thread) and is prepared before the
// first step. Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_CPU_LIBRARYSITES_H
#define MNEMO_RUNTIME_CPU_LIBRARYSITES_H

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace mnemo::cpu {

/// Every site of kind Site in the program.
template <typename Site> std::vector<Site *> &sitesOf() {
  static std::vector<Site *> all;
  return all;
}

template <typename Site> void addSite(Site *site) {
  sitesOf<Site>().push_back(site);
}

template <typename Site> void removeSite(Site *site) {
  auto &all = sitesOf<Site>();
  all.erase(std::remove(all.begin(), all.end(), site), all.end());
}

/// "oneDNN at 40 of 48 sites (40 brg:avx512_core_bf16; 8 ...)", or
/// "`ownKernels` at 48 sites (48 `ownKernels`: why)": how many sites run
/// through oneDNN, then each implementation (or reason) with its count.
template <typename Site>
std::string sitesSummary(const std::vector<Site *> &sites,
                         const std::string &ownKernels) {
  std::map<std::string, int> byImplementation;
  int withOneDnn = 0;
  for (const Site *site : sites) {
    withOneDnn += site->usesOneDnn();
    ++byImplementation[site->implementation()];
  }
  std::string text;
  for (const auto &[implementation, count] : byImplementation)
    text += (text.empty() ? "" : "; ") + std::to_string(count) + " " +
            implementation;
  return (withOneDnn ? "oneDNN at " + std::to_string(withOneDnn) + " of "
                     : ownKernels + " at ") +
         std::to_string(sites.size()) + " sites (" + text + ")";
}

} // namespace mnemo::cpu

#endif // MNEMO_RUNTIME_CPU_LIBRARYSITES_H
