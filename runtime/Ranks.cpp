//===- Ranks.cpp - The processes of a data-parallel run -------------------===//

#include "runtime/Ranks.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#if MNEMO_HAVE_MPI
#define OMPI_SKIP_MPICXX 1 // the C API only
#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <vector>
#endif

namespace mnemo::runtime {
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
  SingleProcess() : Ranks(0, 1, 1, 0) {}
  std::string describe() const override { return ""; }
  bool agreeOnPlan(const std::string &, std::string &) override { return true; }
  void sum(double *, int) override {}
  void broadcast(void *, int) override {}
  // Alone, nothing waits on another process.
  void awaitDevice(const std::function<bool()> &done, const char *) override {
    while (!done())
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  void setTimeout(double) override {}
  void setStep(int64_t) override {}
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

/// Waits for collectives with a deadline, so that a rank that stops or
/// hangs ends the run with its name instead of leaving the others blocked
/// for ever (a rank that dies is mpirun's to report: it ends the job and
/// names it). Nothing is sent while collectives finish in time: a rank
/// that has waited half the timeout tells every other rank which
/// collective it waits in, and at the timeout the ranks that said nothing
/// are the ones that never arrived.
class Deadline {
public:
  Deadline(int rank, int size, double seconds)
      : rank(rank), size(size), seconds(seconds), heard(size, -1) {
    MPI_Comm_dup(MPI_COMM_WORLD, &notices);
    listen();
  }
  ~Deadline() {
    MPI_Cancel(&notice);
    MPI_Wait(&notice, MPI_STATUS_IGNORE);
    MPI_Comm_free(&notices);
  }

  /// The step the trainer is in, for the message.
  std::atomic<int64_t> step{0};

  /// Completes `request`, the collective `what` (MPI_Test drives Open
  /// MPI's progress).
  void wait(MPI_Request &request, const char *what) {
    waitUntil(
        [&] {
          int done = 0;
          MPI_Test(&request, &done, MPI_STATUS_IGNORE);
          return done != 0;
        },
        what);
  }

  /// Polls `done` (the first polls spin, later ones sleep 20 us) under
  /// the deadline.
  void waitUntil(const std::function<bool()> &done, const char *what) {
    std::lock_guard<std::mutex> lock(mutex);
    long long sequence = ++collectives;
    auto start = std::chrono::steady_clock::now();
    bool told = false;
    for (int polls = 0;; ++polls) {
      if (done())
        return;
      hear();
      if (polls < 1000)
        continue;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      double waited = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count();
      if (!told && waited > seconds / 2) {
        tell(sequence);
        told = true;
      }
      if (waited > seconds)
        giveUp(sequence, what, waited);
    }
  }

private:
  void listen() {
    MPI_Irecv(&received, 1, MPI_LONG_LONG, MPI_ANY_SOURCE, 0, notices, &notice);
  }
  void hear() {
    int arrived = 0;
    MPI_Status status;
    MPI_Test(&notice, &arrived, &status);
    if (!arrived)
      return;
    heard[status.MPI_SOURCE] = received;
    listen();
  }
  void tell(long long sequence) {
    sent = sequence;
    for (int r = 0; r < size; ++r)
      if (r != rank) {
        MPI_Request request;
        MPI_Isend(&sent, 1, MPI_LONG_LONG, r, 0, notices, &request);
        MPI_Request_free(&request);
      }
  }
  [[noreturn]] void giveUp(long long sequence, const char *what,
                           double waited) {
    std::string missing;
    int count = 0;
    for (int r = 0; r < size; ++r)
      if (r != rank && heard[r] != sequence) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        ++count;
      }
    std::fprintf(stderr,
                 "train: error: rank %d: %s in step %lld waited %.0f s for "
                 "%s%s%s: stopping every rank (--collective-timeout)\n",
                 rank, what, (long long)step.load(), waited,
                 count == 0 ? "a rank inside it (every rank arrived)"
                            : (count == 1 ? "rank " : "ranks "),
                 missing.c_str(),
                 count == 0 ? ""
                            : ", which never arrived: stopped, hung or "
                              "far slower than the others");
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);
  }

  int rank, size;
  double seconds;
  std::mutex mutex;
  MPI_Comm notices;
  MPI_Request notice;
  long long received = 0, sent = 0, collectives = 0;
  std::vector<long long> heard;
};

/// Sums buckets on a thread of its own, in the order the step makes them
/// ready, while the step's thread computes the rest of the backward: the
/// thread polls the collective (Deadline::wait), which is what makes Open
/// MPI's non-blocking collectives progress. All MPI calls during a step
/// are this thread's; the trainer calls MPI only between steps, when every
/// bucket has been awaited (MPI_THREAD_SERIALIZED).
///
/// ZeRO-1 (a step with shardBytes): a bucket is reduce-scattered in place
/// (each rank's sums land at the bucket's start, then move to its part),
/// and the parameters are all-gathered through the gradient region, which
/// the step no longer needs by then: each rank writes its updated part
/// there, the parts are gathered, and every parameter is copied back.
class MpiGradientExchange : public GradientExchange {
public:
  MpiGradientExchange(const StepInfo &step, const StepMemory &memory,
                      Deadline &deadline, int rank, int ranks)
      : deadline(deadline),
        buckets(step.gradientBuckets,
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
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM,
                   MPI_COMM_WORLD, &request);
    deadline.wait(request, "the gradient norm's sum");
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
    MPI_Request request;
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gradients, int(count),
                   MPI_FLOAT, MPI_COMM_WORLD, &request);
    deadline.wait(request, "the parameters' all-gather");
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
      MPI_Request request;
      MPI_Iallreduce(MPI_IN_PLACE, values + at, n, MPI_FLOAT, MPI_SUM,
                     MPI_COMM_WORLD, &request);
      deadline.wait(request, "a gradient bucket's sum");
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
    MPI_Request request;
    MPI_Ireduce_scatter(MPI_IN_PLACE, bucket, counts.data(), MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD, &request);
    deadline.wait(request, "a gradient bucket's reduce-scatter");
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

  Deadline &deadline;
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
  MpiRanks(int rank, int size, int local, int localRank)
      : Ranks(rank, size, local, localRank),
        deadline(std::make_unique<Deadline>(rank, size, 300)) {}
  ~MpiRanks() override {
    deadline.reset();
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
    // The hash is the compiler's (64 bits, in hex).
    unsigned long long mine = std::strtoull(planHash.c_str(), nullptr, 16);
    std::vector<unsigned long long> all(size());
    MPI_Request request;
    MPI_Iallgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all.data(), 1,
                   MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD, &request);
    deadline->wait(request, "the plans' comparison");
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
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM,
                   MPI_COMM_WORLD, &request);
    deadline->wait(request, "the ranks' sum of results");
  }

  void broadcast(void *data, int bytes) override {
    MPI_Request request;
    MPI_Ibcast(data, bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &request);
    deadline->wait(request, "a broadcast from rank 0");
  }

  void awaitDevice(const std::function<bool()> &done,
                   const char *what) override {
    deadline->waitUntil(done, what);
  }

  void setTimeout(double seconds) override {
    deadline = std::make_unique<Deadline>(rank(), size(), seconds);
  }
  void setStep(int64_t step) override { deadline->step = step; }

  std::unique_ptr<GradientExchange>
  gradientExchange(const StepInfo &step, const StepMemory &memory) override {
    if (size() == 1)
      return nullptr;
    return std::make_unique<MpiGradientExchange>(step, memory, *deadline,
                                                 rank(), size());
  }

  void gatherState(const uint8_t *part, int64_t bytes,
                   std::vector<uint8_t> &all) override {
    if (leader())
      all.resize(bytes * size());
    MPI_Request request;
    MPI_Igather(part, int(bytes), MPI_BYTE, leader() ? all.data() : nullptr,
                int(bytes), MPI_BYTE, 0, MPI_COMM_WORLD, &request);
    deadline->wait(request, "the optimizer state's gather");
  }

private:
  std::unique_ptr<Deadline> deadline;
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
  int localSize = 1, localRank = 0;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                          MPI_INFO_NULL, &local) == MPI_SUCCESS) {
    MPI_Comm_size(local, &localSize);
    MPI_Comm_rank(local, &localRank);
    MPI_Comm_free(&local);
  }
  return std::make_unique<MpiRanks>(rank, size, localSize, localRank);
#else
  if (launched == 1)
    return std::make_unique<SingleProcess>();
  error = "launched as one of " + std::to_string(launched) +
          " ranks, but this trainer was built without MPI (install Open MPI: "
          "Debian's libopenmpi-dev, and rebuild)";
  return nullptr;
#endif
}

} // namespace mnemo::runtime
