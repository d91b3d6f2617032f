//===- Nvrtc.cpp - Compiling generated kernels with NVRTC -----------------===//

#include "runtime/cuda/Nvrtc.h"
#include "runtime/Failure.h"

#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace mnemo::cuda;

namespace {

uint64_t fnv1a(uint64_t h, const std::string &text) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string cacheDirectory() {
  if (const char *dir = std::getenv("MNEMO_CACHE_DIR"); dir && *dir)
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/mnemo";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/mnemo";
  return "";
}

void makeDirectories(const std::string &path) {
  for (size_t at = 1; at <= path.size(); ++at)
    if (at == path.size() || path[at] == '/')
      mkdir(path.substr(0, at).c_str(), 0755);
}

bool readFile(const std::string &path, std::string &contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream s;
  s << in.rdbuf();
  contents = s.str();
  return bool(in) || in.eof();
}

/// Written to a temporary name and renamed: a concurrent trainer never
/// reads half a cubin.
void writeCache(const std::string &path, const std::string &cubin) {
  std::string temporary = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(temporary, std::ios::binary);
    out.write(cubin.data(), std::streamsize(cubin.size()));
    if (!out) {
      std::remove(temporary.c_str());
      return;
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    std::remove(temporary.c_str());
}

} // namespace

namespace {
constexpr char kCacheMagic[8] = {'M', 'N', 'C', 'U', 'B', 'I', 'N', '1'};
void putWord(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(char((v >> (8 * i)) & 0xff));
}
uint64_t getWord(const std::string &in, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= uint64_t(uint8_t(in[at + i])) << (8 * i);
  return v;
}
} // namespace

// Magic, cubin length, FNV-1a of the cubin, the cubin.
std::string mnemo::cuda::cacheFileOf(const std::string &cubin) {
  std::string file(kCacheMagic, sizeof(kCacheMagic));
  putWord(file, cubin.size());
  putWord(file, fnv1a(1469598103934665603ull, cubin));
  return file + cubin;
}

bool mnemo::cuda::cubinOfCacheFile(const std::string &file,
                                   std::string &cubin) {
  constexpr size_t header = sizeof(kCacheMagic) + 16;
  if (file.size() < header ||
      file.compare(0, sizeof(kCacheMagic), kCacheMagic, sizeof(kCacheMagic)) !=
          0 ||
      getWord(file, 8) != file.size() - header || file.size() == header)
    return false;
  cubin = file.substr(header);
  return getWord(file, 16) == fnv1a(1469598103934665603ull, cubin);
}

std::string mnemo::cuda::nvrtcVersion() {
  int major = 0, minor = 0;
  ::nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

bool mnemo::cuda::compileKernels(const std::string &source,
                                 const std::string &arch, bool useCache,
                                 CompiledKernels &out, std::string &error,
                                 bool resourceUsage) {
  // Line information for compute-sanitizer's and the profilers' reports
  // (it does not change the code).
  std::vector<std::string> options = {
      "--gpu-architecture=" + arch, "--std=c++17",
      "--device-as-default-execution-space", "--generate-line-info"};
#ifdef MNEMO_CUDA_INCLUDE
  options.push_back("--include-path=" MNEMO_CUDA_INCLUDE);
#endif
  if (const char *include = std::getenv("MNEMO_CUDA_INCLUDE"))
    options.push_back(std::string("--include-path=") + include);
  if (resourceUsage) {
    options.push_back("--ptxas-options=-v");
    useCache = false;
  }

  std::string key =
      source + '\0' + kKernelLibrary + '\0' + arch + '\0' + nvrtcVersion();
  for (int i = 0; kFamilyKernelNames[i]; ++i)
    key += std::string("\0", 1) + kFamilyKernelNames[i] + '\0' +
           kFamilyKernelSources[i];
  for (const std::string &o : options)
    key += '\0' + o;
  char name[64];
  std::snprintf(name, sizeof(name), "%016llx-%s.cubin",
                (unsigned long long)fnv1a(1469598103934665603ull, key),
                arch.c_str());
  std::string directory = useCache ? cacheDirectory() : "";
  if (!directory.empty()) {
    out.cachePath = directory + "/" + name;
    std::string file;
    if (readFile(out.cachePath, file)) {
      if (cubinOfCacheFile(file, out.cubin)) {
        out.fromCache = true;
        return true;
      }
      out.cubin.clear();
      out.cacheWasDamaged = true;
    }
  }

  nvrtcProgram program;
  std::vector<const char *> headers = {kKernelLibrary};
  std::vector<const char *> headerNames = {"mnemo/Kernels.cuh"};
  for (int i = 0; kFamilyKernelNames[i]; ++i) {
    headers.push_back(kFamilyKernelSources[i]);
    headerNames.push_back(kFamilyKernelNames[i]);
  }
  if (nvrtcCreateProgram(&program, source.c_str(), "model_kernels.cu",
                         int(headers.size()), headers.data(),
                         headerNames.data()) != NVRTC_SUCCESS)
    return failWith(error, "NVRTC could not create a program");
  std::vector<const char *> args;
  for (const std::string &o : options)
    args.push_back(o.c_str());
  nvrtcResult result =
      nvrtcCompileProgram(program, int(args.size()), args.data());
  size_t logSize = 0;
  nvrtcGetProgramLogSize(program, &logSize);
  out.log.assign(logSize, '\0');
  if (logSize > 1)
    nvrtcGetProgramLog(program, &out.log[0]);
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n'))
    out.log.pop_back();
  if (result != NVRTC_SUCCESS) {
    error = std::string("NVRTC failed to compile the kernels for ") + arch +
            " (" + nvrtcGetErrorString(result) + "):\n" + out.log;
    nvrtcDestroyProgram(&program);
    return false;
  }
  size_t size = 0;
  nvrtcGetCUBINSize(program, &size);
  out.cubin.assign(size, '\0');
  nvrtcGetCUBIN(program, &out.cubin[0]);
  nvrtcDestroyProgram(&program);
  if (!directory.empty()) {
    makeDirectories(directory);
    writeCache(out.cachePath, cacheFileOf(out.cubin));
  }
  return true;
}
