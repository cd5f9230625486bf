#include "memory_timeline_chart.h"

#include <algorithm>
#include <cmath>

#include <QHelpEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>

#include "category_style.h"
#include "chart_scales.h"
#include "plan_labels.h"

namespace tessera::gui {

namespace {

constexpr double kMargin = 12, kPassStrip = 10, kAxisLabels = 22;
const QColor kCapacityColor(0xC0, 0x00, 0x00);

// What the step holds throughout at the bottom, what its passes allocate and free on top.
constexpr MemoryCategory kStackOrder[] = {MemoryCategory::parameters,   MemoryCategory::master_weights, MemoryCategory::gradients,
                                          MemoryCategory::optimizer_states, MemoryCategory::comm_buffers, MemoryCategory::chunk_buffers,
                                          MemoryCategory::workspace,    MemoryCategory::runtime,        MemoryCategory::activations,
                                          MemoryCategory::logits};

// Where the plot is: the step's time across, bytes up.
struct Frame {
  QRectF area;
  double step_s = 1, max_bytes = 1;
  double x(double t) const { return area.left() + area.width() * t / step_s; }
  double y(double bytes) const { return area.bottom() - area.height() * bytes / max_bytes; }
};

std::vector<LegendEntry> legend_entries(const planner::RankMemoryTimeline& timeline, bool usable_line, bool measured) {
  std::vector<LegendEntry> entries;
  const MemoryBreakdown& peak = timeline.points[timeline.peak].bytes;
  for (MemoryCategory c : kStackOrder) {
    if (peak[c].device > 0) entries.push_back({category_qcolor(c), category_name(c)});
  }
  entries.push_back({kCapacityColor, QObject::tr("GPU capacity (dashed)")});
  if (usable_line) entries.push_back({kCapacityColor.lighter(150), QObject::tr("usable, less the headroom (dashed)")});
  if (measured) entries.push_back({Qt::black, QObject::tr("measured peak (dotted)")});
  entries.push_back({trace_event_colour("forward"), QObject::tr("forward pass")});
  entries.push_back({trace_event_colour("backward"), QObject::tr("backward pass")});
  return entries;
}

}  // namespace

struct MemoryTimelineChart::Plot {
  Frame frame;
  QRectF legend;
};

MemoryTimelineChart::MemoryTimelineChart(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setBackgroundRole(QPalette::Base);
  setAutoFillBackground(true);
}

void MemoryTimelineChart::setTimeline(const planner::RankMemoryTimeline& timeline, std::vector<planner::TraceEvent> passes, int64_t capacity_bytes,
                                      int64_t usable_bytes) {
  timeline_ = timeline;
  passes_ = std::move(passes);
  capacity_bytes_ = capacity_bytes;
  usable_bytes_ = usable_bytes;
  update();
}

void MemoryTimelineChart::clearTimeline() {
  timeline_.reset();
  passes_.clear();
  update();
}

void MemoryTimelineChart::setMeasuredPeak(std::optional<int64_t> bytes) {
  measured_peak_ = bytes;
  update();
}

QString MemoryTimelineChart::peakText() const {
  if (!timeline_) return {};
  const planner::MemoryPoint& peak = timeline_->points[timeline_->peak];
  return tr("peak %1 at %2").arg(bytes_text(peak.bytes.device_total()), seconds_text(peak.start_s));
}

MemoryTimelineChart::Plot MemoryTimelineChart::plot() const {
  const QFontMetricsF metrics(font());
  Plot p;
  const double legend_width = width() - 2 * kMargin;
  const double legend_h = legend_height(metrics, legend_width, legend_entries(*timeline_, usable_bytes_ < capacity_bytes_, measured_peak_.has_value()));
  p.legend = QRectF(kMargin, height() - kMargin - legend_h, legend_width, legend_h);
  const double axis_label_width = metrics.horizontalAdvance(QStringLiteral("000 GiB")) + 10;
  const double top = kMargin + metrics.height() + 6;  // the peak's label above the plot
  const double bottom = p.legend.top() - 10 - kAxisLabels - kPassStrip - 4;
  p.frame.area = QRectF(kMargin + axis_label_width, top, std::max(50.0, width() - 2 * kMargin - axis_label_width), std::max(40.0, bottom - top));
  p.frame.step_s = std::max(timeline_->step_time_s, 1e-12);
  double max_bytes = static_cast<double>(timeline_->points[timeline_->peak].bytes.device_total());
  if (measured_peak_) max_bytes = std::max(max_bytes, static_cast<double>(*measured_peak_));
  // The capacity sets the scale unless the step would shrink to a sliver beside it (a CPU run).
  if (capacity_bytes_ <= 4 * max_bytes) max_bytes = std::max(max_bytes, static_cast<double>(capacity_bytes_));
  p.frame.max_bytes = std::max(1.0, max_bytes * 1.06);
  return p;
}

void MemoryTimelineChart::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  if (!timeline_) {
    painter.drawText(rect(), Qt::AlignCenter, tr("No plan yet: the search is running, or the inputs are invalid."));
    return;
  }
  const Plot p = plot();
  drawAreas(painter, p);
  painter.setRenderHint(QPainter::Antialiasing);
  drawAxes(painter, p);
  drawPasses(painter, p);
  drawMarks(painter, p);
  draw_legend(painter, p.legend, legend_entries(*timeline_, usable_bytes_ < capacity_bytes_, measured_peak_.has_value()));
}

// Each category's band as one step-shaped polygon over the whole step: no seams between points.
void MemoryTimelineChart::drawAreas(QPainter& painter, const Plot& p) const {
  const Frame& f = p.frame;
  const auto& points = timeline_->points;
  std::vector<double> below(points.size(), 0);  // bytes of the categories already stacked, per point
  for (MemoryCategory c : kStackOrder) {
    QPolygonF band;
    for (size_t i = 0; i < points.size(); ++i) {
      const double end_s = i + 1 < points.size() ? points[i + 1].start_s : timeline_->step_time_s;
      const double top = below[i] + static_cast<double>(points[i].bytes[c].device);
      band << QPointF(f.x(points[i].start_s), f.y(top)) << QPointF(f.x(end_s), f.y(top));
    }
    for (size_t i = points.size(); i-- > 0;) {
      const double end_s = i + 1 < points.size() ? points[i + 1].start_s : timeline_->step_time_s;
      band << QPointF(f.x(end_s), f.y(below[i])) << QPointF(f.x(points[i].start_s), f.y(below[i]));
      below[i] += static_cast<double>(points[i].bytes[c].device);
    }
    painter.setPen(Qt::NoPen);
    painter.setBrush(category_qcolor(c));
    painter.drawPolygon(band);
  }
}

void MemoryTimelineChart::drawAxes(QPainter& painter, const Plot& p) const {
  const Frame& f = p.frame;
  const QFontMetricsF metrics(font());
  const auto [byte_step, byte_unit] = byte_tick_step(f.max_bytes);
  const double unit_bytes = byte_unit == QStringLiteral("GiB") ? double(1 << 30) : double(1 << 20);
  for (double b = 0; b <= f.max_bytes; b += byte_step) {
    painter.setPen(QColor(0, 0, 0, 30));
    painter.drawLine(QPointF(f.area.left(), f.y(b)), QPointF(f.area.right(), f.y(b)));
    painter.setPen(QColor(0, 0, 0, 170));
    painter.drawText(QRectF(kMargin, f.y(b) - metrics.height() / 2, f.area.left() - kMargin - 6, metrics.height()), Qt::AlignRight | Qt::AlignVCenter,
                     QStringLiteral("%1 %2").arg(b / unit_bytes, 0, 'g', 4).arg(byte_unit));
  }
  const double time_step = tick_step(f.step_s);
  const auto [time_unit, per_unit] = time_tick_unit(time_step);
  const double axis_y = f.area.bottom() + kPassStrip + 4;
  for (double t = 0; t <= f.step_s * (1 + 1e-9); t += time_step) {
    const double x = f.x(t);
    painter.setPen(QColor(0, 0, 0, 170));
    painter.drawLine(QPointF(x, axis_y), QPointF(x, axis_y + 4));
    const QString label = QStringLiteral("%1 %2").arg(t / per_unit, 0, 'g', 5).arg(time_unit);
    if (x + metrics.horizontalAdvance(label) / 2 > width() - kMargin) continue;  // a label the right edge would cut
    painter.drawText(QRectF(x - 50, axis_y + 4, 100, kAxisLabels - 4), Qt::AlignHCenter | Qt::AlignTop, label);
  }
  painter.setPen(QColor(0, 0, 0, 160));
  painter.drawLine(f.area.bottomLeft(), f.area.bottomRight());
  painter.drawLine(f.area.bottomLeft(), f.area.topLeft());
}

// The stage's passes under the plot, so the rises and falls can be read against them.
void MemoryTimelineChart::drawPasses(QPainter& painter, const Plot& p) const {
  const Frame& f = p.frame;
  const double top = f.area.bottom() + 2;
  for (const planner::TraceEvent& e : passes_) {
    const double x0 = f.x(e.start_s), x1 = f.x(e.start_s + e.duration_s);
    painter.fillRect(QRectF(x0, top, std::max(0.0, x1 - x0 - 0.5), kPassStrip), trace_event_colour(e.category));
  }
}

void MemoryTimelineChart::drawMarks(QPainter& painter, const Plot& p) const {
  const Frame& f = p.frame;
  const QFontMetricsF metrics(font());
  const auto hline = [&](double bytes, const QColor& colour, Qt::PenStyle style) {
    painter.setPen(QPen(colour, 1.5, style));
    painter.drawLine(QPointF(f.area.left(), f.y(bytes)), QPointF(f.area.right(), f.y(bytes)));
  };
  if (capacity_bytes_ <= f.max_bytes) hline(static_cast<double>(capacity_bytes_), kCapacityColor, Qt::DashLine);
  if (usable_bytes_ < capacity_bytes_ && usable_bytes_ <= f.max_bytes) hline(static_cast<double>(usable_bytes_), kCapacityColor.lighter(150), Qt::DashLine);
  if (measured_peak_) hline(static_cast<double>(*measured_peak_), Qt::black, Qt::DotLine);
  // The peak: a line down from the label to the top of the stack.
  const planner::MemoryPoint& peak = timeline_->points[timeline_->peak];
  const double x = f.x(peak.start_s), y = f.y(static_cast<double>(peak.bytes.device_total()));
  const bool over = peak.bytes.device_total() > usable_bytes_;
  painter.setPen(QPen(over ? kCapacityColor : Qt::black, 1.2));
  painter.drawLine(QPointF(x, f.area.top() - 2), QPointF(x, y));
  painter.setBrush(over ? kCapacityColor : Qt::black);
  painter.drawEllipse(QPointF(x, y), 3.5, 3.5);
  const QString label = peakText() + (over ? tr(" · %1 over the usable memory").arg(bytes_text(peak.bytes.device_total() - usable_bytes_)) : QString());
  const double label_width = metrics.horizontalAdvance(label) + 4;
  // Beside the line, on whichever side has room.
  const double left = x + 6 + label_width <= width() - kMargin ? x + 6 : std::max(kMargin, x - 6 - label_width);
  painter.drawText(QRectF(left, kMargin, label_width, metrics.height()), Qt::AlignLeft | Qt::AlignVCenter, label);
}

QString MemoryTimelineChart::tooltipAt(double x) const {
  const Frame f = plot().frame;
  if (x < f.area.left() || x > f.area.right()) return {};
  const double t = (x - f.area.left()) / f.area.width() * f.step_s;
  const auto& points = timeline_->points;
  const auto after = std::upper_bound(points.begin(), points.end(), t, [](double time, const planner::MemoryPoint& p) { return time < p.start_s; });
  if (after == points.begin()) return {};
  const MemoryBreakdown& bytes = std::prev(after)->bytes;
  QString text = tr("<b>%1 in use at %2</b>").arg(bytes_text(bytes.device_total()), seconds_text(t));
  for (MemoryCategory c : kAllMemoryCategories) {
    if (bytes[c].device > 0) text += QStringLiteral("<br>%1: %2").arg(category_name(c), bytes_text(bytes[c].device));
  }
  for (const planner::TraceEvent& e : passes_) {
    if (e.start_s <= t && t < e.start_s + e.duration_s) text += tr("<br>during %1 (%2)").arg(QString::fromStdString(e.name), QString::fromStdString(e.category));
  }
  return text;
}

bool MemoryTimelineChart::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip && timeline_) {
    auto* help = static_cast<QHelpEvent*>(event);
    const QString text = tooltipAt(help->pos().x());
    if (text.isEmpty()) QToolTip::hideText();
    else QToolTip::showText(help->globalPos(), text, this);
    return true;
  }
  return QWidget::event(event);
}

}  // namespace tessera::gui
