//===- RematStudies.cpp - mnemoc --remat-curve and --fit-batch ------------===//

#include "RematStudies.h"

#include "frontend/Diagnostics.h"
#include "passes/MemoryReport.h"
#include "runtime/Failure.h"
#include "tools/driver/ModelDriver.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/SourceMgr.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

using namespace mnemo;

namespace {

/// One compilation's @train_step: its planned peak and recomputed FLOPs.
struct Point {
  int64_t peak = 0;
  double extraFlops = 0; // percent of the step without recomputation
  bool byMilp = false;   // --remat=optimal's MILP chose (not auto's search)
};

/// Compiles the model (with `batch` when nonzero) through the pipeline;
/// nullopt when it fails (a budget nothing meets), quietly.
std::optional<Point> compile(const Program &program, ElaborateOptions options,
                             const PipelineOptions &pipeline, int64_t batch) {
  if (batch > 0) {
    options.overrides.erase(
        std::remove_if(options.overrides.begin(), options.overrides.end(),
                       [](const auto &o) { return o.first == "batch"; }),
        options.overrides.end());
    options.overrides.emplace_back("batch", std::to_string(batch));
  }
  llvm::SourceMgr sourceMgr;
  Diagnostics diags(sourceMgr, llvm::nulls());
  std::optional<Graph> graph = elaborate(program, options, diags);
  if (!graph || diags.hadError())
    return std::nullopt;
  mlir::MLIRContext context;
  context.disableMultithreading();
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  LoweredModel lowered = lowerModel(context, *graph, pipeline);
  if (!lowered.planned())
    return std::nullopt;
  auto train = lowered.module->lookupSymbol<mlir::func::FuncOp>("train_step");
  if (!train)
    return std::nullopt;
  mlir::FailureOr<MemoryReport> report = buildMemoryReport(train);
  if (failed(report))
    return std::nullopt;
  Point p;
  p.peak = report->peakBytes;
  p.byMilp = llvm::StringRef(report->rematSolver).starts_with("CBC");
  if (report->stepFlops > report->recomputedFlops)
    p.extraFlops = 100.0 * double(report->recomputedFlops) /
                   double(report->stepFlops - report->recomputedFlops);
  return p;
}

PipelineOptions with(PipelineOptions p, const std::string &strategy,
                     int64_t budget) {
  p.remat = strategy;
  p.memoryBudget = budget;
  return p;
}

double mib(int64_t bytes) { return double(bytes) / double(1 << 20); }

/// One line on stderr per compilation of a study, so that a long one shows
/// where it is: the strategy, the batch, whether it fit, the time so far.
class Progress {
public:
  explicit Progress(const char *study) : study(study) {}
  void report(const char *strategy, const std::string &what,
              const std::optional<Point> &p) {
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    ++compiles;
    llvm::errs() << llvm::formatv(
        "{0}: {1,-7} {2}: {3}  [{4} compiles, {5:f1} s]\n", study, strategy,
        what,
        p ? llvm::formatv("planned {0:f2} MiB", mib(p->peak)).str()
          : std::string("does not fit"),
        compiles, seconds);
  }

private:
  const char *study;
  int compiles = 0;
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
};

} // namespace

bool mnemo::writeRematCurve(const Program &program,
                            const ElaborateOptions &options,
                            const PipelineOptions &pipeline,
                            const std::string &path, std::string &error) {
  Progress progress("remat-curve");
  auto planned = [&](const char *strategy, int64_t budget) {
    std::optional<Point> p =
        compile(program, options, with(pipeline, strategy, budget), 0);
    progress.report(strategy,
                    budget
                        ? llvm::formatv("budget {0:f2} MiB", mib(budget)).str()
                        : std::string("no budget"),
                    p);
    return p;
  };
  std::optional<Point> none = planned("none", 0);
  if (!none)
    return failWith(error,
                    "the model does not compile (it needs a train section)");
  std::optional<Point> all = planned("all", 0);
  std::optional<Point> sqrt = planned("sqrt", 0);
  // A strategy at a budget every `stepPercent` of the plan from 96%, down to
  // where nothing fits; `keep` drops points that do not belong to the strategy.
  auto sweep = [&](const char *strategy, int stepPercent,
                   auto keep) -> std::vector<Point> {
    std::vector<Point> points{*none};
    for (int share = 96; share > 0; share -= stepPercent) {
      int64_t budget = none->peak * share / 100;
      std::optional<Point> p = planned(strategy, budget);
      if (!p)
        break;
      if (keep(*p))
        points.push_back(*p);
    }
    return points;
  };
  std::vector<Point> autoPoints =
      sweep("auto", 4, [](const Point &) { return true; });
  // optimal: fewer budgets (each is a MILP under the time limit); a budget
  // where the MILP's choice missed and auto's search decided is left out.
  std::vector<Point> optimalPoints =
      sweep("optimal", 12, [](const Point &p) { return p.byMilp; });

  double maxX = mib(none->peak) * 1.05, maxY = 5;
  for (const std::vector<Point> *points : {&autoPoints, &optimalPoints})
    for (const Point &p : *points)
      maxY = std::max(maxY, p.extraFlops);
  for (const std::optional<Point> &p : {all, sqrt})
    if (p)
      maxY = std::max(maxY, p->extraFlops);
  maxY = std::ceil(maxY / 5) * 5 + 5;
  const double width = 640, height = 420, left = 70, right = 20, top = 40,
               bottom = 60;
  auto x = [&](int64_t bytes) {
    return left + (width - left - right) * mib(bytes) / maxX;
  };
  auto y = [&](double flops) {
    return height - bottom - (height - top - bottom) * flops / maxY;
  };
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return failWith(error, "cannot write '" + path + "': " + ec.message());
  os << llvm::formatv("<svg xmlns=\"http://www.w3.org/2000/svg\" "
                      "width=\"{0}\" height=\"{1}\" font-family=\"sans-serif\" "
                      "font-size=\"12\">\n",
                      width, height);
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << llvm::formatv("<text x=\"{0}\" y=\"22\" font-size=\"14\">Recomputed "
                      "FLOPs against the planned peak of one training "
                      "step</text>\n",
                      left);
  // Axes and ticks.
  os << llvm::formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" "
                      "stroke=\"black\"/>\n",
                      left, height - bottom, width - right);
  os << llvm::formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" "
                      "stroke=\"black\"/>\n",
                      left, height - bottom, top);
  for (int i = 0; i <= 5; ++i) {
    double mibTick = maxX * i / 5, flopTick = maxY * i / 5;
    double tx = left + (width - left - right) * i / 5;
    double ty = height - bottom - (height - top - bottom) * i / 5;
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\">"
                        "{2:f1}</text>\n",
                        tx, height - bottom + 18, mibTick);
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\">"
                        "{2:f0}%</text>\n",
                        left - 6, ty + 4, flopTick);
  }
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\">"
                      "planned peak (MiB)</text>\n",
                      (left + width - right) / 2, height - 20);
  os << llvm::formatv("<text x=\"16\" y=\"{0}\" transform=\"rotate(-90 16 "
                      "{0})\" text-anchor=\"middle\">extra FLOPs</text>\n",
                      (top + height - bottom) / 2);
  // auto's front and optimal's (dashed): lines through their points.
  auto series = [&](const std::vector<Point> &points, const char *color,
                    const char *dash) {
    std::string line;
    for (const Point &p : points)
      line += llvm::formatv("{0:f1},{1:f1} ", x(p.peak), y(p.extraFlops)).str();
    os << "<polyline fill=\"none\" stroke=\"" << color
       << "\" stroke-width=\"2\" " << dash << "points=\"" << line << "\"/>\n";
    for (const Point &p : points)
      os << llvm::formatv("<circle cx=\"{0:f1}\" cy=\"{1:f1}\" r=\"3\" "
                          "fill=\"{2}\"/>\n",
                          x(p.peak), y(p.extraFlops), color);
  };
  series(autoPoints, "#1f77b4", "");
  series(optimalPoints, "#ff7f0e", "stroke-dasharray=\"6 4\" ");
  auto marker = [&](const std::optional<Point> &p, const char *label,
                    const char *color) {
    if (!p)
      return;
    os << llvm::formatv("<rect x=\"{0:f1}\" y=\"{1:f1}\" width=\"8\" "
                        "height=\"8\" fill=\"{2}\"/>\n",
                        x(p->peak) - 4, y(p->extraFlops) - 4, color);
    // Labels near the right edge go to the marker's left.
    bool leftOf = x(p->peak) > width - 200;
    os << llvm::formatv("<text x=\"{0:f1}\" y=\"{1:f1}\" fill=\"{2}\" "
                        "text-anchor=\"{6}\">{3} ({4:f1} MiB, +{5:f1}%)"
                        "</text>\n",
                        x(p->peak) + (leftOf ? -8 : 8), y(p->extraFlops) - 6,
                        color, label, mib(p->peak), p->extraFlops,
                        leftOf ? "end" : "start");
  };
  marker(none, "none", "black");
  marker(all, "all", "#d62728");
  marker(sqrt, "sqrt", "#2ca02c");
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" fill=\"#1f77b4\">auto (a "
                      "budget every 4% of the plan)</text>\n",
                      left + 10, top + 14);
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" fill=\"#ff7f0e\">optimal "
                      "(CBC MILP, a budget every 12%)</text>\n",
                      left + 10, top + 30);
  os << "</svg>\n";
  return true;
}

bool mnemo::fitBatch(const Program &program, const ElaborateOptions &options,
                     const PipelineOptions &pipeline, int64_t budget,
                     llvm::raw_ostream &os, std::string &error) {
  Progress progress("fit-batch");
  auto planned = [&](const char *strategy, int64_t limit, int64_t batch) {
    std::optional<Point> p =
        compile(program, options, with(pipeline, strategy, limit), batch);
    progress.report(strategy, "batch " + std::to_string(batch), p);
    return p;
  };
  std::optional<Point> first = planned("none", 0, 1);
  if (!first)
    return failWith(
        error, "the model does not compile with batch = 1 (it needs a 'batch' "
               "hyper-parameter and a train section)");
  os << llvm::formatv("largest batch whose planned step fits {0:f2} MiB:\n",
                      mib(budget));
  // A batch that auto's search is known to fit: it tries the plan without
  // recomputation and the fixed policies' sets, so it fits what none, all
  // and sqrt fit; optimal falls back to auto's search, so it fits what
  // auto fits. Their searches start there.
  int64_t known = 0;
  for (const char *strategy : {"none", "all", "sqrt", "auto", "optimal"}) {
    llvm::StringRef name = strategy;
    bool fixed = name != "auto" && name != "optimal";
    // The plan of `batch` and whether it fits. none, all and sqrt plan the
    // same step whatever the budget: compiled without one, their peaks
    // also say how the plan grows with the batch.
    struct Trial {
      std::optional<Point> plan;
      bool fits = false;
    };
    auto trial = [&](int64_t batch) {
      Trial t;
      if (fixed) {
        t.plan = name == "none" && batch == 1 ? first
                                              : planned(strategy, 0, batch);
        t.fits = t.plan && t.plan->peak <= budget;
      } else {
        t.plan = planned(strategy, budget, batch);
        t.fits = t.plan.has_value();
      }
      return t;
    };
    // lo fits, hi (0: not known yet) does not. A fixed policy's next try
    // is where the line through its last two plans meets the budget (plans
    // grow about linearly with the batch), or lo + 1 when the line says lo;
    // a search's is lo + 1, then steps that double, until a batch does not
    // fit. Then the bracket is bisected.
    int64_t lo = 0, hi = 0, step = 1;
    std::optional<Point> atLo;
    std::vector<std::pair<int64_t, int64_t>> line; // (batch, peak), fixed
    if (!fixed && known > 0)
      if (std::optional<Point> p = planned(strategy, budget, known)) {
        lo = known;
        atLo = p;
      }
    // Where a search misses the known batch (it should not), it starts
    // from batch 1 like the fixed policies, rather than report none.
    if (lo == 0) {
      Trial one = trial(1);
      if (!one.fits) {
        os << llvm::formatv("  {0,-7}  none fits (batch 1 does not)\n",
                            strategy);
        continue;
      }
      lo = 1;
      atLo = one.plan;
      line.push_back({1, one.plan->peak});
    }
    while ((hi == 0 || hi - lo > 1) && lo < (int64_t(1) << 20)) {
      int64_t next = 0;
      if (fixed && line.size() >= 2) {
        auto [b1, p1] = line[line.size() - 2];
        auto [b2, p2] = line.back();
        double slope = double(p2 - p1) / double(b2 - b1);
        if (slope > 0)
          next = b2 + int64_t(std::floor(double(budget - p2) / slope));
        if (next <= lo && hi == 0)
          next = lo + 1;
      }
      if (next <= lo || (hi != 0 && next >= hi)) {
        if (hi != 0) {
          next = (lo + hi) / 2;
        } else if (fixed) {
          next = lo * 2;
        } else {
          next = lo + step;
          step *= 2;
        }
      }
      Trial t = trial(next);
      if (fixed && t.plan)
        line.push_back({next, t.plan->peak});
      if (t.fits) {
        lo = next;
        atLo = t.plan;
      } else {
        hi = next;
      }
    }
    if (name != "optimal")
      known = std::max(known, lo);
    os << llvm::formatv("  {0,-7}  batch {1,6}  peak {2,8:f2} MiB  +{3:f1}% "
                        "FLOPs\n",
                        strategy, lo, mib(atLo->peak), atLo->extraFlops);
  }
  return true;
}
