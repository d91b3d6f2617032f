//===- MemoryTimeline.cpp - A picture of the arena over one step ----------===//

#include "passes/MemoryTimeline.h"
#include "lang/PlanAttributes.h"
#include "passes/BufferAnalysis.h"
#include "passes/MemoryReport.h"
#include "passes/SourcePlace.h"

#include "llvm/Support/Format.h"

using namespace mlir;
using namespace mnemo;

namespace {
const char *colourOf(BufferKind kind) {
  switch (kind) {
  case BufferKind::Activation:
    return "#4e79a7"; // blue: kept from the forward for the backward
  case BufferKind::Gradient:
    return "#f28e2b"; // orange: parameter gradients
  case BufferKind::Temporary:
    return "#9c9c9c"; // grey: everything else
  }
  return "#000";
}

std::string escape(llvm::StringRef text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string describe(Value root) {
  Operation *def = root.getDefiningOp();
  std::string text;
  llvm::raw_string_ostream os(text);
  os << def->getName().getStringRef() << " " << root.getType();
  // The layer and the model-file position, as MLIRGen recorded them.
  SourcePlace place = sourcePlaceOf(def->getLoc());
  if (!place.layer.empty())
    os << " in " << place.layer;
  if (!place.file.empty())
    os << " at " << place.file << ":" << place.line << ":" << place.column;
  return os.str();
}
} // namespace

LogicalResult mnemo::writeMemoryTimeline(func::FuncOp func, StringRef title,
                                         llvm::raw_ostream &os) {
  FailureOr<MemoryReport> report = buildMemoryReport(func);
  if (failed(report))
    return failure();
  FailureOr<BufferAnalysis> analysis = BufferAnalysis::analyze(func);
  if (failed(analysis))
    return failure();
  // Offsets as the plan wrote them on each buffer's first value.
  std::vector<int64_t> offsets;
  for (const ArenaBuffer &b : analysis->buffers) {
    auto result = llvm::cast<OpResult>(b.root);
    offsets.push_back(
        plan::arenaOffset(result.getOwner(), result.getResultNumber()));
  }

  const double left = 90, top = 60, plotWidth = 1100, plotHeight = 520;
  double steps = double(std::max<int64_t>(1, report->steps));
  // The persistent regions at the bottom, the arena above them.
  double base = double(report->parameterBytes + report->gradientRegionBytes +
                       report->optimizerStateBytes);
  double bytes = std::max(1.0, base + double(report->arenaBytes));
  auto x = [&](double step) { return left + plotWidth * step / (steps + 1); };
  auto y = [&](double offset) {
    return top + plotHeight * (1.0 - offset / bytes);
  };

  os << llvm::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                     "height=\"%.0f\" "
                     "font-family=\"sans-serif\" font-size=\"12\">\n",
                     left + plotWidth + 40, top + plotHeight + 70);
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << llvm::format(
            "<text x=\"%.0f\" y=\"24\" font-size=\"16\" font-weight=\"bold\">",
            left)
     << escape(title) << "</text>\n";
  os << llvm::format("<text x=\"%.0f\" y=\"44\">arena ", left)
     << escape(formatBytes(report->arenaBytes)) << ", lower bound "
     << escape(formatBytes(report->lowerBoundBytes)) << ", without reuse "
     << escape(formatBytes(report->naiveBytes)) << " ("
     << escape(report->planner) << ")"
     << (report->gradientRegionBytes
             ? "; gradients in their own region, " +
                   escape(formatBytes(report->gradientRegionBytes))
             : std::string())
     << "; hover over a box for its tensor</text>\n";
  // Axes with a few ticks.
  os << llvm::format("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                     "height=\"%.1f\" fill=\"#fafafa\" "
                     "stroke=\"#444\"/>\n",
                     left, top, plotWidth, plotHeight);
  for (int i = 0; i <= 4; ++i) {
    double offset = bytes * i / 4;
    os << llvm::format(
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", left - 6,
        y(offset) + 4, escape(formatBytes(int64_t(offset))).c_str());
  }
  for (int i = 0; i <= 10; ++i) {
    double step = steps * i / 10;
    os << llvm::format(
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n",
        x(step), top + plotHeight + 18, step);
  }
  os << llvm::format(
      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">op index in the "
      "schedule</text>\n",
      left + plotWidth / 2, top + plotHeight + 40);
  // The persistent regions, live the whole step.
  const struct {
    const char *name;
    int64_t size;
    const char *colour;
  } regions[] = {{"parameters", report->parameterBytes, "#59a14f"},
                 {"gradients", report->gradientRegionBytes, "#f28e2b"},
                 {"optimizer state", report->optimizerStateBytes, "#b07aa1"}};
  double regionStart = 0;
  for (const auto &region : regions) {
    if (region.size == 0)
      continue;
    double y0 = y(regionStart + double(region.size)), y1 = y(regionStart);
    os << llvm::format(
              "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
              "fill=\"%s\" fill-opacity=\"0.55\" stroke=\"white\" "
              "stroke-width=\"0.5\"><title>",
              left, y0, plotWidth, std::max(0.5, y1 - y0), region.colour)
       << region.name << ": " << escape(formatBytes(region.size))
       << ", persistent</title></rect>\n";
    if (y1 - y0 > 12)
      os << llvm::format("<text x=\"%.1f\" y=\"%.1f\">%s, %s</text>\n",
                         left + 6, (y0 + y1) / 2 + 4, region.name,
                         escape(formatBytes(region.size)).c_str());
    regionStart += double(region.size);
  }
  if (base > 0)
    os << llvm::format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                       "stroke=\"#444\" stroke-width=\"0.8\"/>\n",
                       left, y(base), left + plotWidth, y(base));
  // One box per arena buffer.
  for (size_t i = 0; i < analysis->buffers.size(); ++i) {
    const ArenaBuffer &b = analysis->buffers[i];
    if (offsets[i] < 0)
      continue; // in the persistent gradient region, not the arena
    double x0 = x(double(b.interval.start)), x1 = x(double(b.interval.end + 1));
    double y0 = y(base + double(offsets[i] + b.interval.size)),
           y1 = y(base + double(offsets[i]));
    os << llvm::format(
        "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
        "fill=\"%s\" "
        "fill-opacity=\"0.75\" stroke=\"white\" stroke-width=\"0.3\">",
        x0, y0, std::max(0.5, x1 - x0), std::max(0.5, y1 - y0),
        colourOf(b.kind));
    os << "<title>" << escape(describe(b.root)) << "\n"
       << escape(formatBytes(b.interval.size)) << " at offset " << offsets[i]
       << ", " << spell(b.kind) << ", live from op " << b.interval.start
       << " to op " << b.interval.end << "</title></rect>\n";
  }
  // The peak.
  double peakX = x(double(report->peakStep) + 0.5);
  os << llvm::format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                     "stroke=\"#e15759\" "
                     "stroke-width=\"1.5\" stroke-dasharray=\"4 3\"/>\n",
                     peakX, top, peakX, top + plotHeight);
  os << llvm::format("<text x=\"%.1f\" y=\"%.1f\" fill=\"#e15759\" "
                     "text-anchor=\"middle\">peak "
                     "(op %lld)</text>\n",
                     peakX, top - 4, (long long)report->peakStep);
  // Legend.
  const struct {
    const char *colour;
    const char *text;
    double x;
  } legend[] = {{colourOf(BufferKind::Activation),
                 "activations (kept for the backward)", 0},
                {colourOf(BufferKind::Gradient), "gradients", 255},
                {colourOf(BufferKind::Temporary), "temporaries", 350},
                {"#59a14f", "parameters", 460},
                {"#b07aa1", "optimizer state", 565}};
  double legendX = left + plotWidth - 690, legendY = top + plotHeight + 48;
  for (const auto &item : legend)
    os << llvm::format("<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" "
                       "fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                       legendX + item.x, legendY, item.colour,
                       legendX + item.x + 16, legendY + 10, item.text);
  os << "</svg>\n";
  return success();
}
