#include "category_style.h"

#include <QFontMetricsF>

#include "tessera/planner/report.h"

namespace tessera::gui {

QColor category_qcolor(MemoryCategory category) {
  const std::string_view hex = category_color(category);
  return QColor(QString::fromLatin1(hex.data(), static_cast<qsizetype>(hex.size())));
}

QString category_name(MemoryCategory category) {
  const std::string_view name = to_string(category);
  return QString::fromLatin1(name.data(), static_cast<qsizetype>(name.size()));
}

QString bytes_text(int64_t bytes) { return QString::fromStdString(planner::format_bytes(bytes)); }

namespace {

constexpr double kSwatch = 12, kSwatchGap = 5, kEntryGap = 16, kLineGap = 6;

// Calls place(entry, x, y) for each entry as the legend wraps; returns the height used.
template <typename Place>
double layout_legend(const QFontMetricsF& metrics, const QRectF& area, const std::vector<LegendEntry>& entries, Place place) {
  const double line = std::max(kSwatch, metrics.height());
  double x = area.left(), y = area.top();
  for (const LegendEntry& entry : entries) {
    const double width = kSwatch + kSwatchGap + metrics.horizontalAdvance(entry.label);
    if (x > area.left() && x + width > area.right()) {
      x = area.left();
      y += line + kLineGap;
    }
    place(entry, x, y, line);
    x += width + kEntryGap;
  }
  return entries.empty() ? 0 : y - area.top() + line;
}

}  // namespace

double draw_legend(QPainter& painter, const QRectF& area, const std::vector<LegendEntry>& entries) {
  const QFontMetricsF metrics(painter.font());
  return layout_legend(metrics, area, entries, [&](const LegendEntry& entry, double x, double y, double line) {
    const QRectF swatch(x, y + (line - kSwatch) / 2, kSwatch, kSwatch);
    painter.fillRect(swatch, Qt::white);
    painter.fillRect(swatch, QBrush(entry.color, entry.pattern));
    painter.setPen(QColor(0, 0, 0, 90));
    painter.setBrush(Qt::NoBrush);  // an outline only, whatever brush the caller left
    painter.drawRect(swatch);
    painter.setPen(Qt::black);
    painter.drawText(QRectF(x + kSwatch + kSwatchGap, y, area.width(), line), Qt::AlignLeft | Qt::AlignVCenter, entry.label);
  });
}

double legend_height(const QFontMetricsF& metrics, double width, const std::vector<LegendEntry>& entries) {
  return layout_legend(metrics, QRectF(0, 0, width, 1e9), entries, [](const LegendEntry&, double, double, double) {});
}

}  // namespace tessera::gui
