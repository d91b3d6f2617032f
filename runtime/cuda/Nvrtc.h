//===- Nvrtc.h - Compiling generated kernels with NVRTC ---------*- C++ -*-===//
//
// The generated kernels are compiled when the trainer starts, for the GPU it
// runs on, and cached as cubins keyed by a hash of the source, the kernel
// library, the architecture and the NVRTC version. No GPU or driver is
// needed to compile, so the test suite compiles every generated kernel file
// for sm_80 and sm_90 on machines without one. A cached file carries its
// length and a checksum of the cubin: a damaged or truncated one is
// compiled again (and rewritten), never loaded.
//
// Part of the runtime: no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_CUDA_NVRTC_H
#define MNEMO_RUNTIME_CUDA_NVRTC_H

#include <cstdint>
#include <string>
#include <vector>

namespace mnemo::cuda {

/// runtime/cuda/Kernels.cuh, embedded at build time.
extern const char *const kKernelLibrary;
/// The op families' device functions (lang/ops/*/*.cuh), by the path a
/// model's kernels include them with; both end with a null entry.
extern const char *const kFamilyKernelNames[];
extern const char *const kFamilyKernelSources[];

struct CompiledKernels {
  std::string cubin;
  std::string log; // NVRTC's warnings, or its errors on failure
  bool fromCache = false;
  std::string cachePath; // where the cubin is (or would be) cached
  /// Set when the cached file was damaged and was compiled again.
  bool cacheWasDamaged = false;
};

/// A cubin as the cache stores it, and back: false when `file` is not one
/// whole such file (its magic, length or checksum do not match).
std::string cacheFileOf(const std::string &cubin);
bool cubinOfCacheFile(const std::string &file, std::string &cubin);

/// "12.9" or similar.
std::string nvrtcVersion();

/// Compiles `source` (which includes "mnemo/Kernels.cuh") for `arch`
/// ("sm_90") to a cubin. With `useCache`, looks in and fills the cache
/// ($MNEMO_CACHE_DIR, else $XDG_CACHE_HOME/mnemo, else ~/.cache/mnemo).
/// `resourceUsage` asks ptxas for each kernel's registers, spills and
/// shared memory (in `out.log`; never cached).
bool compileKernels(const std::string &source, const std::string &arch,
                    bool useCache, CompiledKernels &out, std::string &error,
                    bool resourceUsage = false);

} // namespace mnemo::cuda

#endif // MNEMO_RUNTIME_CUDA_NVRTC_H
