//===- CompileKernels.cpp - mnemo-nvrtc: compile a kernel file ------------===//
//
//   mnemo-nvrtc [--arch sm_XX]... FILE.cu...
//
// Compiles files that mnemoc --emit=cuda-kernels wrote, with the same
// NVRTC options and kernel library as the trainer, for each architecture
// (default sm_80 and sm_90), without a GPU. Exit status 1 and NVRTC's log
// when a kernel does not compile. The test suite runs it on every example.
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
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--arch" && i + 1 < argc)
      archs.push_back(argv[++i]);
    else if (!arg.empty() && arg[0] != '-')
      files.push_back(arg);
    else {
      std::fprintf(stderr, "usage: mnemo-nvrtc [--arch sm_XX]... FILE.cu...\n");
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: mnemo-nvrtc [--arch sm_XX]... FILE.cu...\n");
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
      if (!mnemo::cuda::compileKernels(text.str(), arch, false, compiled,
                                       error)) {
        std::fprintf(stderr, "mnemo-nvrtc: %s: %s\n", file.c_str(),
                     error.c_str());
        status = 1;
        continue;
      }
      std::printf("%s: %s cubin, %zu bytes (NVRTC %s)%s%s\n", file.c_str(),
                  arch.c_str(), compiled.cubin.size(),
                  mnemo::cuda::nvrtcVersion().c_str(),
                  compiled.log.empty() ? "" : "\n", compiled.log.c_str());
    }
  }
  return status;
}
