// A self-contained HTML report: summary, verdict, an inline SVG stacked bar per
// rank row (device, and host when anything is offloaded) against the GPU's
// capacity over a byte axis, the full table, the simulated step when there is
// one, and the assumptions. No scripts, no external files.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <sstream>

#include "report_facts.h"
#include "tessera/planner/fp8.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner {
namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

constexpr double kLabelWidth = 260, kBarWidth = 600, kBarHeight = 22, kRowGap = 16, kAxisHeight = 30;
constexpr double kTotalLabelWidth = 80;  // "74.90 GiB" at 12 px, and a gap

// The byte axis under the bars: ticks 1, 2 or 5 × 10^k GiB apart (MiB below a GiB), at most 8.
void byte_axis(std::ostringstream& svg, double y, double scale, int64_t max_bytes) {
  const double gib = double(int64_t{1} << 30), mib = double(int64_t{1} << 20);
  const double unit = static_cast<double>(max_bytes) >= gib ? gib : mib;
  const double span = static_cast<double>(max_bytes) / unit;
  const double decade = std::pow(10.0, std::floor(std::log10(std::max(span, 1e-9))));
  double step = decade;
  for (double m : {0.1, 0.2, 0.5, 1.0, 2.0}) {
    if (span / (decade * m) <= 8) {
      step = decade * m;
      break;
    }
  }
  svg << "<line x1=\"" << number(kLabelWidth) << "\" x2=\"" << number(kLabelWidth + kBarWidth) << "\" y1=\"" << number(y) << "\" y2=\"" << number(y)
      << "\" stroke=\"#888\"/>\n";
  for (int i = 0; i * step <= span * (1 + 1e-9); ++i) {
    const double v = i * step, x = kLabelWidth + v * unit * scale;
    char tick[32];
    std::snprintf(tick, sizeof tick, "%g", v);
    svg << "<line x1=\"" << number(x) << "\" x2=\"" << number(x) << "\" y1=\"" << number(y) << "\" y2=\"" << number(y + 4) << "\" stroke=\"#888\"/>"
        << "<text x=\"" << number(x) << "\" y=\"" << number(y + 17) << "\" text-anchor=\"middle\" fill=\"#555\">" << tick
        << (unit == gib ? " GiB" : " MiB") << "</text>\n";
  }
}

// One stacked bar of the categories in `space`, starting at (x0, y).
void stacked_bar(std::ostringstream& svg, const RankMemory& row, MemorySpace space, double y, double height, double scale) {
  double x = kLabelWidth;
  for (MemoryCategory c : kAllMemoryCategories) {
    const int64_t bytes = space == MemorySpace::device ? row.bytes[c].device : row.bytes[c].host;
    if (bytes <= 0) continue;
    const double w = static_cast<double>(bytes) * scale;
    svg << "<rect x=\"" << number(x) << "\" y=\"" << number(y) << "\" width=\"" << number(std::max(w, 0.5)) << "\" height=\""
        << number(height) << "\" fill=\"" << category_color(c) << "\"><title>" << to_string(c) << " ("
        << (space == MemorySpace::device ? "device" : "host") << "): " << format_bytes(bytes) << " = " << bytes
        << " bytes</title></rect>\n";
    x += w;
  }
}

// Characters of UTF-8 text (its bytes that do not continue a character).
size_t utf8_length(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string render_svg(const MemoryEstimate& e) {
  int64_t scale_max = 1;
  for (const RankMemory& row : e.ranks) scale_max = std::max({scale_max, row.gpu_capacity, row.device_total, row.host_total});
  const double scale = kBarWidth / static_cast<double>(scale_max);
  const bool host = std::any_of(e.ranks.begin(), e.ranks.end(), [](const RankMemory& r) { return r.host_total > 0; });
  const double row_height = kBarHeight + (host ? kBarHeight * 0.6 + 4 : 0) + kRowGap;
  const double axis_y = 30 + row_height * static_cast<double>(e.ranks.size()) - kRowGap + 6;
  const double legend_y = axis_y + kAxisHeight;
  const double height = legend_y + 60;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << number(kLabelWidth + kBarWidth + 140) << "\" height=\"" << number(height)
      << "\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\" aria-label=\"memory per rank\">\n";
  double y = 30;
  for (const RankMemory& row : e.ranks) {
    // The label column holds about 38 characters of 12 px text: a longer layer
    // list (interleaved chunks) is cut with "…", whole in the hover title and the tables.
    const std::string label = rank_range(row) + " · stage " + std::to_string(row.first_stage) +
                        (row.last_stage != row.first_stage ? "-" + std::to_string(row.last_stage) : "");
    const std::string layers = layers_label(row);
    const std::string whole = layers.empty() ? label : label + " · " + layers;
    constexpr size_t kLabelChars = 38;
    const bool cut = utf8_length(whole) > kLabelChars;
    svg << "<text x=\"0\" y=\"" << number(y + 15) << "\">" << (cut ? "<title>" + escape(whole) + "</title>" : "")
        << escape(cut ? label + " · layers …" : whole) << "</text>\n";
    stacked_bar(svg, row, MemorySpace::device, y, kBarHeight, scale);
    // The total right of the bar, or right of the capacity line where the bar ends near it (the two never overlap).
    const double cap_x = kLabelWidth + static_cast<double>(row.gpu_capacity) * scale;
    const double bar_end = kLabelWidth + static_cast<double>(row.device_total) * scale;
    const double total_x = bar_end < cap_x - kTotalLabelWidth ? bar_end + 6 : std::max(bar_end, cap_x) + 6;
    svg << "<text x=\"" << number(total_x) << "\" y=\"" << number(y + 15) << "\">" << format_bytes(row.device_total) << "</text>\n";
    svg << "<line x1=\"" << number(cap_x) << "\" x2=\"" << number(cap_x) << "\" y1=\"" << number(y - 4) << "\" y2=\"" << number(y + kBarHeight + 4)
        << "\" stroke=\"#C00000\" stroke-width=\"2\" stroke-dasharray=\"4 2\"><title>GPU capacity " << format_bytes(row.gpu_capacity)
        << "</title></line>\n";
    if (host) {
      const double hy = y + kBarHeight + 4;
      svg << "<text x=\"" << number(kLabelWidth - 40) << "\" y=\"" << number(hy + 10) << "\" fill=\"#555\">host</text>\n";
      stacked_bar(svg, row, MemorySpace::host, hy, kBarHeight * 0.6, scale);
      if (row.host_total > 0) {
        svg << "<text x=\"" << number(kLabelWidth + static_cast<double>(row.host_total) * scale + 6) << "\" y=\"" << number(hy + 10)
            << "\" fill=\"#555\">" << format_bytes(row.host_total) << " host</text>\n";
      }
    }
    y += row_height;
  }
  if (!e.ranks.empty()) {
    const double cap_x = kLabelWidth + static_cast<double>(e.ranks.front().gpu_capacity) * scale;
    svg << "<text x=\"" << number(cap_x) << "\" y=\"16\" text-anchor=\"middle\" fill=\"#C00000\">GPU capacity "
        << format_bytes(e.ranks.front().gpu_capacity) << "</text>\n";
  }
  byte_axis(svg, axis_y, scale, scale_max);
  double lx = 0;
  double ly = legend_y;
  for (MemoryCategory c : kAllMemoryCategories) {
    svg << "<rect x=\"" << number(lx) << "\" y=\"" << number(ly) << "\" width=\"12\" height=\"12\" fill=\"" << category_color(c) << "\"/>"
        << "<text x=\"" << number(lx + 16) << "\" y=\"" << number(ly + 10) << "\">" << to_string(c) << "</text>\n";
    lx += 150;
    if (lx > kLabelWidth + kBarWidth - 50) {
      lx = 0;
      ly += 20;
    }
  }
  svg << "</svg>\n";
  return svg.str();
}

void render_table(std::ostringstream& html, const MemoryEstimate& e) {
  html << "<table>\n<tr><th>category</th>";
  for (const RankMemory& row : e.ranks) html << "<th>" << escape(row_label(row)) << "</th>";
  html << "</tr>\n";
  auto both = [](int64_t device, int64_t host) {
    std::string text = device == 0 ? "-" : format_bytes(device);
    if (host > 0) text += " <span class=\"host\">+ " + format_bytes(host) + " host</span>";
    return text;
  };
  for (MemoryCategory c : kAllMemoryCategories) {
    html << "<tr><td><span class=\"swatch\" style=\"background:" << category_color(c) << "\"></span>" << to_string(c) << "</td>";
    for (const RankMemory& row : e.ranks) html << "<td>" << both(row.bytes[c].device, row.bytes[c].host) << "</td>";
    html << "</tr>\n";
  }
  html << "<tr class=\"total\"><td>total</td>";
  for (const RankMemory& row : e.ranks) html << "<td>" << both(row.device_total, row.host_total) << "</td>";
  html << "</tr>\n<tr><td>GPU capacity</td>";
  for (const RankMemory& row : e.ranks) html << "<td>" << format_bytes(row.gpu_capacity) << "</td>";
  html << "</tr>\n<tr><td>margin</td>";
  for (const RankMemory& row : e.ranks) {
    html << "<td class=\"" << (row.fits() ? "ok" : "bad") << "\">" << (row.margin >= 0 ? "+" : "") << format_bytes(row.margin) << "</td>";
  }
  html << "</tr>\n</table>\n";
}

// The simulated step: its time, tokens/s and MFU, and what the time is made of;
// under FP8, how to read them (fp8.h).
void render_step(std::ostringstream& html, const StepSimulation& sim, Precision precision) {
  const StepBreakdown& b = sim.breakdown;
  html << "<h2>Step</h2>\n<p>step time " << format_seconds(sim.step_time_s) << " · " << format_number(std::round(sim.tokens_per_s))
       << " tokens/s · MFU " << number(100 * sim.mfu) << "%" << mfu_basis(precision) << "</p>\n";
  if (is_fp8(precision)) html << "<p>" << escape(kFp8ThroughputCaveat) << "</p>\n";
  html << "<table>\n<tr><th>part of the step</th><th>time</th></tr>\n";
  const std::pair<const char*, double> parts[] = {{"forward", b.forward_s},        {"backward", b.backward_s},
                                                  {"recompute", b.recompute_s},    {"exposed communication", b.communication_s},
                                                  {"pipeline bubble", b.bubble_s}, {"offload", b.offload_s},
                                                  {"optimizer", b.optimizer_s}};
  for (const auto& [name, seconds] : parts) html << "<tr><td>" << name << "</td><td>" << format_seconds(seconds) << "</td></tr>\n";
  html << "</table>\n";
}

}  // namespace

std::string render_html_report(const EstimateReport& r) {
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Tessera estimate: "
       << escape(r.model.config.name) << "</title>\n<style>\n"
       << "body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}"
       << "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}"
       << "td:first-child,th:first-child{text-align:left}td:first-child{white-space:nowrap}.total td{font-weight:bold}.ok{color:#0a6b2c}.bad{color:#b00020;font-weight:bold}"
       << ".host{color:#666}.swatch{display:inline-block;width:10px;height:10px;margin-right:6px}"
       << ".verdict{font-size:1.2em;padding:.5em;border-left:6px solid}.fits{border-color:#0a6b2c}.oom{border-color:#b00020}\n"
       << "</style>\n</head>\n<body>\n<h1>Tessera memory estimate</h1>\n<p>" << escape(summary_line(r)) << "</p>\n"
       << "<p class=\"verdict " << (r.estimate.fits() ? "fits" : "oom") << "\">" << escape(verdict_line(r.estimate)) << "</p>\n"
       << "<h2>Memory per rank</h2>\n" << render_svg(r.estimate) << "<h2>Breakdown</h2>\n";
  render_table(html, r.estimate);
  if (r.simulation) render_step(html, *r.simulation, r.request.training.precision);
  html << "<h2>Assumptions</h2>\n<ul>\n";
  for (const AssumptionLine& a : assumption_lines(r)) {
    html << "<li><b>" << escape(a.name) << "</b>: " << escape(a.value) << " <i>(" << escape(a.source) << ")</i></li>\n";
  }
  html << "</ul>\n</body>\n</html>\n";
  return html.str();
}

}  // namespace tessera::planner
