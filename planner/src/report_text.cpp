// Terminal table, CSV and Markdown renderings of an estimate.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "report_facts.h"

namespace tessera::planner {
namespace {

bool any_host_bytes(const MemoryEstimate& e) {
  return std::any_of(e.ranks.begin(), e.ranks.end(), [](const RankMemory& r) { return r.host_total > 0; });
}

std::string cell(int64_t bytes) { return bytes == 0 ? "-" : format_bytes(bytes); }

std::string pad(const std::string& text, size_t width) {
  // Width in characters, not bytes: "·" and "×" are two bytes in UTF-8.
  size_t shown = 0;
  for (unsigned char ch : text) shown += (ch & 0xC0) != 0x80;
  return shown >= width ? text + " " : text + std::string(width - shown, ' ');
}

// Categories down, rank rows across, at most four rank rows per block.
std::string render_table(const EstimateReport& r) {
  std::ostringstream out;
  out << "Tessera memory estimate\n" << summary_line(r) << "\n";
  const bool host = any_host_bytes(r.estimate);
  const auto& rows = r.estimate.ranks;
  for (size_t begin = 0; begin < rows.size(); begin += 4) {
    const size_t end = std::min(rows.size(), begin + 4);
    out << "\n";
    for (size_t i = begin; i < end; ++i) out << "  [" << (i + 1) << "] " << row_label(rows[i]) << "\n";
    out << pad("category", 18);
    for (size_t i = begin; i < end; ++i) out << pad("[" + std::to_string(i + 1) + "] device", 14) << (host ? pad("host", 12) : "");
    out << "\n";
    for (MemoryCategory c : kAllMemoryCategories) {
      out << pad(std::string(to_string(c)), 18);
      for (size_t i = begin; i < end; ++i) out << pad(cell(rows[i].bytes[c].device), 14) << (host ? pad(cell(rows[i].bytes[c].host), 12) : "");
      out << "\n";
    }
    out << pad("total", 18);
    for (size_t i = begin; i < end; ++i) out << pad(format_bytes(rows[i].device_total), 14) << (host ? pad(cell(rows[i].host_total), 12) : "");
    out << "\n" << pad("GPU capacity", 18);
    for (size_t i = begin; i < end; ++i) out << pad(format_bytes(rows[i].gpu_capacity), 14) << (host ? pad("", 12) : "");
    out << "\n" << pad("margin", 18);
    for (size_t i = begin; i < end; ++i) {
      out << pad((rows[i].margin >= 0 ? "+" : "") + format_bytes(rows[i].margin) + (rows[i].fits() ? "" : " !"), 14) << (host ? pad("", 12) : "");
    }
    out << "\n";
  }
  out << "\nAssumptions:\n";
  for (const AssumptionLine& a : assumption_lines(r)) out << "  " << pad(a.name + ":", 20) << a.value << "  [" << a.source << "]\n";
  out << "\n" << verdict_line(r.estimate) << "\n";
  return out.str();
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char ch : text) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

// Long format: one line per rank row and category, for spreadsheets and pandas.
std::string render_csv(const EstimateReport& r) {
  std::ostringstream out;
  out << "first_rank,last_rank,first_stage,last_stage,category,device_bytes,host_bytes,gpu_capacity_bytes,fits\n";
  for (const RankMemory& row : r.estimate.ranks) {
    auto line = [&](const std::string& name, int64_t device, int64_t host) {
      out << row.first_rank << ',' << row.last_rank << ',' << row.first_stage << ',' << row.last_stage << ','
          << csv_field(name) << ',' << device << ',' << host << ',' << row.gpu_capacity << ',' << (row.fits() ? "true" : "false") << "\n";
    };
    for (MemoryCategory c : kAllMemoryCategories) line(std::string(to_string(c)), row.bytes[c].device, row.bytes[c].host);
    line("total", row.device_total, row.host_total);
  }
  return out.str();
}

std::string render_markdown(const EstimateReport& r) {
  std::ostringstream out;
  out << "# Tessera memory estimate\n\n" << summary_line(r) << "\n\n**" << verdict_line(r.estimate) << "**\n\n";
  const auto& rows = r.estimate.ranks;
  out << "| category |";
  for (const RankMemory& row : rows) out << ' ' << row_label(row) << " |";
  out << "\n|---|";
  for (size_t i = 0; i < rows.size(); ++i) out << "---:|";
  out << "\n";
  auto both = [](int64_t device, int64_t host) { return host > 0 ? cell(device) + " (+" + format_bytes(host) + " host)" : cell(device); };
  for (MemoryCategory c : kAllMemoryCategories) {
    out << "| " << to_string(c) << " |";
    for (const RankMemory& row : rows) out << ' ' << both(row.bytes[c].device, row.bytes[c].host) << " |";
    out << "\n";
  }
  out << "| **total** |";
  for (const RankMemory& row : rows) out << " **" << both(row.device_total, row.host_total) << "** |";
  out << "\n| GPU capacity |";
  for (const RankMemory& row : rows) out << ' ' << format_bytes(row.gpu_capacity) << " |";
  out << "\n| margin |";
  for (const RankMemory& row : rows) out << ' ' << (row.margin >= 0 ? "+" : "") << format_bytes(row.margin) << " |";
  out << "\n\n## Assumptions\n\n";
  for (const AssumptionLine& a : assumption_lines(r)) out << "- **" << a.name << "**: " << a.value << " — " << a.source << "\n";
  return out.str();
}

}  // namespace

std::string render_html_report(const EstimateReport& r);  // report_html.cpp

std::string render_estimate(const EstimateReport& report, ReportFormat format) {
  switch (format) {
    case ReportFormat::table: return render_table(report);
    case ReportFormat::json: return estimate_to_json(report).dump(2) + "\n";
    case ReportFormat::csv: return render_csv(report);
    case ReportFormat::md: return render_markdown(report);
    case ReportFormat::html: return render_html_report(report);
  }
  return {};
}

}  // namespace tessera::planner
