// Exports: a view as a picture (SVG or PNG) and the planner's own reports
// (plan.json of the ranked plans; CSV, Markdown or HTML of the shown plan's
// estimate; the shown plan as a ColossalAI script, a DeepSpeed config or a
// Perfetto trace, a Megatron-LM launch or a torchtitan job config, by `tessera
// export`'s own functions). The format follows the
// file's name; the PDF report is pdf_report.h's.
#pragma once

#include <optional>

#include <QString>

#include "planner_session.h"

class QWidget;

namespace tessera::gui {

enum class ExportFormat { pdf, svg, png, json, csv, md, html, colossalai, deepspeed, megatron, perfetto, torchtitan };

// By the name's ending: .trace.json (Perfetto), ds_config.json (DeepSpeed), .py
// (ColossalAI), .sh (Megatron-LM), .toml (torchtitan), else the suffix (.pdf, .svg,
// .png, .json, .csv, .md, .html); none for anything else.
std::optional<ExportFormat> export_format_of(const QString& path);
// "PDF (*.pdf);;SVG (*.svg);;..." for a file dialog.
QString export_file_filter();
// `path` with the suffix of the dialog's chosen `filter` ("HTML, the shown plan (*.html)")
// where the typed name has no export suffix of its own ("report" -> "report.html").
QString with_export_suffix(const QString& path, const QString& filter);

struct ExportedView {
  QString title;
  QWidget* widget = nullptr;
};

Status export_view_svg(const ExportedView& view, const QString& path);
Status export_view_png(const ExportedView& view, const QString& path);
// json: plan.json of every ranked plan; csv, md, html: the estimate of the shown plan;
// colossalai, deepspeed, megatron, perfetto, torchtitan: the shown plan as `tessera export --to` writes it.
Status export_planner_report(const PlannerSession& session, ExportFormat format, const QString& path);

}  // namespace tessera::gui
