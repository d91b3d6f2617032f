//===- OneDnnContext.h - oneDNN's CPU engine, shared by sites ---*- C++ -*-===//
//
// The oneDNN engine and stream that the convolution and matrix-product
// sites (lang/ops/convolution, lang/ops/matmul) create their primitives on,
// and how oneDNN is made to run on the calling thread alone. Only where the
// trainer is built with oneDNN (MNEMO_HAVE_ONEDNN). Part of the runtime:
// plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_CPU_ONEDNNCONTEXT_H
#define MNEMO_RUNTIME_CPU_ONEDNNCONTEXT_H

#include <cstdlib>
#include <string>

#if MNEMO_HAVE_ONEDNN
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

namespace mnemo::cpu {

/// The CPU engine, and a stream for work that runs on one thread (each
/// part of a site's split work has a stream of its own).
struct OneDnnContext {
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  /// libgomp's omp_set_num_threads (oneDNN's threads are OpenMP's), found
  /// at run time: libgomp comes with libdnnl.
  void (*setThreads)(int) = nullptr;
  std::string failure;

  OneDnnContext() {
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) {
      failure = "oneDNN has no CPU engine";
      return;
    }
    if (dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) !=
        dnnl_success)
      failure = "oneDNN cannot create a stream";
    setThreads = reinterpret_cast<void (*)(int)>(
        dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    alone();
  }

  /// oneDNN runs on the thread that calls it, alone: an OpenMP team of its
  /// own would spin beside the step's threads (on 2 cores it made every
  /// other op of a CNN's step 2-4x slower). The setting is per thread.
  void alone() const {
    if (setThreads)
      setThreads(1);
  }
};

/// The one context of the process, made on first use.
inline OneDnnContext &oneDnnContext() {
  static OneDnnContext context;
  return context;
}

} // namespace mnemo::cpu
#endif // MNEMO_HAVE_ONEDNN

namespace mnemo::cpu {
/// Whether MNEMO_ONEDNN=0 is in the environment: every site then runs the
/// kernels of our own (im2col, widened GEMMs), to compare.
inline bool oneDnnTurnedOff() {
  const char *use = std::getenv("MNEMO_ONEDNN");
  return use && std::string(use) == "0";
}
} // namespace mnemo::cpu

#endif // MNEMO_RUNTIME_CPU_ONEDNNCONTEXT_H
