//===- RematMilp.h - The exact recomputation problem, solved by CBC -------===//
//
// `--remat=optimal` as a mixed-integer program over a fixed op order, in the
// spirit of Checkmate (Jain et al. 2020) restricted to what the remat pass
// can emit: each forward value the backward reads is either kept or
// recomputed once, right before its first backward use, and a value a
// recomputation reads must be alive then (kept longer, or recomputed
// earlier itself). Memory is counted per op: the bytes of every value alive
// across it. Plain C++ so that it is unit-tested without MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_PASSES_REMATMILP_H
#define MNEMO_PASSES_REMATMILP_H

#include <cstdint>
#include <string>
#include <vector>

namespace mnemo {

/// One forward value of the step. Times are op indices of the step.
struct RematValue {
  int64_t bytes = 0;
  int64_t flops = 0; ///< to compute it once
  int defined = 0;
  int lastForwardUse = 0; ///< `defined` when no forward op reads it
  /// A candidate: the backward reads it, so keeping it costs its bytes
  /// from `lastForwardUse` to `firstBackwardUse`. Other forward values die
  /// in the forward, but are recomputed when a recomputation needs them.
  bool candidate = false;
  int firstBackwardUse = 0;
  int lastBackwardUse = 0;
  /// The forward values its op reads (indices into `RematProblem::values`;
  /// parameters, inputs and constants are always alive and not listed).
  std::vector<int> operands;
};

struct RematProblem {
  std::vector<RematValue> values;
  /// Per op index: the bytes alive across it that recomputation does not
  /// change (backward values, and the forward values outside their gaps).
  std::vector<int64_t> fixedBytes;
  /// The bound on any op's bytes.
  int64_t capacity = 0;
};

struct RematSolution {
  std::vector<bool> recompute; ///< per value; true only for candidates
  int64_t recomputedFlops = 0;
  int64_t modelPeak = 0;      ///< the largest op's bytes, as the model counts
  bool provedOptimal = false; ///< false when the time limit cut the search
  /// The relative gap to the best bound when the search was cut (-1 when
  /// CBC reported none).
  double gap = 0;
  int variables = 0, constraints = 0;
  double seconds = 0;       ///< in all: the program, its start, the solver
  double solverSeconds = 0; ///< in CBC alone
};

/// What a choice costs in the model the MILP solves: a recomputed value
/// is cloned at each time some recomputation needs it (its first backward
/// use, or an earlier recomputation that reads it), which needs its own
/// operands then; a candidate is alive from the earliest time it is
/// needed; of the other values recomputed at a time, only the largest
/// counts (each dies once its consumer's clone is made).
struct RematCost {
  std::vector<int64_t> bytes; ///< per op index
  int64_t flops = 0;
  int64_t peak() const;
};
RematCost evaluateRemat(const RematProblem &problem,
                        const std::vector<bool> &recompute);

/// Solves for the least recomputed FLOPs that keeps every op within the
/// capacity. Returns false with `error` set when no choice fits (or the
/// solver found none within `timeLimitSeconds`).
bool solveRematMilp(const RematProblem &problem, double timeLimitSeconds,
                    RematSolution &solution, std::string &error);

/// A greedy on the same model, for `--remat=auto`: while the model's peak
/// op is over the capacity, recomputes the candidate that frees the most
/// bytes there per recomputed FLOP. Returns false when nothing helps.
bool greedyRemat(const RematProblem &problem, RematSolution &solution);

} // namespace mnemo

#endif // MNEMO_PASSES_REMATMILP_H
