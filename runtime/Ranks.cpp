//===- Ranks.cpp - The processes of a data-parallel run -------------------===//

#include "runtime/Ranks.h"

#include <cstdlib>
#include <cstring>

#if MNEMO_HAVE_MPI
#define OMPI_SKIP_MPICXX 1 // the C API only
#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>
#endif

namespace mnemo {
namespace runtime {
namespace {

/// The launcher's world size from its environment: Open MPI's mpirun,
/// MPICH's Hydra and Slurm's PMI set these. 0 when nothing launched us as a
/// rank; PMIx alone gives no size (1: join and ask MPI).
int launchedWorldSize() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
    if (const char *value = std::getenv(name))
      return std::max(1, std::atoi(value));
  if (std::getenv("PMIX_RANK") || std::getenv("PMI_RANK"))
    return 1;
  return 0;
}

class SingleProcess : public Ranks {
public:
  SingleProcess() : Ranks(0, 1, 1) {}
  std::string describe() const override { return ""; }
  bool agreeOnPlan(const std::string &, std::string &) override { return true; }
  void sum(double *, int) override {}
  std::unique_ptr<GradientExchange>
  gradientExchange(const StepInfo &, const StepMemory &) override {
    return nullptr;
  }
  void gatherState(const uint8_t *part, int64_t bytes,
                   std::vector<uint8_t> &all) override {
    all.assign(part, part + bytes);
  }
};

#if MNEMO_HAVE_MPI

/// 64-bit FNV-1a: the plan hashes compared across ranks.
uint64_t fnv1a(const std::string &text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text)
    h = (h ^ c) * 0x100000001b3ull;
  return h;
}

/// Sums buckets on a thread of its own, in the order the step makes them
/// ready: MPI's blocking all-reduce progresses by itself there while the
/// step's thread computes the rest of the backward (a non-blocking
/// MPI_Iallreduce would only progress when this thread called into MPI
/// between ops). All MPI calls during a step are this thread's; the
/// trainer calls MPI only between steps, when every bucket has been
/// awaited (MPI_THREAD_SERIALIZED).
///
/// ZeRO-1 (a step with shardBytes): a bucket is reduce-scattered in place
/// (each rank's sums land at the bucket's start, then move to its part),
/// and the parameters are all-gathered through the gradient region, which
/// the step no longer needs by then: each rank writes its updated part
/// there, the parts are gathered, and every parameter is copied back.
class MpiGradientExchange : public GradientExchange {
public:
  MpiGradientExchange(const StepInfo &step, const StepMemory &memory, int rank,
                      int ranks)
      : buckets(step.gradientBuckets,
                step.gradientBuckets + step.numGradientBuckets),
        places(step.parameterPlaces,
               step.parameterPlaces + step.numParameterPlaces),
        memory(memory), rank(rank), ranks(ranks), scale(1.0f / float(ranks)),
        requested(buckets.size(), 0), completed(buckets.size(), 0),
        worker([this] { run(); }) {}

  ~MpiGradientExchange() override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    ready.notify_one();
    worker.join();
  }

  void gradientsReady(int bucket) override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      ++requested[bucket];
      queue.push_back(bucket);
    }
    ready.notify_one();
  }

  void awaitGradients(int bucket) override {
    std::unique_lock<std::mutex> lock(mutex);
    done.wait(lock, [&] { return completed[bucket] == requested[bucket]; });
  }

  // Called by the step's thread once every bucket it started has been
  // awaited (the gradient norm reads every gradient; the parameters are
  // gathered at the step's end): the worker is idle, so the calls stay
  // serialized.
  void sumOverRanks(double *values, int count) override {
    awaitAll();
    MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
  }

  void gatherParameters() override {
    awaitAll();
    uint8_t *gradients = memory.gradients;
    for (const ParameterPlace &p : places) {
      ShardPart part = memory.shardPart(p.gradientOffset, p.bytes / 4);
      std::memcpy(gradients + p.gradientOffset + 4 * part.first,
                  memory.parameters + p.parameterOffset + 4 * part.first,
                  4 * part.count);
    }
    int64_t count = memory.shardBytes / 4;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gradients, int(count),
                  MPI_FLOAT, MPI_COMM_WORLD);
    for (const ParameterPlace &p : places)
      std::memcpy(memory.parameters + p.parameterOffset,
                  gradients + p.gradientOffset, p.bytes);
  }

private:
  void run() {
    for (;;) {
      int bucket;
      {
        std::unique_lock<std::mutex> lock(mutex);
        ready.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty())
          return;
        bucket = queue.front();
        queue.pop_front();
      }
      const GradientBucket &b = buckets[bucket];
      if (memory.shardBytes)
        reduceScatter(b);
      else
        allReduce(b);
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++completed[bucket];
      }
      done.notify_all();
    }
  }

  void allReduce(const GradientBucket &b) {
    float *values = reinterpret_cast<float *>(memory.gradients + b.offset);
    int64_t count = b.bytes / 4;
    // Buckets are planned well under 2^31 values; a sum in pieces would
    // be the same sum.
    for (int64_t at = 0; at < count; at += (int64_t(1) << 30)) {
      int n = int(std::min<int64_t>(count - at, int64_t(1) << 30));
      MPI_Allreduce(MPI_IN_PLACE, values + at, n, MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    }
    // The mean over the ranks: each rank's loss is the mean over its
    // rows, so this is the mean over the global batch's.
    for (int64_t i = 0; i < count; ++i)
      values[i] *= scale;
  }

  void reduceScatter(const GradientBucket &b) {
    // Each rank's share of the bucket: where it meets the rank's part.
    std::vector<int> counts(ranks);
    int64_t ownBegin = 0, ownBytes = 0;
    for (int r = 0; r < ranks; ++r) {
      int64_t lo = std::max(b.offset, r * memory.shardBytes);
      int64_t hi = std::min(b.offset + b.bytes, (r + 1) * memory.shardBytes);
      counts[r] = int(std::max<int64_t>(0, hi - lo) / 4);
      if (r == rank) {
        ownBegin = lo;
        ownBytes = std::max<int64_t>(0, hi - lo);
      }
    }
    uint8_t *bucket = memory.gradients + b.offset;
    MPI_Reduce_scatter(MPI_IN_PLACE, bucket, counts.data(), MPI_FLOAT, MPI_SUM,
                       MPI_COMM_WORLD);
    // In place, the rank's sums land at the bucket's start.
    uint8_t *own = memory.gradients + ownBegin;
    if (ownBytes && own != bucket)
      std::memmove(own, bucket, ownBytes);
    float *values = reinterpret_cast<float *>(own);
    for (int64_t i = 0; i < ownBytes / 4; ++i)
      values[i] *= scale;
  }

  void awaitAll() {
    std::unique_lock<std::mutex> lock(mutex);
    done.wait(lock, [&] { return queue.empty() && completed == requested; });
  }

  std::vector<GradientBucket> buckets;
  std::vector<ParameterPlace> places;
  const StepMemory &memory;
  int rank, ranks;
  float scale;
  std::mutex mutex;
  std::condition_variable ready, done;
  std::deque<int> queue;
  std::vector<int64_t> requested, completed;
  bool stopping = false;
  std::thread worker; // last: it starts once the rest is built
};

class MpiRanks : public Ranks {
public:
  MpiRanks(int rank, int size, int local) : Ranks(rank, size, local) {}
  ~MpiRanks() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      MPI_Finalize();
  }

  std::string describe() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string library(version, std::strcspn(version, ",\n"));
    return "rank " + std::to_string(rank()) + " of " + std::to_string(size()) +
           " (" + library + ")";
  }

  bool agreeOnPlan(const std::string &planHash, std::string &error) override {
    unsigned long long mine = fnv1a(planHash);
    std::vector<unsigned long long> all(size());
    MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all.data(), 1,
                  MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
    std::string differing;
    for (int r = 1; r < size(); ++r)
      if (all[r] != all[0])
        differing += (differing.empty() ? "" : ", ") + std::to_string(r);
    if (differing.empty())
      return true;
    bool one = differing.find(',') == std::string::npos;
    error = (one ? "rank " : "ranks ") + differing + (one ? " runs" : " run") +
            " a different plan than rank 0 (another build of the trainer, "
            "or the model compiled with other options or -D values): every "
            "rank must run the same trainer";
    return false;
  }

  void sum(double *values, int count) override {
    MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
  }

  std::unique_ptr<GradientExchange>
  gradientExchange(const StepInfo &step, const StepMemory &memory) override {
    if (size() == 1)
      return nullptr;
    return std::make_unique<MpiGradientExchange>(step, memory, rank(), size());
  }

  void gatherState(const uint8_t *part, int64_t bytes,
                   std::vector<uint8_t> &all) override {
    if (leader())
      all.resize(bytes * size());
    MPI_Gather(part, int(bytes), MPI_BYTE, leader() ? all.data() : nullptr,
               int(bytes), MPI_BYTE, 0, MPI_COMM_WORLD);
  }
};

#endif // MNEMO_HAVE_MPI

} // namespace

std::unique_ptr<Ranks> Ranks::join(std::string &error) {
  int launched = launchedWorldSize();
  if (launched == 0)
    return std::make_unique<SingleProcess>();
#if MNEMO_HAVE_MPI
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) !=
      MPI_SUCCESS) {
    error = "cannot join the MPI job the launcher started";
    return nullptr;
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    error = "this MPI library does not let a second thread make the calls "
            "(MPI_THREAD_SERIALIZED), which the gradient exchange needs";
    return nullptr;
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // The ranks that share this machine's memory (and cores).
  MPI_Comm local;
  int localSize = 1;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                          MPI_INFO_NULL, &local) == MPI_SUCCESS) {
    MPI_Comm_size(local, &localSize);
    MPI_Comm_free(&local);
  }
  return std::make_unique<MpiRanks>(rank, size, localSize);
#else
  if (launched == 1)
    return std::make_unique<SingleProcess>();
  error = "launched as one of " + std::to_string(launched) +
          " ranks, but this trainer was built without MPI (install Open MPI: "
          "Debian's libopenmpi-dev, and rebuild)";
  return nullptr;
#endif
}

} // namespace runtime
} // namespace mnemo
