//===- Ranks.h - The processes of a data-parallel run -----------*- C++ -*-===//
//
// A trainer that mpirun (or another MPI launcher) starts N times is one rank
// of a data-parallel run: every rank holds the whole model, reads its own
// rows of each global batch (runtime/Data.h), sums its gradients with the
// others' through MPI while its backward goes on (GradientExchange,
// runtime/Model.h), and applies the same update. The collectives are MPI's
// (Open MPI, Debian's libopenmpi-dev); a trainer built without MPI runs as
// one process and says so when launched as several.
//
// Part of the runtime: plain C++17 (and MPI when found), no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_RANKS_H
#define MNEMO_RUNTIME_RANKS_H

#include "runtime/Model.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mnemo::runtime {

class Ranks {
public:
  /// Joins the job a launcher started (its environment says: Open MPI's
  /// OMPI_COMM_WORLD_SIZE, PMI or PMIx variables), or stands alone as rank
  /// 0 of 1. Null with `error` set when the launch asks for several ranks
  /// and this build cannot join them.
  static std::unique_ptr<Ranks> join(std::string &error);
  virtual ~Ranks() = default;

  int rank() const { return rankIndex; }
  int size() const { return rankCount; }
  /// Ranks on this machine (they share its cores and GPUs), and this one's
  /// place among them (its GPU).
  int localSize() const { return localCount; }
  int localRank() const { return localIndex; }
  /// Rank 0 prints, evaluates the summary and writes every output file.
  bool leader() const { return rankIndex == 0; }
  /// "rank 1 of 2 (Open MPI v4.1.4)"; "" alone.
  virtual std::string describe() const = 0;

  /// Succeeds when every rank runs the same plan (its hash); otherwise
  /// fails on every rank with `error` naming those that differ.
  virtual bool agreeOnPlan(const std::string &planHash, std::string &error) = 0;
  /// Seconds a collective may wait for the other ranks before the run
  /// stops, naming those that never arrived (default 300).
  virtual void setTimeout(double seconds) = 0;
  /// The step the run is in, for that message.
  virtual void setStep(int64_t step) = 0;
  /// Sums `count` values over the ranks, in place; every rank gets the
  /// same sums.
  virtual void sum(double *values, int count) = 0;
  /// Rank 0's `bytes` at `data` to every rank (NCCL's unique id).
  virtual void broadcast(void *data, int bytes) = 0;
  /// Polls `done` until it holds, under the collective timeout: work that
  /// waits on the other ranks outside MPI (a GPU step whose NCCL sums need
  /// them) ends the run as a collective would, naming the ranks that never
  /// arrived. Every rank calls it at the same point.
  virtual void awaitDevice(const std::function<bool()> &done,
                           const char *what) = 0;
  /// The exchange a training step calls for its gradient buckets, which
  /// lie in the plan's gradient region of `memory`: each bucket is summed
  /// over the ranks and divided by their number, so that every rank holds
  /// the mean gradient (under ZeRO-1, of its part), as one process with the
  /// whole global batch computes it. `memory` must outlive it. Null alone.
  virtual std::unique_ptr<GradientExchange>
  gradientExchange(const StepInfo &step, const StepMemory &memory) = 0;
  /// Every rank's `bytes` at `part`, in rank order, into `all` on rank 0
  /// (ZeRO-1's optimizer state, for the checkpoint). Collective.
  virtual void gatherState(const uint8_t *part, int64_t bytes,
                           std::vector<uint8_t> &all) = 0;

protected:
  Ranks(int rank, int size, int local, int localRank)
      : rankIndex(rank), rankCount(size), localCount(local),
        localIndex(localRank) {}

private:
  int rankIndex, rankCount, localCount, localIndex;
};

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_RANKS_H
