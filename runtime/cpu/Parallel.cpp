//===- Parallel.cpp - The CPU trainer's worker threads --------------------===//

#include "runtime/cpu/Parallel.h"
#include "runtime/Failure.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>
#if defined(__SSE__) || defined(__x86_64__)
#include <sched.h>
#include <xmmintrin.h>
#endif

#ifndef MNEMO_HAVE_BLAS
#define MNEMO_HAVE_BLAS 1
#endif
#if MNEMO_HAVE_BLAS
extern "C" void openblas_set_num_threads(int);
#endif

namespace mnemo::cpu {
namespace {

/// Subnormal floats (below 1.2e-38) cost 10 to 100 times a normal
/// operation on x86 CPUs. A step meets them where values decay toward
/// zero: the moments of parameters without gradient (embedding rows a
/// batch does not use, 0.9^k after a few hundred steps), products of tiny
/// gradients. Every step thread computes with flush-to-zero and
/// denormals-are-zero set (PyTorch's torch.set_flush_denormal(True)): such
/// values are 0, a difference below 1.2e-38 from PyTorch's default.
void flushDenormals() {
#if defined(__SSE__) || defined(__x86_64__)
  _mm_setcsr(_mm_getcsr() | 0x8040); // FTZ (bit 15) | DAZ (bit 6)
#endif
}

/// Set on the pool's workers for good, and on the main thread while it runs
/// a step.
thread_local bool stepThread = false;

/// The pool's waits (workers for work, the caller for the workers) spin
/// for a short time, then sleep. The step's kernels come back to back,
/// microseconds apart, and a condition variable's wake-up costs more than
/// most of them; but a thread that spins longer takes its core from the
/// thread it waits for when the cores are shared (another process, another
/// trainer, a test suite's other test): two trainers of 2 threads each on
/// 2 cores, spinning until done, each ran 4 to 5 times slower than alone.
class Pool {
public:
  ~Pool() { resize(1); }

  /// Runs `n` threads (this one included); false when the system refused
  /// to start them, and then runs one.
  bool resize(int n) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
      generation.fetch_add(1, std::memory_order_release);
    }
    wake.notify_all();
    for (std::thread &t : workers)
      t.join();
    workers.clear();
    stopping = false;
    count = std::max(1, n);
    // The generation a worker starts from is fixed here, not when the
    // thread first runs: work published (or a stop) before then must not
    // be missed.
    uint64_t start = generation.load(std::memory_order_acquire);
    try {
      for (int i = 1; i < count; ++i)
        workers.emplace_back([this, i, start] { work(i, start); });
    } catch (const std::system_error &) {
      resize(1);
      return false;
    }
    return true;
  }

  int size() const { return count; }

  void run(int chunks, FunctionRef<void(int)> task) {
    current = &task;
    active = chunks;
    pending.store(chunks - 1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mutex);
      generation.fetch_add(1, std::memory_order_release);
    }
    wake.notify_all();
    task(0);
    // The others started when this one did: their chunks end about now,
    // unless they are waiting for a core.
    if (!spinUntil(
            [&] { return pending.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mutex);
      // Seen by the worker that ends the last chunk after its decrement
      // (both sequentially consistent): it then wakes this thread.
      callerSleeping.store(true);
      finished.wait(lock, [&] { return pending.load() == 0; });
      callerSleeping.store(false, std::memory_order_relaxed);
    }
    current = nullptr;
  }

private:
  /// Spins until `ready()` or ~50 microseconds have passed; false then.
  template <typename Ready> static bool spinUntil(Ready ready) {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point until =
        Clock::now() + std::chrono::microseconds(50);
    for (;;) {
      // The clock is read once per 16 pauses (a pause is 10 to 150 cycles,
      // by CPU).
      for (int i = 0; i < 16; ++i) {
        if (ready())
          return true;
        pause();
      }
      if (Clock::now() >= until)
        return ready();
    }
  }

  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }

  void work(int index, uint64_t seen) {
    stepThread = true;
    flushDenormals();
    for (;;) {
      auto published = [&] {
        return generation.load(std::memory_order_acquire) != seen;
      };
      if (!spinUntil(published)) {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, published);
      }
      seen = generation.load(std::memory_order_acquire);
      if (stopping)
        return;
      if (index >= active)
        continue;
      (*current)(index);
      if (pending.fetch_sub(1) == 1 && callerSleeping.load()) {
        std::lock_guard<std::mutex> lock(mutex);
        finished.notify_one();
      }
    }
  }

  std::mutex mutex;
  std::condition_variable wake, finished;
  std::vector<std::thread> workers;
  const FunctionRef<void(int)> *current = nullptr;
  std::atomic<uint64_t> generation{0};
  std::atomic<int> pending{0};
  std::atomic<bool> callerSleeping{false};
  int count = 1, active = 0;
  bool stopping = false;
};

Pool &pool() {
  static Pool p;
  return p;
}

/// Set on the pool's threads while they run a chunk, so that a kernel that
/// calls parallelFor from inside another (a GEMM inside a batched GEMM)
/// runs inline instead of waiting for itself.
thread_local bool insideChunk = false;

} // namespace

/// The cores this process may use: the CPUs of its affinity mask, fewer
/// under a cgroup CPU quota (a container's --cpus: cgroup v2's cpu.max,
/// v1's cfs quota), at least 1. hardware_concurrency() counts the host's
/// CPUs, and a pool that large under a quota of a few cores spins its
/// barriers against itself: on a 2-core quota, 16 threads made a small
/// GPT's step 20x slower.
int availableCores() {
  int n = int(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0 && CPU_COUNT(&mask) > 0)
    n = std::min(n, int(CPU_COUNT(&mask)));
  auto quotaCores = [](const char *quotaFile, const char *periodFile) {
    // cpu.max: "max 100000" or "200000 100000"; v1: two files, -1 = none.
    std::FILE *f = std::fopen(quotaFile, "r");
    if (!f)
      return 0;
    char text[64] = {0};
    size_t read = std::fread(text, 1, sizeof(text) - 1, f);
    std::fclose(f);
    text[read] = 0;
    long long quota = 0, period = 0;
    if (periodFile) {
      if (std::sscanf(text, "%lld", &quota) != 1)
        return 0;
      std::FILE *p = std::fopen(periodFile, "r");
      if (!p)
        return 0;
      int got = std::fscanf(p, "%lld", &period);
      std::fclose(p);
      if (got != 1)
        return 0;
    } else if (std::sscanf(text, "%lld %lld", &quota, &period) != 2) {
      return 0; // "max": no quota
    }
    if (quota <= 0 || period <= 0)
      return 0;
    return int(std::max(1LL, (quota + period - 1) / period));
  };
  int quota = quotaCores("/sys/fs/cgroup/cpu.max", nullptr);
  if (!quota)
    quota = quotaCores("/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
                       "/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  if (quota > 0)
    n = std::min(n, quota);
  return std::max(1, n);
}

bool setThreads(int n, std::string &error) {
  if (n <= 0) {
    if (const char *env = std::getenv("OMP_NUM_THREADS")) {
      char *end = nullptr;
      errno = 0;
      long v = std::strtol(env, &end, 10);
      if (errno || end == env || *end || v < 1 || v > kMaxThreads)
        return failWith(
            error, "OMP_NUM_THREADS must be a number of threads from 1 to " +
                       std::to_string(kMaxThreads) + ", not '" + env + "'");
      n = int(v);
    } else {
      n = availableCores();
    }
  }
  if (n > kMaxThreads)
    return failWith(error, "--threads is at most " +
                               std::to_string(kMaxThreads) + ", not " +
                               std::to_string(n));
  flushDenormals(); // the calling thread runs chunks too
  // OpenBLAS runs single-threaded inside our chunks: two thread pools on
  // the same cores spin against each other (sched_yield) between kernels.
#if MNEMO_HAVE_BLAS
  openblas_set_num_threads(1);
#endif
  if (!pool().resize(n))
    return failWith(
        error, "the system refused to start " + std::to_string(n) +
                   " threads (see ulimit -u); ask for fewer with --threads");
  return true;
}

int threads() { return pool().size(); }

bool inStep() { return stepThread; }
StepScope::StepScope() { stepThread = true; }
StepScope::~StepScope() { stepThread = false; }

namespace {
thread_local bool libraryCall = false;
} // namespace
bool inLibraryCall() { return libraryCall; }
LibraryCallScope::LibraryCallScope() { libraryCall = true; }
LibraryCallScope::~LibraryCallScope() { libraryCall = false; }

void parallelFor(int64_t n, int64_t grain,
                 FunctionRef<void(int64_t, int64_t)> body) {
  if (n <= 0)
    return;
  int64_t chunks = std::min<int64_t>(
      pool().size(), std::max<int64_t>(1, n / std::max<int64_t>(1, grain)));
  if (chunks <= 1 || insideChunk) {
    body(0, n);
    return;
  }
  auto chunk = [&](int c) {
    int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    insideChunk = true;
    if (begin < end)
      body(begin, end);
    insideChunk = false;
  };
  pool().run(int(chunks), chunk);
}

} // namespace mnemo::cpu
