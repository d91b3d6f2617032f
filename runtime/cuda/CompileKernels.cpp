//===- CompileKernels.cpp - mnemo-nvrtc: compile a kernel file ------------===//
//
//   mnemo-nvrtc [--arch sm_XX]... [--cache] FILE.cu...
//
// Compiles files that mnemoc --emit=cuda-kernels wrote, with the same
// NVRTC options and kernel library as the trainer, for each architecture
// (default sm_80 and sm_90), without a GPU. Exit status 1 and NVRTC's log
// when a kernel does not compile. The test suite runs it on every example.
// With --cache it uses the trainer's cubin cache ($MNEMO_CACHE_DIR, ...) and
// says whether each cubin came from it, was compiled, or replaced a
// damaged cached file.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Nvrtc.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  std::vector<std::string> archs;
  std::vector<std::string> files;
  bool cache = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--arch" && i + 1 < argc)
      archs.push_back(argv[++i]);
    else if (arg == "--cache")
      cache = true;
    else if (!arg.empty() && arg[0] != '-')
      files.push_back(arg);
    else {
      std::fprintf(stderr, "usage: mnemo-nvrtc [--arch sm_XX]... [--cache] FILE.cu...\n");
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: mnemo-nvrtc [--arch sm_XX]... [--cache] FILE.cu...\n");
    return 2;
  }
  if (archs.empty())
    archs = {"sm_80", "sm_90"};
  int status = 0;
  for (const std::string &file : files) {
    std::ifstream in(file);
    if (!in) {
      std::fprintf(stderr, "mnemo-nvrtc: cannot read '%s'\n", file.c_str());
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    for (const std::string &arch : archs) {
      mnemo::cuda::CompiledKernels compiled;
      std::string error;
      if (!mnemo::cuda::compileKernels(text.str(), arch, cache, compiled,
                                       error)) {
        std::fprintf(stderr, "mnemo-nvrtc: %s: %s\n", file.c_str(),
                     error.c_str());
        status = 1;
        continue;
      }
      std::printf("%s: %s cubin, %zu bytes (NVRTC %s)%s%s%s\n", file.c_str(),
                  arch.c_str(), compiled.cubin.size(),
                  mnemo::cuda::nvrtcVersion().c_str(),
                  !cache                     ? ""
                  : compiled.fromCache       ? ", from the cache"
                  : compiled.cacheWasDamaged ? ", compiled again: the cached "
                                               "file was damaged (checksum)"
                                             : ", compiled and cached",
                  compiled.log.empty() ? "" : "\n", compiled.log.c_str());
    }
  }
  return status;
}
