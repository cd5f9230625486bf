// What every view draws the same way: the memory categories' colours (the
// planner's category_color, so the app and the HTML report agree), byte sizes
// in binary units, and a legend of coloured swatches.
#pragma once

#include <cstdint>
#include <vector>

#include <QColor>
#include <QPainter>
#include <QRectF>
#include <QString>

#include "tessera/planner/memory_categories.h"

namespace tessera::gui {

QColor category_qcolor(MemoryCategory category);
QString category_name(MemoryCategory category);

// "62.88 GiB", "676.8 MiB" (the planner's format_bytes).
QString bytes_text(int64_t bytes);

struct LegendEntry {
  QColor color;
  QString label;
  Qt::BrushStyle pattern = Qt::SolidPattern;  // hatched entries stand for idle time or padding
};

// Lays the entries out left to right, wrapping inside `area`; returns the height used.
double draw_legend(QPainter& painter, const QRectF& area, const std::vector<LegendEntry>& entries);
// Height draw_legend needs for `entries` at `width`, without drawing.
double legend_height(const QFontMetricsF& metrics, double width, const std::vector<LegendEntry>& entries);

}  // namespace tessera::gui
