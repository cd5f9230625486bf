// Renders an estimate for people and tools: a terminal table, JSON (schema 1),
// CSV, Markdown, and a self-contained HTML page with an inline SVG bar per rank.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tessera/planner/enum_names.h"
#include "tessera/planner/hardware.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/model.h"
#include "tessera/planner/simulate.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

enum class ReportFormat { table, json, csv, md, html };
inline constexpr std::array<EnumName<ReportFormat>, 5> kReportFormatNames{{{ReportFormat::table, "table"}, {ReportFormat::json, "json"}, {ReportFormat::csv, "csv"}, {ReportFormat::md, "md"}, {ReportFormat::html, "html"}}};
inline std::span<const EnumName<ReportFormat>> enum_names(ReportFormat) { return kReportFormatNames; }

// Everything a report shows; references, so that rendering copies nothing.
struct EstimateReport {
  const Model& model;
  const GpuProfile& gpu;
  const EstimateRequest& request;
  const MemoryEstimate& estimate;
  // The step as simulated on a cluster, where there is one (the GUI's reports):
  // the HTML report adds the step time, its parts and tokens/s. None from `tessera estimate`.
  const StepSimulation* simulation = nullptr;
};

// The JSON document (`"schema": 1`), also the source of the other formats' facts.
nlohmann::json estimate_to_json(const EstimateReport& report);

std::string render_estimate(const EstimateReport& report, ReportFormat format);

// What an estimate assumes (activation profile, runtime buffers, headroom, Gemini's
// chunks, ...), each with its value and where it comes from; every report lists them.
struct AssumptionLine {
  std::string name;
  std::string value;
  std::string source;
};
std::vector<AssumptionLine> assumption_lines(const EstimateReport& report);

// "FITS: ..." or "DOES NOT FIT: ...", naming the tightest rank and its largest category.
std::string verdict_line(const MemoryEstimate& estimate);

// "1.50 GiB", "676.8 MiB", "512 B": binary units, three significant digits or more.
std::string format_bytes(int64_t bytes);
// "12.5 µs", "4.30 ms", "453 ms", "14.86 s": three significant digits or more.
std::string format_seconds(double seconds);
// 354823168 -> "354.8M"
std::string format_count(int64_t count);

// "ranks 0-7 · stage 0 · layers 0-23 · embedding"
std::string row_label(const RankMemory& row);
// "ranks 0-7"
std::string rank_range(const RankMemory& row);
// "layers 0-19", or one range per model chunk under interleaving ("layers 0-4, 20-24"); "" when none
std::string layers_label(const RankMemory& row);

}  // namespace tessera::planner
