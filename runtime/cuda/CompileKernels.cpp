//===- CompileKernels.cpp - mnemo-nvrtc: compile a kernel file ------------===//
//
//   mnemo-nvrtc [--arch sm_XX]... [--cache] [--resources] FILE.cu...
//
// Compiles files that mnemoc --emit=cuda-kernels wrote, with the same
// NVRTC options and kernel library as the trainer, for each architecture
// (default sm_80 and sm_90), without a GPU. Exit status 1 and NVRTC's log
// when a kernel does not compile. The test suite runs it on every example.
// With --cache it uses the trainer's cubin cache ($MNEMO_CACHE_DIR, ...) and
// says whether each cubin came from it, was compiled, or replaced a
// damaged cached file. With --resources it prints, per file and
// architecture, the kernels' largest register count, shared memory, stack
// frame and spill bytes as ptxas reports them (instead of its log).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Nvrtc.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  std::vector<std::string> archs;
  std::vector<std::string> files;
  bool cache = false, resources = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--arch" && i + 1 < argc)
      archs.push_back(argv[++i]);
    else if (arg == "--cache")
      cache = true;
    else if (arg == "--resources")
      resources = true;
    else if (!arg.empty() && arg[0] != '-')
      files.push_back(arg);
    else {
      std::fprintf(stderr, "usage: mnemo-nvrtc [--arch sm_XX]... [--cache] "
                           "[--resources] FILE.cu...\n");
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: mnemo-nvrtc [--arch sm_XX]... [--cache] "
                         "[--resources] FILE.cu...\n");
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
      if (!mnemo::cuda::compileKernels(text.str(), arch, cache, compiled, error,
                                       resources)) {
        std::fprintf(stderr, "mnemo-nvrtc: %s: %s\n", file.c_str(),
                     error.c_str());
        status = 1;
        continue;
      }
      if (resources) {
        // ptxas -v: "Used N registers, used B barriers, S bytes smem" and
        // "F bytes stack frame, X bytes spill stores, Y bytes spill loads".
        int kernels = 0, registers = 0;
        long shared = 0, stack = 0, spills = 0;
        std::string function, withStack;
        std::istringstream lines(compiled.log);
        for (std::string line; std::getline(lines, line);) {
          const std::string properties = "Function properties for ";
          if (size_t at = line.find(properties); at != std::string::npos)
            function = line.substr(at + properties.size());
          auto number = [&](const char *after) -> long {
            size_t at = line.find(after);
            if (at == std::string::npos)
              return -1;
            size_t begin = line.rfind(' ', at - 1);
            return std::atol(line.c_str() +
                             (begin == std::string::npos ? 0 : begin + 1));
          };
          if (long r = number(" registers"); r >= 0) {
            ++kernels;
            registers = std::max(registers, int(r));
            shared = std::max(shared, std::max(0L, number(" bytes smem")));
          }
          long frame = number(" bytes stack frame");
          if (frame > 0 && withStack.size() < 200)
            withStack += (withStack.empty() ? "" : ", ") + function + " (" +
                         std::to_string(frame) + ")";
          stack = std::max(stack, frame);
          spills += std::max(0L, number(" bytes spill stores")) +
                    std::max(0L, number(" bytes spill loads"));
        }
        std::printf(
            "%s: %s: %d kernels, at most %d registers, %ld bytes "
            "shared memory, %ld bytes stack frame; %ld bytes "
            "spilled%s%s\n",
            file.c_str(), arch.c_str(), kernels, registers, shared,
            std::max(0L, stack), spills,
            withStack.empty() ? "" : "; stack frames: ", withStack.c_str());
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
