#include "report_export.h"

#include <algorithm>

#include <QBuffer>
#include <QFileInfo>
#include <QFontInfo>
#include <QPainter>
#include <QRegularExpression>
#include <QSvgGenerator>
#include <QWidget>

#include "save_whole_file.h"
#include "shown_plan_file.h"
#include "tessera/planner/export.h"
#include "tessera/planner/report.h"

namespace tessera::gui {

namespace {

// The `tessera export` target that writes the format, if one does.
std::optional<planner::ExportTarget> export_target(ExportFormat format) {
  switch (format) {
    case ExportFormat::colossalai: return planner::ExportTarget::colossalai;
    case ExportFormat::deepspeed: return planner::ExportTarget::deepspeed;
    case ExportFormat::megatron: return planner::ExportTarget::megatron;
    case ExportFormat::perfetto: return planner::ExportTarget::perfetto;
    case ExportFormat::torchtitan: return planner::ExportTarget::torchtitan;
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<ExportFormat> export_format_of(const QString& path) {
  const QString name = QFileInfo(path).fileName().toLower();
  // The longer endings first: they end in .json too.
  if (name.endsWith(QLatin1String(".trace.json"))) return ExportFormat::perfetto;
  if (name.endsWith(QLatin1String("ds_config.json"))) return ExportFormat::deepspeed;
  static const std::pair<const char*, ExportFormat> kSuffixes[] = {{"pdf", ExportFormat::pdf}, {"svg", ExportFormat::svg},   {"png", ExportFormat::png},
                                                                   {"json", ExportFormat::json}, {"csv", ExportFormat::csv}, {"md", ExportFormat::md},
                                                                   {"html", ExportFormat::html}, {"py", ExportFormat::colossalai},
                                                                   {"sh", ExportFormat::megatron},   {"toml", ExportFormat::torchtitan}};
  const QString suffix = QFileInfo(path).suffix().toLower();
  for (const auto& [ending, format] : kSuffixes) {
    if (suffix == QLatin1String(ending)) return format;
  }
  return std::nullopt;
}

QString export_file_filter() {
  return QObject::tr(
      "PDF report, inputs, every plan and every view (*.pdf);;SVG, this view (*.svg);;PNG, this view (*.png);;plan.json, the ranked plans (*.json);;"
      "CSV, the shown plan (*.csv);;Markdown, the shown plan (*.md);;HTML, the shown plan (*.html);;"
      "ColossalAI training script, the shown plan (*.py);;DeepSpeed config, the shown plan (*.ds_config.json);;"
      "Megatron-LM launch script, the shown plan (*.sh);;torchtitan job config, the shown plan (*.toml);;"
      "Perfetto trace of one step, the shown plan (*.trace.json)");
}

QString with_export_suffix(const QString& path, const QString& filter) {
  if (export_format_of(path)) return path;
  const QRegularExpressionMatch suffix = QRegularExpression(QStringLiteral("\\(\\*(\\.[\\w.]+)\\)")).match(filter);
  return suffix.hasMatch() ? path + suffix.captured(1) : path;
}

namespace {

// QSvgGenerator names the widget's font as Qt knows it ("Sans Serif", an alias
// of Qt's own); a browser knows no such family and falls back to a serif,
// wider than what the layout measured, so labels overflow. Name the family the
// alias resolved to, then the generic sans-serif.
QString with_browser_fonts(const QString& svg) {
  static const QRegularExpression kFamily(QStringLiteral("font-family=\"([^\"]*)\""));
  QString out;
  qsizetype copied = 0;
  for (auto match = kFamily.globalMatch(svg); match.hasNext();) {
    const QRegularExpressionMatch m = match.next();
    const QString resolved = QFontInfo(QFont(m.captured(1))).family();
    out += svg.mid(copied, m.capturedStart() - copied) + QStringLiteral("font-family=\"'%1', sans-serif\"").arg(resolved);
    copied = m.capturedEnd();
  }
  return out + svg.mid(copied);
}

}  // namespace

Status export_view_svg(const ExportedView& view, const QString& path) {
  QBuffer buffer;
  buffer.open(QIODevice::WriteOnly);
  QSvgGenerator svg;
  svg.setOutputDevice(&buffer);
  svg.setSize(view.widget->size());
  svg.setViewBox(QRect(QPoint(), view.widget->size()));
  svg.setResolution(view.widget->logicalDpiX());  // font sizes in the widget's pixels, as it laid them out
  svg.setTitle(view.title);
  svg.setDescription(QObject::tr("Exported by tessera-gui"));
  QPainter painter;
  if (!painter.begin(&svg)) return write_error(path, QObject::tr("the SVG cannot be opened"));
  view.widget->render(&painter, QPoint(), QRegion(), QWidget::DrawChildren);
  if (!painter.end()) return write_error(path, QObject::tr("the SVG could not be finished"));
  return save_whole_file(path, with_browser_fonts(QString::fromUtf8(buffer.data())).toStdString());
}

Status export_view_png(const ExportedView& view, const QString& path) {
  QByteArray png;
  QBuffer buffer(&png);
  buffer.open(QIODevice::WriteOnly);
  if (!view.widget->grab().save(&buffer, "PNG")) return write_error(path, QObject::tr("the PNG could not be encoded"));
  return save_whole_file(path, png.toStdString());
}

Status export_planner_report(const PlannerSession& session, ExportFormat format, const QString& path) {
  if (!session.hasModel()) return make_error(ErrorCode::invalid_argument, "nothing to export yet: choose a model");
  if (session.inputError()) return make_error(ErrorCode::invalid_argument, "nothing exported: an input is invalid (" + session.inputError()->message + ")");
  if (format == ExportFormat::json) {
    const auto& result = session.searchResult();
    // The ranking, its model and its request must be the same inputs' (a search in flight is for newer ones).
    if (!result || session.searching()) return make_error(ErrorCode::invalid_argument, "nothing to export yet: the search has not finished");
    if (session.rankingIsStale()) {
      return make_error(ErrorCode::invalid_argument, "the ranked plans are of earlier inputs (their search was cancelled); let the search finish first");
    }
    const nlohmann::json doc = planner::plan_document(session.model(), session.resultModelSource(), session.planRequest(), *result,
                                                      static_cast<int>(result->plans.size()));
    return save_whole_file(path, doc.dump(2) + "\n");
  }
  const auto& shown = session.shownPlan();
  if (!shown) return make_error(ErrorCode::invalid_argument, "nothing to export yet: no plan is shown");
  if (const std::optional<planner::ExportTarget> target = export_target(format)) {
    auto plan = shown_plan_file(session);
    if (!plan) return plan.error();
    auto text = planner::export_plan(plan->file, plan->index, *target);
    if (!text) return text.error();
    return save_whole_file(path, text.value());
  }
  const planner::ReportFormat report = format == ExportFormat::csv ? planner::ReportFormat::csv
                                       : format == ExportFormat::md ? planner::ReportFormat::md
                                                                    : planner::ReportFormat::html;
  const planner::EstimateReport facts{session.model(), session.planRequest().cluster.gpu, shown->request, shown->memory, &shown->simulation};
  return save_whole_file(path, planner::render_estimate(facts, report));
}

}  // namespace tessera::gui
