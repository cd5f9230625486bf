#include "report_contents.h"

#include <QAbstractItemModel>
#include <QLocale>
#include <QRegularExpression>

#include "plan_labels.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/fp8.h"
#include "tessera/planner/report.h"

namespace tessera::gui {

namespace {

QString text_of(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

// The planner's sources end with the command-line option that overrides them
// ("(--nccl-mib to override)"); the window has no such control.
QString without_option_hints(const std::string& source) {
  static const QRegularExpression kHint(QStringLiteral("\\s*\\([^()]*--[a-z-]+[^()]*\\)"));
  QString text = QString::fromStdString(source);
  text.remove(kHint);
  return text.startsWith(QStringLiteral("--")) ? QObject::tr("set in the window") : text;
}

std::vector<std::pair<QString, QString>> input_lines(const PlannerSession& session) {
  const PlannerInputs& in = session.inputs();
  const planner::PlanRequest& request = session.planRequest();
  const planner::ClusterSpec& cluster = request.cluster;
  const planner::Model& model = session.model();
  const QLocale locale;
  const QString cluster_name = in.cluster.empty() ? QObject::tr("custom") : QString::fromStdString(in.cluster);
  std::vector<std::pair<QString, QString>> lines;
  lines.push_back({QObject::tr("Model"), QObject::tr("%1 · %2 parameters (%3)")
                                             .arg(QString::fromStdString(model.config.name), QString::fromStdString(planner::format_count(model.parameter_count)),
                                                  QString::fromStdString(in.model))});
  lines.push_back({QObject::tr("Cluster"), QObject::tr("%1: %2 GPUs × %3 (%4 each), %5 per node, %6 Gbit/s per GPU between nodes")
                                               .arg(cluster_name)
                                               .arg(cluster.world_size())
                                               .arg(QString::fromStdString(cluster.gpu.name), QString::fromStdString(planner::format_bytes(cluster.gpu.memory_bytes)))
                                               .arg(cluster.gpus_per_node)
                                               .arg(cluster.inter_node_gbit_s)});
  lines.push_back({QObject::tr("Global batch"), QObject::tr("%1 sequences · %2 tokens per step")
                                                    .arg(locale.toString(static_cast<qlonglong>(request.global_batch_size)),
                                                         locale.toString(static_cast<qlonglong>(request.global_batch_size * request.seq_len)))});
  lines.push_back({QObject::tr("Sequence"), QObject::tr("%1 tokens").arg(locale.toString(static_cast<qlonglong>(request.seq_len)))});
  lines.push_back({QObject::tr("Precision"), text_of(enum_name(request.precision))});
  lines.push_back({QObject::tr("Optimizer"), text_of(enum_name(request.optimizer))});
  QString profile = text_of(enum_name(request.activation_profile));
  if (planner::runs_hugging_face_modules(request.activation_profile)) {
    profile = QObject::tr("%1 · transformers %2").arg(profile, QString::fromStdString(planner::to_string(request.transformers_version)));
  }
  lines.push_back({QObject::tr("Activation profile"), request.torch_compile ? QObject::tr("%1 · torch.compile").arg(profile) : profile});
  lines.push_back({QObject::tr("Recompute"), in.recompute ? text_of(enum_name(*in.recompute)) : QObject::tr("any (searched all)")});
  lines.push_back({QObject::tr("Plugin"), in.plugin ? text_of(enum_name(*in.plugin)) : QObject::tr("any (searched all)")});
  const QString runtime = text_of(enum_name(request.runtime));
  lines.push_back({QObject::tr("Runtime"), request.pin_memory ? runtime : QObject::tr("%1 · pin_memory off").arg(runtime)});
  return lines;
}

}  // namespace

Result<ReportContents> report_contents(const PlannerSession& session) {
  if (session.inputError()) return make_error(ErrorCode::invalid_argument, "nothing to report: an input is invalid (" + session.inputError()->message + ")");
  const auto& shown = session.shownPlan();
  if (!session.hasModel() || !shown) return make_error(ErrorCode::invalid_argument, "nothing to report yet: no plan is shown");
  const planner::PlanRequest& request = session.planRequest();
  ReportContents contents;
  contents.title = QObject::tr("%1 on %2 × %3").arg(QString::fromStdString(session.model().config.name)).arg(request.cluster.world_size()).arg(
      QString::fromStdString(request.cluster.gpu.name));
  contents.inputs = input_lines(session);
  contents.fits = shown->memory.fits();
  const planner::Precision precision = shown->request.training.precision;
  contents.verdict = QObject::tr("%1\nPlan: %2\nStep time %3 · %4 tokens/s · MFU %5%%6")
                         .arg(QString::fromStdString(planner::verdict_line(shown->memory)), QString::fromStdString(planner::describe_plan(shown->request)),
                              seconds_text(shown->simulation.step_time_s), QLocale().toString(shown->simulation.tokens_per_s, 'f', 0))
                         .arg(100 * shown->simulation.mfu, 0, 'f', 1)
                         .arg(QString::fromUtf8(planner::mfu_basis(precision)));
  if (planner::is_fp8(precision)) contents.verdict += QStringLiteral("\n") + QString::fromUtf8(planner::kFp8ThroughputCaveat);
  if (const auto& result = session.searchResult()) {
    contents.search_summary = QObject::tr("%1 candidates searched: %2 fit, %3 distinct plans (listed after this page)")
                                  .arg(result->candidates_evaluated)
                                  .arg(result->candidates_fitting)
                                  .arg(result->plans.size());
  }
  const planner::EstimateReport facts{session.model(), request.cluster.gpu, shown->request, shown->memory};
  for (const planner::AssumptionLine& line : planner::assumption_lines(facts)) {
    contents.assumptions.push_back({QStringLiteral("%1: %2").arg(QString::fromStdString(line.name), QString::fromStdString(line.value)), without_option_hints(line.source)});
  }
  return contents;
}

PrintedTable printed_table(const QString& title, const QAbstractItemModel& model, const std::vector<int>& columns, const std::function<bool(int row)>& keep) {
  PrintedTable table{title, {}, {}};
  for (int column : columns) table.header << model.headerData(column, Qt::Horizontal).toString();
  for (int row = 0; row < model.rowCount(); ++row) {
    if (keep && !keep(row)) continue;
    QStringList cells;
    for (int column : columns) cells << model.index(row, column).data().toString();
    table.rows.push_back(cells);
  }
  return table;
}

}  // namespace tessera::gui
