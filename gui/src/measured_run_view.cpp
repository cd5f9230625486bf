#include "measured_run_view.h"

#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QVBoxLayout>

#include "chart_scales.h"
#include "measured_figures.h"
#include "plan_labels.h"
#include "series_chart.h"

namespace tessera::gui {

namespace {

QString figure_text(const std::optional<MeasuredFigure>& figure, QString (*text)(double)) {
  if (!figure) return QObject::tr("not recorded");
  return QObject::tr("measured %1 · predicted %2 · prediction off by %3%")
      .arg(text(figure->measured), text(figure->predicted))
      .arg(figure->error_pct(), 0, 'f', 1);
}

QString tokens_text(double tokens_per_s) { return QObject::tr("%1 tokens/s").arg(QLocale().toString(tokens_per_s, 'f', 0)); }

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
  auto* curves = new QHBoxLayout;
  curves->addWidget(loss_, 1);
  curves->addWidget(grad_norm_, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(title_);
  layout->addLayout(figures);
  layout->addWidget(note_);
  layout->addLayout(curves, 1);
  setRun(std::nullopt, nullptr);
}

void MeasuredRunView::setRun(const std::optional<MeasuredComparison>& run, const std::shared_ptr<const ShownPlan>& predicted) {
  const bool shown = run && predicted;
  for (QWidget* part : std::initializer_list<QWidget*>{step_time_, tokens_, note_, loss_, grad_norm_}) part->setEnabled(shown);
  if (!shown) {
    title_->setText(tr("No measured run: File → Open measured run (Ctrl+M) opens the metrics.json of tessera train."));
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

QString MeasuredRunView::stepTimeText() const { return step_time_->text(); }
QString MeasuredRunView::tokensText() const { return tokens_->text(); }

}  // namespace tessera::gui
