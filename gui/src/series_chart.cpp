#include "series_chart.h"

#include <algorithm>
#include <cmath>

#include <QPainter>
#include <QPainterPath>

#include "chart_scales.h"

namespace tessera::gui {

namespace {

constexpr double kMargin = 10;

}  // namespace

SeriesChart::SeriesChart(QString title, QColor colour, QWidget* parent) : QWidget(parent), title_(std::move(title)), colour_(colour) {
  setBackgroundRole(QPalette::Base);
  setAutoFillBackground(true);
}

void SeriesChart::setSeries(std::vector<double> values, int first_step) {
  values_ = std::move(values);
  first_step_ = first_step;
  update();
}

void SeriesChart::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QFontMetricsF metrics(font());
  QFont bold = font();
  bold.setBold(true);
  p.setFont(bold);
  p.drawText(QRectF(kMargin, kMargin, width() - 2 * kMargin, metrics.height()), Qt::AlignLeft, title_);
  p.setFont(font());
  double low = INFINITY, high = -INFINITY;
  for (double v : values_) {
    if (!std::isfinite(v)) continue;
    low = std::min(low, v);
    high = std::max(high, v);
  }
  if (!std::isfinite(low)) {
    p.drawText(rect(), Qt::AlignCenter, tr("not recorded"));
    return;
  }
  if (high - low < 1e-12) high = low + std::max(1e-6, std::abs(low) * 0.1);  // a flat series still gets an axis
  const double step = tick_step(high - low, 6);
  low = std::floor(low / step) * step;
  high = std::ceil(high / step) * step;
  const double axis_width = metrics.horizontalAdvance(QStringLiteral("0.000e+00")) * 0.8;
  const QRectF plot(kMargin + axis_width, kMargin + metrics.height() + 8, width() - 2 * kMargin - axis_width,
                    height() - 2 * kMargin - 2 * metrics.height() - 14);
  const auto x_at = [&](size_t i) { return plot.left() + (values_.size() > 1 ? plot.width() * static_cast<double>(i) / static_cast<double>(values_.size() - 1) : plot.width() / 2); };
  const auto y_at = [&](double v) { return plot.bottom() - plot.height() * (v - low) / (high - low); };
  for (double v = low; v <= high + step / 2; v += step) {
    p.setPen(QColor(0, 0, 0, 30));
    p.drawLine(QPointF(plot.left(), y_at(v)), QPointF(plot.right(), y_at(v)));
    p.setPen(QColor(0, 0, 0, 170));
    p.drawText(QRectF(kMargin, y_at(v) - metrics.height() / 2, axis_width - 6, metrics.height()), Qt::AlignRight | Qt::AlignVCenter,
               QString::number(v, 'g', 4));
  }
  p.setPen(QColor(0, 0, 0, 160));
  p.drawLine(plot.bottomLeft(), plot.bottomRight());
  const int last_step = first_step_ + static_cast<int>(values_.size()) - 1;
  p.drawText(QRectF(plot.left(), plot.bottom() + 4, plot.width(), metrics.height()), Qt::AlignLeft, tr("step %1").arg(first_step_));
  p.drawText(QRectF(plot.left(), plot.bottom() + 4, plot.width(), metrics.height()), Qt::AlignRight, tr("step %1").arg(last_step));
  // The line, broken where a step has no value.
  QPainterPath line;
  bool drawing = false;
  for (size_t i = 0; i < values_.size(); ++i) {
    if (!std::isfinite(values_[i])) {
      drawing = false;
      continue;
    }
    const QPointF point(x_at(i), y_at(values_[i]));
    drawing ? line.lineTo(point) : line.moveTo(point);
    drawing = true;
  }
  p.setPen(QPen(colour_, 1.8));
  p.drawPath(line);
  // A dot per step while they are far enough apart to tell: a step between two gaps is seen too.
  if (values_.size() == 1 || plot.width() / static_cast<double>(values_.size() - 1) >= 6) {
    p.setBrush(colour_);
    for (size_t i = 0; i < values_.size(); ++i) {
      if (std::isfinite(values_[i])) p.drawEllipse(QPointF(x_at(i), y_at(values_[i])), 2.5, 2.5);
    }
  }
}

}  // namespace tessera::gui
