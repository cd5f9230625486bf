#include "memory_view.h"

#include <algorithm>
#include <cmath>

#include <QHelpEvent>
#include <QLocale>
#include <QPainter>
#include <QToolTip>

#include "category_style.h"
#include "chart_scales.h"
#include "memory_formula_inputs.h"
#include "tessera/planner/report.h"

namespace tessera::gui {

namespace {

constexpr double kMargin = 14, kDeviceBar = 26, kSubBar = 14, kRowGap = 18, kAxisHeight = 34;
const QColor kCapacityColor(0xC0, 0x00, 0x00);

int64_t breakdown_device_total(const MemoryBreakdown& b) { return b.device_total(); }

// The rows' tall vertical lines are drawn as opaque rectangles on whole pixels: Qt 6.4's raster
// engine blends an antialiased or translucent line one span per scanline, and hands batches of
// more than 96 spans to its global thread pool (QT_THREAD_PARALLEL_FILLS, qdrawhelper.cpp), for
// which the paint then waits; an opaque pixel-aligned rectangle is filled directly (qt_rectfill).
int pixel_column(double x) { return static_cast<int>(std::lround(x - 0.5)); }

// A dashed vertical line `width` pixels wide centred on x, in Qt's DashLine pattern (4 widths on, 2 off).
void dashed_column(QPainter& p, double x, double top, double bottom, int width, const QColor& colour) {
  const int left = pixel_column(x - (width - 1) / 2.0);
  for (int y = static_cast<int>(std::lround(top)); y < bottom; y += 6 * width) {
    p.fillRect(QRect(left, y, width, std::min(4 * width, static_cast<int>(std::lround(bottom)) - y)), colour);
  }
}

// `colour` at `alpha` over `base`, as one opaque colour.
QColor over(const QColor& base, const QColor& colour, int alpha) {
  const auto mix = [alpha](int under, int above) { return (under * (255 - alpha) + above * alpha + 127) / 255; };
  return QColor(mix(base.red(), colour.red()), mix(base.green(), colour.green()), mix(base.blue(), colour.blue()));
}

}  // namespace

struct MemoryView::Layout {
  double label_width = 0, bar_left = 0, bar_width = 0, scale = 0;
  bool host = false, capacity_on_scale = true;
  bool labels_fit = true;  // every row label fits its column (the width did not cap it): none needs eliding
  double rows_top = 0, rows_bottom = 0;
  std::vector<double> row_top;
};

MemoryView::MemoryView(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setBackgroundRole(QPalette::Base);
  setAutoFillBackground(true);
}

void MemoryView::setPlan(std::shared_ptr<const planner::Model> model, std::shared_ptr<const ShownPlan> plan) {
  model_ = std::move(model);
  plan_ = std::move(plan);
  rows_ = plan_->memory.ranks;
  updateGeometry();
  update();
}

void MemoryView::clearPlan() {
  plan_.reset();
  rows_.clear();
  updateGeometry();
  update();
}

void MemoryView::setMeasured(std::optional<MemoryBreakdown> measured) {
  measured_ = std::move(measured);
  updateGeometry();  // a row more or less
  update();
}

QSize MemoryView::sizeHint() const { return {900, 500}; }

QSize MemoryView::minimumSizeHint() const {
  // Every row with its host and measured bars, the capacity and verdict lines, and the legend wrapped at the least width.
  constexpr int kMinWidth = 480;
  const QFontMetricsF metrics(font());
  const Layout l = layout(metrics);
  const double legend_top = l.rows_bottom + 28 + 2 * metrics.height();
  return {kMinWidth, static_cast<int>(std::ceil(legend_top + legend_height(metrics, kMinWidth - 2 * kMargin, legend()) + kMargin))};
}

std::vector<LegendEntry> MemoryView::legend() {
  std::vector<LegendEntry> entries;
  for (MemoryCategory c : kAllMemoryCategories) entries.push_back({category_qcolor(c), category_name(c)});
  entries.push_back({kCapacityColor, tr("GPU capacity (dashed)")});
  return entries;
}

MemoryView::Layout MemoryView::layout(const QFontMetricsF& metrics) const {
  Layout l;
  int64_t max_bytes = 1, capacity = 0;
  for (const planner::RankMemory& row : rows_) {
    max_bytes = std::max({max_bytes, row.device_total, row.host_total});
    capacity = std::max(capacity, row.gpu_capacity);
    l.host = l.host || row.host_total > 0;
    l.label_width = std::max(l.label_width, metrics.horizontalAdvance(QString::fromStdString(planner::row_label(row))));
  }
  if (measured_) max_bytes = std::max(max_bytes, breakdown_device_total(*measured_));
  // The capacity line sets the scale unless the bars would shrink to slivers beside it (a CPU run).
  l.capacity_on_scale = capacity <= 4 * max_bytes;
  if (l.capacity_on_scale) max_bytes = std::max(max_bytes, capacity);
  l.labels_fit = l.label_width + 12 <= width() * 0.38;
  l.label_width = std::min(l.label_width + 12, width() * 0.38);
  l.bar_left = kMargin + l.label_width;
  const bool over = std::any_of(rows_.begin(), rows_.end(), [](const planner::RankMemory& row) { return !row.fits(); });
  const double total_text = metrics.horizontalAdvance(over ? QStringLiteral("000.00 GiB · 000.00 GiB over") : QStringLiteral("000.00 GiB host")) + 12;
  l.bar_width = std::max(50.0, width() - l.bar_left - kMargin - total_text);
  l.scale = l.bar_width / (static_cast<double>(max_bytes) * 1.04);
  l.rows_top = kMargin + metrics.height() + 8 + kAxisHeight;
  double y = l.rows_top;
  for (size_t i = 0; i < rows_.size(); ++i) {
    l.row_top.push_back(y);
    y += kDeviceBar + (l.host ? kSubBar + 4 : 0) + (measured_ && i == 0 ? kSubBar + 4 : 0) + kRowGap;
  }
  l.rows_bottom = y - kRowGap;
  return l;
}

void MemoryView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  segments_.clear();
  const QFontMetricsF metrics(font());
  if (!plan_) {
    p.drawText(rect(), Qt::AlignCenter, tr("No plan yet: the search is running, or the inputs are invalid."));
    return;
  }
  const Layout l = layout(metrics);
  QFont bold = font();
  bold.setBold(true);
  p.setFont(bold);
  const QFontMetricsF bold_metrics(bold);  // the title is elided in the font it is drawn in
  const QString title = tr("Memory per GPU: %1").arg(QString::fromStdString(planner::describe_plan(plan_->request)));
  p.drawText(QRectF(kMargin, kMargin, width() - 2 * kMargin, bold_metrics.height()), Qt::AlignLeft,
             bold_metrics.elidedText(title, Qt::ElideRight, width() - 2 * kMargin));
  p.setFont(font());

  // Axis with ticks in GiB (MiB for small runs), and a faint grid.
  const double axis_y = l.rows_top - 10;
  const double max_on_axis = l.bar_width / l.scale;
  const auto [step, unit] = byte_tick_step(max_on_axis);
  p.setPen(QColor(0, 0, 0, 140));
  p.drawLine(QPointF(l.bar_left, axis_y), QPointF(l.bar_left + l.bar_width, axis_y));
  const QColor grid = over(palette().color(QPalette::Base), Qt::black, 25);  // drawn on the background, before the bars
  const int grid_top = static_cast<int>(std::lround(axis_y));
  const int grid_height = static_cast<int>(std::lround(l.rows_bottom + 4)) - grid_top;
  for (double v = 0; v <= max_on_axis; v += step) {
    const double x = l.bar_left + v * l.scale;
    p.fillRect(QRect(pixel_column(x), grid_top, 1, grid_height), grid);
    p.setPen(QColor(0, 0, 0, 160));
    p.drawLine(QPointF(x, axis_y - 4), QPointF(x, axis_y));
    const double in_unit = v / (unit == QStringLiteral("GiB") ? double(1 << 30) : double(1 << 20));
    const QString label = v == 0 ? QStringLiteral("0") : QStringLiteral("%1 %2").arg(in_unit, 0, 'g', 4).arg(unit);
    p.drawText(QRectF(x - 50, axis_y - 8 - metrics.height(), 100, metrics.height()), Qt::AlignHCenter | Qt::AlignBottom, label);
  }

  auto bar = [&](const MemoryBreakdown& bytes, BarKind kind, size_t row, double y, double h) {
    double x = l.bar_left;
    for (MemoryCategory c : kAllMemoryCategories) {
      const int64_t b = kind == BarKind::host ? bytes[c].host : bytes[c].device;
      if (b <= 0) continue;
      const QRectF r(x, y, std::max(1.0, static_cast<double>(b) * l.scale), h);
      p.fillRect(r, category_qcolor(c));
      segments_.push_back(Segment{r, row, c, kind, b});
      x += static_cast<double>(b) * l.scale;
    }
    return x;
  };
  // Byte counts after the bars, drawn last on the background colour so that the capacity line does not cross them.
  struct BytesLabel {
    QRectF box;
    QString text;
    QColor colour;
  };
  std::vector<BytesLabel> bytes_labels;
  auto bytes_label = [&](const QString& text, double x, double y, double h, const QColor& colour) {
    bytes_labels.push_back({QRectF(x + 4, y, metrics.horizontalAdvance(text) + 4, h), text, colour});
  };
  auto sub_label = [&](const QString& text, double y) {
    p.setPen(QColor(0x55, 0x55, 0x55));
    p.drawText(QRectF(kMargin, y, l.label_width - 8, kSubBar), Qt::AlignRight | Qt::AlignVCenter, text);
  };
  for (size_t i = 0; i < rows_.size(); ++i) {
    const planner::RankMemory& row = rows_[i];
    double y = l.row_top[i];
    p.setPen(Qt::black);
    const QString label = QString::fromStdString(planner::row_label(row));
    p.drawText(QRectF(kMargin, y, l.label_width - 8, kDeviceBar), Qt::AlignLeft | Qt::AlignVCenter,
               l.labels_fit ? label : metrics.elidedText(label, Qt::ElideRight, l.label_width - 8));
    const double end = bar(row.bytes, BarKind::device, i, y, kDeviceBar);
    if (row.fits()) {
      bytes_label(bytes_text(row.device_total), end, y, kDeviceBar, QColor(Qt::black));
    } else {
      // What lies beyond the usable memory (capacity less headroom), hatched red, and by how much.
      const double limit_x = l.bar_left + static_cast<double>(row.device_total + row.margin) * l.scale;
      p.fillRect(QRectF(limit_x, y, std::max(1.0, end - limit_x), kDeviceBar), QBrush(kCapacityColor, Qt::BDiagPattern));
      bytes_label(tr("%1 · %2 over").arg(bytes_text(row.device_total), bytes_text(-row.margin)), end, y, kDeviceBar, kCapacityColor);
    }
    y += kDeviceBar + 4;
    if (l.host) {
      sub_label(tr("host"), y);
      const double host_end = bar(row.bytes, BarKind::host, i, y, kSubBar);
      if (row.host_total > 0) bytes_label(bytes_text(row.host_total) + tr(" host"), host_end, y, kSubBar, QColor(0x55, 0x55, 0x55));
      y += kSubBar + 4;
    }
    if (measured_ && i == 0) {
      sub_label(tr("measured"), y);
      const double measured_end = bar(*measured_, BarKind::measured, i, y, kSubBar);
      p.setPen(QPen(Qt::black, 1, Qt::DotLine));
      p.drawRect(QRectF(l.bar_left, y, measured_end - l.bar_left, kSubBar));
      bytes_label(bytes_text(measured_->device_total()) + tr(" measured"), measured_end, y, kSubBar, QColor(0x55, 0x55, 0x55));
    }
  }
  // The GPU's capacity: one dashed line across all rows, beneath the byte labels.
  const int64_t capacity = rows_.empty() ? 0 : rows_.front().gpu_capacity;
  p.setPen(kCapacityColor);
  if (l.capacity_on_scale && capacity > 0) {
    const double x = l.bar_left + static_cast<double>(capacity) * l.scale;
    dashed_column(p, x, l.rows_top - 6, l.rows_bottom + 6, 2, kCapacityColor);
    p.drawText(QRectF(x - 150, l.rows_bottom + 8, 300, metrics.height()), Qt::AlignHCenter, tr("GPU capacity %1").arg(bytes_text(capacity)));
  } else if (capacity > 0) {
    p.drawText(QRectF(l.bar_left, l.rows_bottom + 8, l.bar_width, metrics.height()), Qt::AlignRight,
               tr("GPU capacity %1 (off this scale)").arg(bytes_text(capacity)));
  }
  for (const BytesLabel& label : bytes_labels) {
    p.fillRect(label.box, palette().color(QPalette::Base));
    p.setPen(label.colour);
    p.drawText(label.box.adjusted(2, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter, label.text);
  }
  p.setPen(Qt::black);
  p.drawText(QRectF(kMargin, l.rows_bottom + 12 + metrics.height(), width() - 2 * kMargin, metrics.height()), Qt::AlignLeft,
             QString::fromStdString(planner::verdict_line(plan_->memory)));

  const double legend_top = l.rows_bottom + 28 + 2 * metrics.height();
  draw_legend(p, QRectF(kMargin, legend_top, width() - 2 * kMargin, height()), legend());
}

QString MemoryView::tooltip(const Segment& s) const {
  const planner::RankMemory& row = rows_[s.row];
  const QString where = s.kind == BarKind::host ? tr("host") : (s.kind == BarKind::measured ? tr("measured, device") : tr("device"));
  QString text = QStringLiteral("<b>%1</b> (%2)<br>%3<br>%4 = %5 bytes")
                     .arg(category_name(s.category), where, QString::fromStdString(planner::row_label(row)).toHtmlEscaped(), bytes_text(s.bytes),
                          QLocale().toString(static_cast<qlonglong>(s.bytes)));
  if (s.kind != BarKind::measured && model_) {
    text += QStringLiteral("<br><i>inputs</i><br>") + formula_inputs(s.category, row, *model_, plan_->request, plan_->memory);
  } else if (s.kind == BarKind::measured) {
    const int64_t predicted = row.bytes[s.category].device;
    text += tr("<br>predicted %1").arg(bytes_text(predicted));
  }
  return text;
}

bool MemoryView::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    const auto* help = static_cast<QHelpEvent*>(event);
    for (const Segment& s : segments_) {
      if (s.rect.contains(help->pos())) {
        QToolTip::showText(help->globalPos(), tooltip(s), this);
        return true;
      }
    }
    QToolTip::hideText();
    event->ignore();
    return true;
  }
  return QWidget::event(event);
}

}  // namespace tessera::gui
