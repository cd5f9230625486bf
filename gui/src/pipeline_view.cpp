#include "pipeline_view.h"

#include <algorithm>
#include <cmath>

#include <QHBoxLayout>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollArea>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>

#include "category_style.h"
#include "chart_scales.h"
#include "plan_labels.h"

namespace tessera::gui {

namespace {

constexpr double kMargin = 12, kLaneHeight = 30, kCommLaneHeight = 20, kLaneGap = 10, kAxisHeight = 30, kZoomStep = 1.25;
constexpr double kStageHeight = kLaneHeight + kCommLaneHeight + 2 + kLaneGap;  // at the least lane height
// Zoom limits, relative to the fitted span: down to a millionth (a few events
// across the plot), out to ten steps.
constexpr double kMinSpanOfFit = 1e-6, kMaxSpanOfFit = 10;

const QColor kIdle(0xB8, 0xB8, 0xB8);

}  // namespace

class PipelineCanvas : public QWidget {
 public:
  explicit PipelineCanvas(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setMinimumWidth(400);
    QSizePolicy policy(QSizePolicy::Preferred, QSizePolicy::Preferred);
    policy.setHeightForWidth(true);  // the scroll area gives it the height every stage and the legend need
    setSizePolicy(policy);
    setBackgroundRole(QPalette::Base);
    setAutoFillBackground(true);
  }

  std::shared_ptr<const ShownPlan> plan;
  double view_start_s = 0, view_span_s = 1;

  double fitted_span() const { return plan && plan->simulation.step_time_s > 0 ? plan->simulation.step_time_s * 1.02 : 1; }
  void fit() {
    view_start_s = 0;
    view_span_s = fitted_span();
    update();
  }
  void zoom(double factor, double anchor_x) {
    const double anchor_s = time_at(anchor_x);
    view_span_s = std::clamp(view_span_s / factor, fitted_span() * kMinSpanOfFit, fitted_span() * kMaxSpanOfFit);
    view_start_s = anchor_s - (anchor_x - plot_left()) / plot_width() * view_span_s;
    clamp_start();
    update();
  }
  // Keeps some of the step in view however far it is panned.
  void clamp_start() { view_start_s = std::clamp(view_start_s, -0.9 * view_span_s, fitted_span() - 0.1 * view_span_s); }
  // The height that shows every stage's two lanes and the legend at `w` pixels wide.
  int heightForWidth(int w) const override {
    const QFontMetricsF metrics(font());
    const int64_t stages = plan ? plan->request.layout.pp : 1;
    const double lanes = static_cast<double>(stages) * kStageHeight - kLaneGap;
    return static_cast<int>(std::ceil(lanes_top(metrics) + lanes + footer_height(metrics, w)));
  }
  QSize minimumSizeHint() const override { return {400, heightForWidth(400)}; }
  QSize sizeHint() const override { return {800, heightForWidth(800)}; }
  double plot_left() const { return kMargin + label_width_; }
  double plot_width() const { return std::max(10.0, width() - plot_left() - kMargin); }
  // Only a pipeline has bubbles: idle compute between a stage's passes. Without one the
  // compute lane runs its passes back to back and then waits for the step's tail, drawn below it.
  std::vector<LegendEntry> legend() const {
    std::vector<LegendEntry> entries{{trace_event_colour("forward"), tr("forward")},
                                     {trace_event_colour("backward"), tr("backward")},
                                     {trace_event_colour("communication"), tr("communication")},
                                     {trace_event_colour("offload"), tr("offload")},
                                     {trace_event_colour("optimizer"), tr("optimizer")}};
    if (plan && plan->request.layout.pp > 1) entries.push_back({kIdle, tr("idle compute between passes (pipeline bubble)"), Qt::BDiagPattern});
    return entries;
  }
  QString summary() const {
    const planner::StepSimulation& sim = plan->simulation;
    const int64_t stages = plan->request.layout.pp;
    const int64_t micro_batches = plan->request.training.num_micro_batches;
    const QString micro_batches_text = micro_batches == 1 ? tr("1 micro-batch") : tr("%1 micro-batches").arg(micro_batches);
    if (stages == 1) return tr("no pipeline · %1 · step %2").arg(micro_batches_text, seconds_text(sim.step_time_s));
    // The simulator's bubble is the slowest stage's idle time (simulate.cpp: the makespan less its passes);
    // faster stages idle longer, as their hatching shows.
    return tr("%1 stages · %2 schedule · %3 · step %4 · the slowest stage's bubble %5 (%6% of the step)")
        .arg(stages)
        .arg(QString::fromLatin1(enum_name(plan->request.plugin.pp_schedule).data()))
        .arg(micro_batches_text)
        .arg(seconds_text(sim.step_time_s), seconds_text(sim.breakdown.bubble_s))
        .arg(sim.step_time_s > 0 ? 100 * sim.breakdown.bubble_s / sim.step_time_s : 0, 0, 'f', 1);
  }
  // Where event `index` was last drawn; empty when it was not.
  QRectF drawnBox(size_t index) const {
    for (const auto& [box, i] : boxes_) {
      if (i == index) return box;
    }
    return {};
  }

 protected:
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent* event) override {
    zoom(event->angleDelta().y() > 0 ? kZoomStep : 1 / kZoomStep, event->position().x());
    event->accept();
  }
  void mousePressEvent(QMouseEvent* event) override { drag_x_ = event->position().x(); }
  void mouseMoveEvent(QMouseEvent* event) override {
    if (event->buttons() & Qt::LeftButton) {
      view_start_s -= (event->position().x() - drag_x_) / plot_width() * view_span_s;
      clamp_start();
      drag_x_ = event->position().x();
      update();
    }
  }
  void mouseDoubleClickEvent(QMouseEvent*) override { fit(); }
  bool event(QEvent* event) override;

 private:
  static double lanes_top(const QFontMetricsF& metrics) { return kMargin + metrics.height() + kAxisHeight + 6; }
  // Below the lanes: a gap, the legend and the margin.
  double footer_height(const QFontMetricsF& metrics, double width) const {
    return 14 + legend_height(metrics, width - 2 * kMargin, legend()) + kMargin;
  }
  double time_at(double x) const { return view_start_s + (x - plot_left()) / plot_width() * view_span_s; }
  double x_at(double s) const { return plot_left() + (s - view_start_s) / view_span_s * plot_width(); }

  double label_width_ = 90, drag_x_ = 0, lane_height_ = kLaneHeight, comm_lane_height_ = kCommLaneHeight;
  std::vector<std::pair<QRectF, size_t>> boxes_;  // drawn events, for tooltips
};

void PipelineCanvas::paintEvent(QPaintEvent*) {
  QPainter p(this);
  boxes_.clear();
  const QFontMetricsF metrics(font());
  if (!plan) {
    p.drawText(rect(), Qt::AlignCenter, tr("No plan to show."));
    return;
  }
  const std::vector<planner::TraceEvent>& events = plan->events();
  const int64_t stages = plan->request.layout.pp;
  label_width_ = metrics.horizontalAdvance(tr("stage %1 comm").arg(stages - 1)) + 14;
  const QString summary = this->summary();
  p.drawText(QRectF(kMargin, kMargin, width() - 2 * kMargin, metrics.height()), Qt::AlignLeft,
             metrics.elidedText(summary, Qt::ElideRight, width() - 2 * kMargin));

  const double axis_y = kMargin + metrics.height() + kAxisHeight;
  const double lanes_top = this->lanes_top(metrics);
  // Lanes grow into the space the legend leaves, up to twice their least height
  // (the scroll area never makes the canvas shorter than the least height).
  const double room = height() - lanes_top - footer_height(metrics, width()) + kLaneGap;
  const double grow = std::clamp(room / static_cast<double>(stages) / kStageHeight, 1.0, 2.0);
  lane_height_ = kLaneHeight * grow;
  comm_lane_height_ = kCommLaneHeight * grow;
  auto lane_top = [&](int lane) {
    const int stage = lane / 2;
    return lanes_top + stage * (lane_height_ + comm_lane_height_ + 2 + kLaneGap) + (lane % 2 ? lane_height_ + 2 : 0);
  };
  const double lanes_bottom = lane_top(static_cast<int>(2 * stages)) - kLaneGap;
  p.setClipRect(QRectF(0, 0, width(), height()));
  // A pipeline's compute lanes hatched from the step's start to its last pass: the
  // passes cover what is busy, so the bubbles show. Communication lanes are never idle
  // time of the pipeline: what they leave empty is only time without messages.
  double passes_end_s = 0;
  for (const planner::TraceEvent& e : events) {
    if (e.lane % 2 == 0) passes_end_s = std::max(passes_end_s, e.start_s + e.duration_s);
  }
  for (int lane = 0; lane < 2 * stages; ++lane) {
    const double h = lane % 2 ? comm_lane_height_ : lane_height_;
    const QRectF band(plot_left(), lane_top(lane), plot_width(), h);
    if (stages > 1 && lane % 2 == 0) {
      const double from = std::max(band.left(), x_at(0)), to = std::min(x_at(passes_end_s), band.right());
      p.fillRect(QRectF(from, band.top(), std::max(0.0, to - from), h), QBrush(kIdle, Qt::BDiagPattern));
    }
    p.setPen(QColor(0, 0, 0, 60));
    p.drawRect(band);
    p.setPen(Qt::black);
    p.drawText(QRectF(kMargin, band.top(), label_width_ - 8, h), Qt::AlignRight | Qt::AlignVCenter,
               lane % 2 ? tr("stage %1 comm").arg(lane / 2) : tr("stage %1").arg(lane / 2));
  }
  // Time axis.
  const double step = tick_step(view_span_s);
  const auto [unit, per_unit] = time_tick_unit(step);
  p.setPen(QColor(0, 0, 0, 160));
  p.drawLine(QPointF(plot_left(), axis_y), QPointF(plot_left() + plot_width(), axis_y));
  for (double t = std::ceil(view_start_s / step) * step; t <= view_start_s + view_span_s; t += step) {
    const double x = x_at(t);
    p.setPen(QColor(0, 0, 0, 30));
    p.drawLine(QPointF(x, axis_y), QPointF(x, lanes_bottom));
    p.setPen(QColor(0, 0, 0, 170));
    p.drawLine(QPointF(x, axis_y - 4), QPointF(x, axis_y));
    const double value = std::abs(t) < step / 2 ? 0 : t / per_unit;
    const QString label = QStringLiteral("%1 %2").arg(value, 0, 'g', 5).arg(unit);
    if (x + metrics.horizontalAdvance(label) / 2.0 > width() - kMargin) continue;  // a label the right edge would cut
    p.drawText(QRectF(x - 45, axis_y - 6 - metrics.height(), 90, metrics.height()), Qt::AlignHCenter | Qt::AlignBottom, label);
  }
  // Events, clipped to the plot.
  p.setClipRect(QRectF(plot_left(), 0, plot_width(), height()));
  for (size_t i = 0; i < events.size(); ++i) {
    const planner::TraceEvent& e = events[i];
    const double x0 = x_at(e.start_s), x1 = x_at(e.start_s + e.duration_s);
    if (x1 < plot_left() || x0 > plot_left() + plot_width()) continue;
    const double h = e.lane % 2 ? comm_lane_height_ : lane_height_;
    // At its true width: an event under a pixel is drawn faint in proportion, never a pixel wide
    // (a 272 µs receive widened to a pixel read as milliseconds at "Fit").
    const QRectF box(x0, lane_top(e.lane) + 1, x1 - x0, h - 2);
    QColor colour = trace_event_colour(e.category);
    if (box.width() < 1) colour.setAlphaF(std::max(0.08, box.width()));
    p.fillRect(QRectF(box.left(), box.top(), std::max(1.0, box.width()), box.height()), colour);
    if (box.width() > 3) {
      p.setPen(QColor(255, 255, 255, 200));
      p.drawLine(box.topLeft(), box.bottomLeft());
    }
    const QString name = QString::fromStdString(e.name);
    if (metrics.horizontalAdvance(name) + 4 < box.width()) {
      p.setPen(Qt::white);
      p.drawText(box, Qt::AlignCenter, name);
    }
    boxes_.push_back({box, i});
  }
  p.setClipping(false);
  const std::vector<LegendEntry> entries = legend();
  p.setPen(Qt::black);
  const double legend_top = std::max(lanes_bottom + 14, height() - kMargin - legend_height(metrics, width() - 2 * kMargin, entries));
  draw_legend(p, QRectF(kMargin, legend_top, width() - 2 * kMargin, height()), entries);
}

bool PipelineCanvas::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip && plan) {
    const auto* help = static_cast<QHelpEvent*>(event);
    for (const auto& [box, index] : boxes_) {
      if (!box.contains(help->pos())) continue;
      const planner::TraceEvent& e = plan->events()[index];
      QToolTip::showText(help->globalPos(),
                         tr("<b>%1</b> (%2)<br>stage %3 · starts %4 · lasts %5")
                             .arg(QString::fromStdString(e.name).toHtmlEscaped(), QString::fromStdString(e.category))
                             .arg(e.lane / 2)
                             .arg(seconds_text(e.start_s), seconds_text(e.duration_s)),
                         this);
      return true;
    }
    QToolTip::hideText();
    return true;
  }
  return QWidget::event(event);
}

PipelineView::PipelineView(QWidget* parent) : QWidget(parent) {
  canvas_ = new PipelineCanvas(this);
  auto* buttons = new QHBoxLayout;
  for (auto [label, slot] : {std::pair{tr("Zoom in"), &PipelineView::zoomIn}, std::pair{tr("Zoom out"), &PipelineView::zoomOut},
                             std::pair{tr("Fit"), &PipelineView::fit}}) {
    auto* button = new QToolButton(this);
    button->setText(label);
    connect(button, &QToolButton::clicked, this, slot);
    buttons->addWidget(button);
  }
  buttons->addStretch(1);
  // Beside the buttons, not on the canvas: a printed schedule has no mouse.
  auto* hint = new QLabel(tr("wheel: zoom · drag: pan · double click: fit"), this);
  hint->setStyleSheet(QStringLiteral("color: #555555;"));
  buttons->addWidget(hint);
  // Many stages scroll rather than squeeze: the canvas is never shorter than its lanes and legend need.
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(canvas_);
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* column = new QVBoxLayout(this);
  column->addLayout(buttons);
  column->addWidget(scroll, 1);
}

void PipelineView::setPlan(std::shared_ptr<const ShownPlan> plan) {
  const bool same_step = canvas_->plan && canvas_->plan->simulation.step_time_s == plan->simulation.step_time_s;
  const bool same_stages = canvas_->plan && canvas_->plan->request.layout.pp == plan->request.layout.pp;
  canvas_->plan = std::move(plan);
  if (!same_stages) canvas_->updateGeometry();  // another height for another stage count
  if (!same_step) canvas_->fit();  // keep the user's zoom while the step stays the same
  canvas_->update();
}

void PipelineView::clearPlan() {
  canvas_->plan.reset();
  canvas_->update();
}

void PipelineView::zoomIn() { canvas_->zoom(kZoomStep, canvas_->plot_left() + canvas_->plot_width() / 2); }
void PipelineView::zoomOut() { canvas_->zoom(1 / kZoomStep, canvas_->plot_left() + canvas_->plot_width() / 2); }
void PipelineView::fit() { canvas_->fit(); }

std::pair<double, double> PipelineView::visibleRange() const { return {canvas_->view_start_s, canvas_->view_start_s + canvas_->view_span_s}; }

bool PipelineView::showsEveryStage() const { return canvas_->height() >= canvas_->heightForWidth(canvas_->width()); }

QWidget* PipelineView::canvas() const { return canvas_; }

QString PipelineView::summaryText() const { return canvas_->plan ? canvas_->summary() : QString(); }

QStringList PipelineView::legendLabels() const {
  QStringList labels;
  for (const LegendEntry& entry : canvas_->legend()) labels << entry.label;
  return labels;
}

QRectF PipelineView::eventBox(size_t index) const { return canvas_->drawnBox(index); }

}  // namespace tessera::gui
