//===- Parallel.h - The CPU trainer's worker threads ------------*- C++ -*-===//
//
// A fixed pool of worker threads that splits a range into one contiguous
// chunk per thread. The split depends only on the range and the thread
// count, so every run with the same --threads computes the same sums in the
// same order: resuming from a checkpoint is bit-identical. OpenMP would do
// the same job, but generated code and the runtime may be built by
// different compilers (libgomp vs libomp in one process is a known hazard),
// and a pool of ours has no such dependency.
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_CPU_PARALLEL_H
#define MNEMO_RUNTIME_CPU_PARALLEL_H

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace mnemo::cpu {

/// A non-owning reference to a callable (llvm::function_ref, without LLVM):
/// handing a lambda to parallelFor allocates nothing, where std::function
/// may allocate for a lambda with many captures.
template <typename Fn> class FunctionRef;
template <typename Ret, typename... Params> class FunctionRef<Ret(Params...)> {
public:
  template <
      typename Callable,
      typename = std::enable_if_t<!std::is_same_v<
          std::remove_cv_t<std::remove_reference_t<Callable>>, FunctionRef>>>
  FunctionRef(Callable &&callable)
      : callback(&call<std::remove_reference_t<Callable>>),
        callable(reinterpret_cast<intptr_t>(&callable)) {}
  Ret operator()(Params... params) const {
    return callback(callable, std::forward<Params>(params)...);
  }

private:
  template <typename Callable>
  static Ret call(intptr_t callable, Params... params) {
    return (*reinterpret_cast<Callable *>(callable))(
        std::forward<Params>(params)...);
  }
  Ret (*callback)(intptr_t, Params...);
  intptr_t callable;
};

/// The most threads a run may ask for: past the cores, more threads only
/// slow a step, and thousands exhaust the process's thread limit.
constexpr int kMaxThreads = 1024;

/// Sets the number of threads (the caller included) that parallelFor uses.
/// 0 means OMP_NUM_THREADS where it is set (PyTorch reads it too), else
/// one per core. OpenBLAS is kept single-threaded: GEMMs are split over
/// these same threads (see gemm in Kernels.h). Returns false with `error`
/// for a count outside [1, kMaxThreads], an OMP_NUM_THREADS that is not
/// one, or threads the system refuses to start.
bool setThreads(int threads, std::string &error);
int threads();
/// The cores this process may use: its affinity mask, capped by a cgroup
/// CPU quota; at least 1.
int availableCores();

/// Whether the calling thread runs step work: a pool worker, or a thread
/// that marked itself with StepScope. The trainer counts heap allocations
/// made by such threads (there must be none).
bool inStep();
class StepScope {
public:
  StepScope();
  ~StepScope();
};

/// Whether the calling thread is inside a library's call that allocates on
/// its own (oneDNN's execute builds an argument map, some 20 small
/// allocations, freed before it returns): the trainer counts those apart
/// from the step's own, which must stay none. Marked with LibraryCallScope.
bool inLibraryCall();
class LibraryCallScope {
public:
  LibraryCallScope();
  ~LibraryCallScope();
};

/// Runs body(begin, end) over [0, n) split into at most threads() chunks.
/// Ranges below `grain` elements per chunk run on fewer threads; tiny ones,
/// and calls from inside another parallelFor, inline on the caller.
void parallelFor(int64_t n, int64_t grain,
                 FunctionRef<void(int64_t, int64_t)> body);

/// Elements of work below which a chunk is not worth a thread.
constexpr int64_t kGrain = 16384;

/// The grain for rows of `rowElements` each.
inline int64_t rowGrain(int64_t rowElements) {
  return std::max<int64_t>(1, kGrain / std::max<int64_t>(1, rowElements));
}

} // namespace mnemo::cpu

#endif // MNEMO_RUNTIME_CPU_PARALLEL_H
