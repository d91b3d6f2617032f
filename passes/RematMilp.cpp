//===- RematMilp.cpp - The exact recomputation problem, solved by CBC -----===//
//
// Variables (see RematMilp.h for the model):
//   r[v]      binary: candidate v is recomputed;
//   a[x,T]    in [0,1]: value x is needed at time T by a recomputation
//             (a[v,first backward use of v] >= r[v]; a value recomputed at
//             T needs its operands at T);
//   L[u,t]    in [0,1]: candidate u is alive at op t outside the times it
//             is alive anyway (L >= 1 - r[u] in its gap, L >= a[u,T] from
//             an earlier need T to its first backward use, or from its last
//             backward use to a later need T);
//   m[T]      >= 0: the largest value nothing keeps that is recomputed at T
//             (m[T] >= bytes[w] * a[w,T]); clones of such values live only
//             until their consumer's clone, so only the largest counts.
// Rows: every op's bytes within the capacity. Objective: recomputed FLOPs.
// Every a and L only adds bytes or FLOPs, so an optimum sets them to their
// lower bounds, which are exactly the model's indicator values: the MILP's
// optimum is the model's.
//
//===----------------------------------------------------------------------===//

#include "passes/RematMilp.h"
#include "runtime/Failure.h"

#include <cfloat>
#include <coin/Cbc_C_Interface.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <thread>

using namespace mnemo;

namespace {

/// (value, time) pairs where a value is needed by recomputations, given
/// which candidates are recomputed.
using Needs = std::vector<std::set<int>>;

template <typename Recomputed>
Needs propagateNeeds(const RematProblem &p, Recomputed recomputed) {
  Needs needs(p.values.size());
  std::vector<std::pair<int, int>> work;
  auto need = [&](int x, int t) {
    if (needs[x].insert(t).second)
      work.push_back({x, t});
  };
  for (size_t v = 0; v < p.values.size(); ++v)
    if (p.values[v].candidate && recomputed(int(v)))
      need(int(v), p.values[v].firstBackwardUse);
  while (!work.empty()) {
    auto [x, t] = work.back();
    work.pop_back();
    const RematValue &value = p.values[x];
    // A kept candidate is read as it is; a recomputed one is cloned at its
    // first backward use or earlier, and a clone made earlier is reused.
    bool cloned =
        !value.candidate || (recomputed(x) && t <= value.firstBackwardUse);
    if (cloned)
      for (int o : value.operands)
        need(o, t);
  }
  return needs;
}

struct Column {
  double cost = 0;
  bool binary = false;
  bool bounded = true; ///< in [0, 1]; otherwise >= 0
};

/// A sparse linear program as 1-based triplets (rows, columns, values).
struct Program {
  std::vector<Column> columns;
  std::vector<double> rowUpper, rowLower;
  std::vector<bool> rowHasUpper;
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0};

  int column(double cost, bool binary, bool bounded = true) {
    columns.push_back({cost, binary, bounded});
    return int(columns.size());
  }
  /// sum(terms) >= lower
  void atLeast(const std::vector<std::pair<int, double>> &terms, double lower) {
    row(terms, lower, false, 0);
  }
  void atMost(const std::vector<std::pair<int, double>> &terms, double upper) {
    row(terms, 0, true, upper);
  }
  void row(const std::vector<std::pair<int, double>> &terms, double lower,
           bool upper, double bound) {
    int r = int(rowLower.size()) + 1;
    rowLower.push_back(lower);
    rowHasUpper.push_back(upper);
    rowUpper.push_back(bound);
    for (auto [c, coef] : terms) {
      ia.push_back(r);
      ja.push_back(c);
      ar.push_back(coef);
    }
  }
};

} // namespace

int64_t RematCost::peak() const {
  return bytes.empty() ? 0 : *std::max_element(bytes.begin(), bytes.end());
}

RematCost mnemo::evaluateRemat(const RematProblem &p,
                               const std::vector<bool> &recompute) {
  Needs needs = propagateNeeds(p, [&](int v) { return bool(recompute[v]); });
  RematCost cost;
  cost.bytes = p.fixedBytes;
  int n = int(cost.bytes.size());
  // The recomputed values nothing keeps are alive only while their
  // consumer's clone is made: the largest of them counts at that time.
  std::map<int, int64_t> transient;
  // Bytes added over [from, to) as differences, summed once at the end: a
  // greedy step evaluates hundreds of choices over thousands of ops.
  std::vector<int64_t> delta(n + 1, 0);
  auto add = [&](int from, int to, int64_t bytes) {
    from = std::max(from, 0);
    to = std::min(to, n);
    if (from < to) {
      delta[from] += bytes;
      delta[to] -= bytes;
    }
  };
  for (size_t x = 0; x < p.values.size(); ++x) {
    const RematValue &v = p.values[x];
    const std::set<int> &at = needs[x];
    if (!v.candidate) {
      for (int t : at) {
        transient[t] = std::max(transient[t], v.bytes);
        cost.flops += v.flops;
      }
      continue;
    }
    if (recompute[x]) {
      cost.flops += v.flops;
      if (!at.empty() && *at.begin() < v.firstBackwardUse)
        add(*at.begin(), v.firstBackwardUse, v.bytes);
    } else {
      add(v.lastForwardUse + 1, v.firstBackwardUse, v.bytes);
    }
    if (!at.empty() && *at.rbegin() > v.lastBackwardUse)
      add(v.lastBackwardUse + 1, *at.rbegin() + 1, v.bytes);
  }
  for (auto [t, bytes] : transient)
    add(t, t + 1, bytes);
  int64_t live = 0;
  for (int t = 0; t < n; ++t) {
    live += delta[t];
    cost.bytes[t] += live;
  }
  return cost;
}

namespace {

/// The MILP of a problem (the model in this file's header), its columns
/// and rows added in a fixed order: the same problem gives CBC the same
/// program.
struct Formulation {
  explicit Formulation(const RematProblem &p)
      : p(p), n(int(p.fixedBytes.size())), r(p.values.size(), 0),
        a(p.values.size()), constant(n), terms(n) {}

  bool build(std::string &error) {
    addNeeds();
    for (int t = 0; t < n; ++t)
      constant[t] = kib(p.fixedBytes[t]);
    for (size_t x = 0; x < p.values.size(); ++x) {
      if (p.values[x].candidate)
        addCandidateBytes(x);
      else
        addTransientBytes(x);
    }
    return addCapacityRows(error);
  }

  const RematProblem &p;
  const int n;
  Program lp;
  // r[v]: v recomputed (columns of candidates, 0 for the others); a[x][T]:
  // x needed at T.
  std::vector<int> r;
  std::vector<std::map<int, int>> a;

private:
  // Bytes in KiB keep the coefficients near 1.
  static double kib(int64_t bytes) { return double(bytes) / 1024.0; }

  void addNeeds();
  void addTransientBytes(size_t x);
  void addCandidateBytes(size_t x);
  bool addCapacityRows(std::string &error);

  // Per op: the constant bytes and the variable terms.
  std::vector<double> constant;
  std::vector<std::vector<std::pair<int, double>>> terms;
  // Per time: the largest transient (KiB).
  std::map<int, int> transient;
};

/// The columns r and a, and the rows that make a value needed where a
/// recomputation reads it.
void Formulation::addNeeds() {
  Needs potential = propagateNeeds(p, [](int) { return true; });
  // FLOPs in units that put the largest op's cost at 1000, well above the
  // solvers' tolerances on the objective.
  double flopUnit = 1;
  for (const RematValue &v : p.values)
    flopUnit = std::max(flopUnit, double(v.flops) / 1000.0);
  for (size_t v = 0; v < p.values.size(); ++v)
    if (p.values[v].candidate)
      r[v] = lp.column(double(p.values[v].flops) / flopUnit, true);
  for (size_t x = 0; x < p.values.size(); ++x)
    for (int t : potential[x])
      a[x][t] = lp.column(
          p.values[x].candidate ? 0.0 : double(p.values[x].flops) / flopUnit,
          false);
  // A recomputed candidate is needed at its first backward use; a value
  // cloned at T needs its operands at T.
  for (size_t x = 0; x < p.values.size(); ++x) {
    const RematValue &v = p.values[x];
    if (v.candidate)
      lp.atLeast({{a[x][v.firstBackwardUse], 1}, {r[x], -1}}, 0);
    for (auto [t, col] : a[x]) {
      if (v.candidate && t > v.firstBackwardUse)
        continue;
      for (int o : v.operands) {
        if (v.candidate) // a[o,t] >= a[x,t] + r[x] - 1
          lp.atLeast({{a[o][t], 1}, {col, -1}, {r[x], -1}}, -1);
        else
          lp.atLeast({{a[o][t], 1}, {col, -1}}, 0);
      }
    }
  }
}

/// A value nothing keeps lives only while the clone that reads it is made:
/// transient[t] >= bytes * a[x,t].
void Formulation::addTransientBytes(size_t x) {
  double bytes = kib(p.values[x].bytes);
  for (auto [t, col] : a[x]) {
    if (t >= n)
      continue;
    auto [it, fresh] = transient.try_emplace(t, 0);
    if (fresh) {
      it->second = lp.column(0, false, /*bounded=*/false);
      terms[t].push_back({it->second, 1});
    }
    lp.atLeast({{it->second, 1}, {col, -bytes}}, 0);
  }
}

/// Candidate x is alive from its earliest need before its first backward
/// use, and after its last backward use until its latest need: chains
/// L[x,t] >= L[x,t-1] (resp. L[x,t+1]) from each need's L[x,T] >= a; and
/// in the gap between its uses unless recomputed.
void Formulation::addCandidateBytes(size_t x) {
  const RematValue &v = p.values[x];
  double bytes = kib(v.bytes);
  int earliest = INT_MAX, latest = INT_MIN;
  for (auto [need, col] : a[x]) {
    if (need < v.firstBackwardUse)
      earliest = std::min(earliest, need);
    if (need > v.lastBackwardUse)
      latest = std::max(latest, need);
  }
  std::map<int, int> alive; // t -> L[x,t]
  auto liveness = [&](int t) {
    int l = lp.column(0, false);
    alive[t] = l;
    return l;
  };
  for (int t = earliest; t < v.firstBackwardUse && t < n; ++t) {
    int l = liveness(t);
    if (t > earliest)
      lp.atLeast({{l, 1}, {alive[t - 1], -1}}, 0);
  }
  for (int t = std::min(latest, n - 1); t > v.lastBackwardUse; --t) {
    int l = liveness(t);
    if (t < std::min(latest, n - 1))
      lp.atLeast({{l, 1}, {alive[t + 1], -1}}, 0);
  }
  for (auto [need, col] : a[x])
    if (alive.count(need))
      lp.atLeast({{alive[need], 1}, {col, -1}}, 0);
  for (int t = v.lastForwardUse + 1; t < std::min(v.firstBackwardUse, n); ++t) {
    if (!alive.count(t)) { // bytes * (1 - r)
      constant[t] += bytes;
      terms[t].push_back({r[x], -bytes});
    }
  }
  for (auto [t, l] : alive) {
    if (t > v.lastForwardUse && t < v.firstBackwardUse)
      lp.atLeast({{l, 1}, {r[x], 1}}, 1);
    terms[t].push_back({l, bytes});
  }
}

/// Every op's bytes within the capacity; false where an op's constant
/// bytes alone exceed it.
bool Formulation::addCapacityRows(std::string &error) {
  double capacity = kib(p.capacity);
  for (int t = 0; t < n; ++t) {
    if (terms[t].empty()) {
      if (constant[t] > capacity + 1e-6)
        return failWith(error, "op " + std::to_string(t) +
                                   " alone needs more than the "
                                   "capacity, whatever is recomputed");
      continue;
    }
    lp.atMost(terms[t], capacity - constant[t]);
  }
  return true;
}

/// The program as a CBC model (CBC takes the matrix by columns).
Cbc_Model *loadIntoCbc(const Program &lp) {
  int columns = int(lp.columns.size()), rows = int(lp.rowLower.size());
  std::vector<CoinBigIndex> start(columns + 1, 0);
  for (size_t k = 1; k < lp.ja.size(); ++k)
    ++start[lp.ja[k]];
  for (int c = 0; c < columns; ++c)
    start[c + 1] += start[c];
  std::vector<int> index(lp.ja.size() - 1);
  std::vector<double> value(lp.ja.size() - 1);
  std::vector<CoinBigIndex> fill(start.begin(), start.end() - 1);
  for (size_t k = 1; k < lp.ja.size(); ++k) {
    CoinBigIndex at = fill[lp.ja[k] - 1]++;
    index[at] = lp.ia[k] - 1;
    value[at] = lp.ar[k];
  }
  std::vector<double> colLower(columns, 0.0), colUpper(columns),
      objective(columns);
  for (int c = 0; c < columns; ++c) {
    colUpper[c] = lp.columns[c].bounded ? 1.0 : DBL_MAX;
    objective[c] = lp.columns[c].cost;
  }
  std::vector<double> rowLower(rows), rowUpper(rows);
  for (int row = 0; row < rows; ++row) {
    rowLower[row] = lp.rowHasUpper[row] ? -DBL_MAX : lp.rowLower[row];
    rowUpper[row] = lp.rowHasUpper[row] ? lp.rowUpper[row] : DBL_MAX;
  }
  Cbc_Model *model = Cbc_newModel();
  Cbc_setLogLevel(model, 0);
  Cbc_loadProblem(model, columns, rows, start.data(), index.data(),
                  value.data(), colLower.data(), colUpper.data(),
                  objective.data(), rowLower.data(), rowUpper.data());
  for (int c = 0; c < columns; ++c)
    if (lp.columns[c].binary)
      Cbc_setInteger(model, c);
  return model;
}

} // namespace

namespace {

/// What CBC found, as the child process leaves it.
struct CbcOutcome {
  bool found = false, provedOptimal = false, infeasible = false,
       secondsLimitReached = false;
  double objective = 0, bound = 0;
};

/// Solves `lp` with CBC, stopping its branch and bound at `seconds`.
/// `binaries` are the columns (0-based) of the choices: `start` (when not
/// empty) is a solution to start from, `chosen` gets the solution's.
CbcOutcome runCbc(const Program &lp, double seconds,
                  const std::vector<int> &binaries,
                  const std::vector<double> &start, std::vector<char> &chosen) {
  Cbc_Model *model = loadIntoCbc(lp);
  Cbc_setMaximumSeconds(model, seconds);
  // Wall time, as the deadline around it and the search's budget count: in
  // CPU time (CBC's default) a loaded machine would reach the deadline
  // before CBC's own limit, and lose the best solution found.
  Cbc_setParameter(model, "timeMode", "elapsed");
  Cbc_setAllowableGap(model, 0.0);
  Cbc_setParameter(model, "ratioGap", "0");
  // CBC 2.10's integer preprocessing trips an assertion in
  // OsiClpSolverInterface::crunch on some of these programs.
  Cbc_setParameter(model, "preprocess", "off");
  if (!start.empty())
    Cbc_setMIPStartI(model, int(binaries.size()), binaries.data(),
                     start.data());
  Cbc_solve(model);
  CbcOutcome outcome;
  outcome.found =
      Cbc_numberSavedSolutions(model) > 0 ||
      (Cbc_isProvenOptimal(model) && !Cbc_isProvenInfeasible(model));
  outcome.provedOptimal = Cbc_isProvenOptimal(model);
  outcome.infeasible = Cbc_isProvenInfeasible(model);
  outcome.secondsLimitReached = Cbc_isSecondsLimitReached(model);
  if (outcome.found) {
    outcome.objective = Cbc_getObjValue(model);
    outcome.bound = Cbc_getBestPossibleObjValue(model);
    const double *x = Cbc_getColSolution(model);
    chosen.resize(binaries.size());
    for (size_t i = 0; i < binaries.size(); ++i)
      chosen[i] = x[binaries[i]] > 0.5;
  }
  Cbc_deleteModel(model);
  return outcome;
}

/// runCbc in a child process that is killed if it runs past `deadline`.
/// CBC's time limit holds in its branch and bound only: the LP relaxation
/// at the root runs to its end, and on an unrolled LSTM's program (600,000
/// columns, 1.3 million rows) that took more than 7 minutes under a limit of
/// 10 s. A child also keeps a failed assertion inside CBC from ending the
/// compiler. The child leaves its outcome in memory shared with the
/// parent. False, with `error`, where no outcome came back.
bool runCbcWithDeadline(const Program &lp, double seconds,
                        std::chrono::steady_clock::time_point deadline,
                        const std::vector<int> &binaries,
                        const std::vector<double> &start, CbcOutcome &outcome,
                        std::vector<char> &chosen, std::string &error) {
  size_t bytes = sizeof(CbcOutcome) + binaries.size();
  void *shared = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED)
    return failWith(error, std::string("cannot start the solver: ") +
                               std::strerror(errno));
  std::fflush(nullptr); // nothing buffered is written twice
  pid_t child = ::fork();
  if (child < 0) {
    ::munmap(shared, bytes);
    error = std::string("cannot start the solver: ") + std::strerror(errno);
    return false;
  }
  if (child == 0) {
    // A crash is the parent's to report, without the compiler's handlers.
    std::signal(SIGSEGV, SIG_DFL);
    std::signal(SIGABRT, SIG_DFL);
    CbcOutcome found = runCbc(lp, seconds, binaries, start, chosen);
    std::memcpy(shared, &found, sizeof found);
    if (found.found)
      std::memcpy(static_cast<char *>(shared) + sizeof found, chosen.data(),
                  chosen.size());
    ::_exit(0);
  }
  // Polled every few milliseconds: a solve takes at least tens of them.
  int status = 0;
  bool stopped = false;
  for (auto pause = std::chrono::milliseconds(1);;
       pause = std::min(2 * pause, std::chrono::milliseconds(16))) {
    pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child || (done < 0 && errno != EINTR))
      break;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(child, SIGKILL);
      while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
      stopped = true;
      break;
    }
    std::this_thread::sleep_for(pause);
  }
  bool received = !stopped && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (received) {
    std::memcpy(&outcome, shared, sizeof outcome);
    const char *flags = static_cast<const char *>(shared) + sizeof outcome;
    chosen.assign(flags, flags + binaries.size());
  }
  ::munmap(shared, bytes);
  if (received)
    return true;
  if (stopped)
    error = "the solver did not finish its LP relaxation within the time "
            "limit (" +
            std::to_string(lp.columns.size()) + " variables, " +
            std::to_string(lp.rowLower.size()) + " rows)";
  else
    error = WIFSIGNALED(status) ? "the solver failed (signal " +
                                      std::to_string(WTERMSIG(status)) + ")"
                                : "the solver failed";
  return false;
}

} // namespace

bool mnemo::solveRematMilp(const RematProblem &p, double timeLimitSeconds,
                           RematSolution &solution, std::string &error) {
  auto started = std::chrono::steady_clock::now();
  Formulation milp(p);
  if (!milp.build(error))
    return false;
  solution.variables = int(milp.lp.columns.size());
  solution.constraints = int(milp.lp.rowLower.size());
  // The candidates' columns, and a start: the greedy's choice, when it
  // fits.
  std::vector<int> candidates;
  for (size_t v = 0; v < p.values.size(); ++v)
    if (p.values[v].candidate)
      candidates.push_back(milp.r[v] - 1);
  std::vector<double> start;
  RematSolution greedy;
  if (greedyRemat(p, greedy))
    for (size_t v = 0; v < p.values.size(); ++v)
      if (p.values[v].candidate)
        start.push_back(greedy.recompute[v] ? 1.0 : 0.0);
  // Past CBC's own limit, a margin for loading the program and for CBC to
  // stop at its next check. At most a day (mnemoc's bound; the pass option
  // may say more): the deadline's nanoseconds must fit an int64.
  double secondsLeft =
      std::min(timeLimitSeconds, 86400.0) -
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(std::max(secondsLeft, 0.0) * 1.1 + 2));
  CbcOutcome outcome;
  std::vector<char> chosen;
  auto solving = std::chrono::steady_clock::now();
  bool ran = runCbcWithDeadline(milp.lp, std::max(secondsLeft, 0.05), deadline,
                                candidates, start, outcome, chosen, error);
  auto now = std::chrono::steady_clock::now();
  solution.seconds = std::chrono::duration<double>(now - started).count();
  solution.solverSeconds = std::chrono::duration<double>(now - solving).count();
  if (!ran)
    return false;
  if (!outcome.found)
    return failWith(error,
                    outcome.infeasible ? "no choice of recomputations fits"
                    : outcome.secondsLimitReached
                        ? "the solver found no solution within the time limit"
                        : "the solver failed");
  solution.provedOptimal = outcome.provedOptimal;
  solution.gap = outcome.provedOptimal ? 0
                 : outcome.objective > 1e-9
                     ? std::max(0.0, (outcome.objective - outcome.bound) /
                                         outcome.objective)
                     : -1;
  solution.recompute.assign(p.values.size(), false);
  for (size_t v = 0, k = 0; v < p.values.size(); ++v)
    if (p.values[v].candidate)
      solution.recompute[v] = chosen[k++] != 0;
  RematCost cost = evaluateRemat(p, solution.recompute);
  solution.recomputedFlops = cost.flops;
  solution.modelPeak = cost.peak();
  return true;
}

bool mnemo::greedyRemat(const RematProblem &p, RematSolution &solution) {
  auto started = std::chrono::steady_clock::now();
  std::vector<bool> recompute(p.values.size(), false);
  RematCost cost = evaluateRemat(p, recompute);
  for (;;) {
    int at = int(std::max_element(cost.bytes.begin(), cost.bytes.end()) -
                 cost.bytes.begin());
    if (cost.bytes[at] <= p.capacity)
      break;
    // Only candidates kept across the peak op can free bytes there.
    int best = -1;
    double bestScore = 0;
    RematCost bestCost;
    for (size_t x = 0; x < p.values.size(); ++x) {
      const RematValue &v = p.values[x];
      if (!v.candidate || recompute[x] || v.bytes == 0 ||
          at <= v.lastForwardUse || at >= v.firstBackwardUse)
        continue;
      recompute[x] = true;
      RematCost next = evaluateRemat(p, recompute);
      recompute[x] = false;
      int64_t freed = cost.bytes[at] - next.bytes[at];
      if (freed <= 0 || next.peak() > cost.peak())
        continue;
      double score = double(freed) / double(1 + next.flops - cost.flops);
      if (best < 0 || score > bestScore) {
        best = int(x);
        bestScore = score;
        bestCost = std::move(next);
      }
    }
    if (best < 0)
      return false;
    recompute[best] = true;
    cost = std::move(bestCost);
  }
  solution.recompute = recompute;
  solution.recomputedFlops = cost.flops;
  solution.modelPeak = cost.peak();
  solution.provedOptimal = false;
  solution.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  return true;
}
