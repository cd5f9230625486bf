#include "measured_run_view.h"

#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QTableWidget>
#include <QVBoxLayout>

#include "category_style.h"
#include "chart_scales.h"
#include "measured_figures.h"
#include "plan_labels.h"
#include "series_chart.h"
#include "tessera/planner/memory_comparison.h"

namespace tessera::gui {

namespace {

// "+20.5%", "-3.1%": as `tessera compare` prints errors.
QString signed_pct(double pct) { return QString::asprintf("%+.1f%%", pct); }

QString figure_text(const std::optional<MeasuredFigure>& figure, QString (*text)(double)) {
  if (!figure) return QObject::tr("not recorded");
  return QObject::tr("measured %1 · predicted %2 · prediction off by %3")
      .arg(text(figure->measured), text(figure->predicted), signed_pct(figure->error_pct()));
}

QString tokens_text(double tokens_per_s) { return QObject::tr("%1 tokens/s").arg(QLocale().toString(tokens_per_s, 'f', 0)); }

// A log's peak beside the plan's: the measured figure and the prediction's error, "-" where the runtime does not log it.
void set_peak_cells(QTableWidget* table, int row, int column, int64_t predicted, int64_t measured) {
  const QString cells[] = {bytes_text(predicted), measured < 0 ? QStringLiteral("-") : bytes_text(measured),
                           measured < 0 ? QStringLiteral("-") : signed_pct(planner::error_pct(predicted, measured))};
  for (int i = 0; i < 3; ++i) {
    auto* item = new QTableWidgetItem(cells[i]);
    item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    table->setItem(row, column + i, item);
  }
}

}  // namespace

MeasuredRunView::MeasuredRunView(QWidget* parent) : QWidget(parent) {
  title_ = new QLabel;
  title_->setWordWrap(true);
  QFont bold = title_->font();
  bold.setBold(true);
  title_->setFont(bold);
  step_time_ = new QLabel;
  tokens_ = new QLabel;
  note_ = new QLabel;
  note_->setWordWrap(true);
  note_->setStyleSheet(QStringLiteral("color: #555555;"));
  loss_ = new SeriesChart(tr("Loss"), trace_event_colour("forward"));
  grad_norm_ = new SeriesChart(tr("Gradient norm (gaps: skipped fp16 steps)"), trace_event_colour("backward"));
  auto* figures = new QGridLayout;
  figures->addWidget(new QLabel(tr("Step time (median, first step left out)")), 0, 0);
  figures->addWidget(step_time_, 0, 1);
  figures->addWidget(new QLabel(tr("Throughput")), 1, 0);
  figures->addWidget(tokens_, 1, 1);
  figures->setColumnStretch(1, 1);
  curves_ = new QWidget;
  auto* curves = new QHBoxLayout(curves_);
  curves->setContentsMargins(0, 0, 0, 0);
  curves->addWidget(loss_, 1);
  curves->addWidget(grad_norm_, 1);
  ranks_ = new QTableWidget(0, 8);
  ranks_->setHorizontalHeaderLabels({tr("Rank"), tr("Stage"), tr("Max allocated: plan"), tr("measured"), tr("error"), tr("Max reserved: plan"),
                                     tr("measured"), tr("error")});
  ranks_->verticalHeader()->hide();
  ranks_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  ranks_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(title_);
  layout->addLayout(figures);
  layout->addWidget(note_);
  layout->addWidget(curves_, 1);
  layout->addWidget(ranks_, 1);
  setRun(std::nullopt, nullptr);
}

void MeasuredRunView::setRun(const std::optional<MeasuredComparison>& run, const std::shared_ptr<const ShownPlan>& predicted) {
  const bool shown = run && predicted;
  for (QWidget* part : std::initializer_list<QWidget*>{step_time_, tokens_, note_, loss_, grad_norm_}) part->setEnabled(shown);
  curves_->show();
  ranks_->hide();
  if (!shown) {
    title_->setText(tr("No measured run: File → Open measured run (Ctrl+M) opens the metrics.json of tessera train, or the log of a "
                       "Megatron-LM, DeepSpeed or torchtitan run against the plan in view."));
    step_time_->clear();
    tokens_->clear();
    note_->clear();
    loss_->setSeries({});
    grad_norm_->setSeries({});
    return;
  }
  const planner::MeasuredRun& r = run->run;
  title_->setText(tr("%1 · %2 on %3 · %4 steps, against the prediction for its set-up")
                      .arg(QFileInfo(run->path).fileName(), QString::fromStdString(r.model_name), QString::fromStdString(r.device.empty() ? "?" : r.device))
                      .arg(r.loss.size()));
  const MeasuredSpeed speed = measured_speed(r, predicted->simulation);
  step_time_->setText(figure_text(speed.step_time_s, seconds_text));
  tokens_->setText(figure_text(speed.tokens_per_s, tokens_text));
  note_->setText(r.device == "cpu" ? tr("Predicted on this machine's CPU profile, whose peak and bandwidths are placeholders: the speed "
                                        "prediction is an order of magnitude; the memory prediction is the engine's own count.")
                                   : QString());
  loss_->setSeries(r.loss);
  grad_norm_->setSeries(r.grad_norm);
}

void MeasuredRunView::setLoggedRun(const LoggedRun& log) {
  const planner::LoggedRunComparison& c = log.comparison;
  for (QWidget* part : std::initializer_list<QWidget*>{step_time_, tokens_, note_, ranks_}) part->setEnabled(true);
  curves_->hide();
  ranks_->show();
  title_->setText(tr("%1 · a %2 run's log against the plan in view: %3")
                      .arg(QFileInfo(log.path).fileName(), QString::fromUtf8(planner::logged_runtime_name(c.runtime)),
                           QString::fromStdString(c.plan_description)));
  step_time_->setText(figure_text(MeasuredFigure{c.measured_step_s, c.predicted_step_s}, seconds_text));
  tokens_->setText(figure_text(MeasuredFigure{c.measured_tokens_per_s, c.predicted_tokens_per_s}, tokens_text));
  QString note = (c.steps_used == 1 ? tr("The one logged step") : tr("The median of %1 logged steps").arg(c.steps_used)) +
                 (c.first_step_left_out ? tr(", the first (warm-up) left out.") : tr("."));
  if (c.memory.empty()) {
    note += tr(" The log reports no memory.");
  } else {
    note += tr(" Peak memory after %1 steps, as PyTorch counts it: the plan's figure without the CUDA context and NCCL's buffers, which "
               "PyTorch's counters do not see, and for max allocated without the allocator's reserve; '-' where the runtime does not log it.")
                .arg(c.memory_after_steps);
  }
  note_->setText(note);
  ranks_->setRowCount(static_cast<int>(c.memory.size()));
  for (int row = 0; row < ranks_->rowCount(); ++row) {
    const planner::LoggedStageMemory& m = c.memory[static_cast<size_t>(row)];
    ranks_->setItem(row, 0, new QTableWidgetItem(QString::number(m.rank)));
    ranks_->setItem(row, 1, new QTableWidgetItem(QString::number(m.stage)));
    set_peak_cells(ranks_, row, 2, m.predicted_allocated, m.measured_max_allocated);
    set_peak_cells(ranks_, row, 5, m.predicted_reserved, m.measured_max_reserved);
  }
}

QString MeasuredRunView::stepTimeText() const { return step_time_->text(); }
QString MeasuredRunView::tokensText() const { return tokens_->text(); }

}  // namespace tessera::gui
