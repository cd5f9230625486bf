#include "chunk_view.h"

#include <cmath>

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

#include "category_style.h"

namespace tessera::gui {

namespace {

constexpr double kMargin = 12, kTileGap = 4, kOptimizerStrip = 0.3;
const QColor kPadding(0xC8, 0xC8, 0xC8);
const QColor kHypotheticalColour(0xA0, 0x50, 0x00);  // the banner over a map that is not the plan's

QString elements_text(int64_t n) {
  if (n >= int64_t{1} << 30) return QStringLiteral("%1 Gi").arg(static_cast<double>(n) / (int64_t{1} << 30), 0, 'g', 4);
  if (n >= 1 << 20) return QStringLiteral("%1 Mi").arg(static_cast<double>(n) / (1 << 20), 0, 'g', 4);
  if (n >= 1 << 10) return QStringLiteral("%1 Ki").arg(static_cast<double>(n) / (1 << 10), 0, 'g', 4);
  return QString::number(n);
}

QBrush placed(MemoryCategory category, MemorySpace space) {
  return QBrush(category_qcolor(category), space == MemorySpace::device ? Qt::SolidPattern : Qt::Dense4Pattern);
}

}  // namespace

ChunkView::ChunkView(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setBackgroundRole(QPalette::Base);
  setAutoFillBackground(true);
}

void ChunkView::setChunkMap(ChunkMap map) {
  map_ = std::move(map);
  update();
}

void ChunkView::clearChunkMap() {
  map_.reset();
  update();
}

void ChunkView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  tiles_.clear();
  const QFontMetricsF metrics(font());
  if (!map_ || map_->chunks.empty()) {
    p.drawText(rect(), Qt::AlignCenter, tr("No plan to show."));
    return;
  }
  const ChunkMap& m = *map_;
  const int64_t n = static_cast<int64_t>(m.chunks.size());
  double y = kMargin;
  const QStringList header = headerLines();
  for (qsizetype i = 0; i < header.size(); ++i) {
    // Wrapped, never cut: the first line says whose chunks these are.
    const bool banner = i == 0 && !m.plan_uses_chunks;
    QFont line_font = font();
    line_font.setBold(i == 0);
    p.setFont(line_font);
    p.setPen(banner ? kHypotheticalColour : palette().color(QPalette::Text));
    const QRectF line = p.boundingRect(QRectF(kMargin, y, width() - 2 * kMargin, 1e6), Qt::TextWordWrap, header[i]);
    p.drawText(QRectF(kMargin, y, width() - 2 * kMargin, line.height()), Qt::TextWordWrap, header[i]);
    y += line.height() + 2;
  }
  p.setFont(font());
  p.setPen(palette().color(QPalette::Text));
  header_bottom_ = y;
  const std::vector<LegendEntry> legend = {
      {category_qcolor(MemoryCategory::parameters), tr("parameters on GPU")},
      {category_qcolor(MemoryCategory::parameters), tr("parameters on host"), Qt::Dense4Pattern},
      {category_qcolor(MemoryCategory::optimizer_states), tr("optimizer states on GPU")},
      {category_qcolor(MemoryCategory::optimizer_states), tr("optimizer states on host"), Qt::Dense4Pattern},
      {kPadding, tr("padding"), Qt::BDiagPattern},
      {QColor(0x20, 0x20, 0x20), tr("kept gathered into backward (frame)")},
      {QColor(Qt::white), tr("white ticks: shard boundaries")}};
  const double legend_h = legend_height(metrics, width() - 2 * kMargin, legend);
  const QRectF area(kMargin, y + 8, width() - 2 * kMargin, height() - y - 8 - 2 * kMargin - legend_h);
  // Square-ish tiles filling the area, at most 140 px wide.
  const double cell = std::min(140.0, std::sqrt(area.width() * area.height() / static_cast<double>(n)));
  int64_t columns = std::max<int64_t>(1, static_cast<int64_t>(area.width() / cell));
  while (columns > 1 && static_cast<double>((n + columns - 1) / columns) * (area.width() / static_cast<double>(columns)) < area.height() * 0.8 &&
         area.width() / static_cast<double>(columns - 1) <= 140) {
    --columns;
  }
  const int64_t rows = (n + columns - 1) / columns;
  const double tile_w = area.width() / static_cast<double>(columns) - kTileGap;
  const double tile_h = std::min(tile_w * 0.7, area.height() / static_cast<double>(rows) - kTileGap);
  for (int64_t i = 0; i < n; ++i) {
    const planner::ChunkPlacement& c = m.chunks[static_cast<size_t>(i)];
    const QRectF tile(area.left() + static_cast<double>(i % columns) * (tile_w + kTileGap), area.top() + static_cast<double>(i / columns) * (tile_h + kTileGap),
                      tile_w, std::max(2.0, tile_h));
    tiles_.push_back(tile);
    const double used_w = tile.width() * static_cast<double>(c.used_elements) / static_cast<double>(c.used_elements + c.padding_elements);
    const double param_h = tile.height() * (1 - kOptimizerStrip);
    p.fillRect(tile, Qt::white);
    p.fillRect(QRectF(tile.left(), tile.top(), used_w, param_h), placed(MemoryCategory::parameters, c.parameters));
    p.fillRect(QRectF(tile.left() + used_w, tile.top(), tile.width() - used_w, param_h), QBrush(kPadding, Qt::BDiagPattern));
    p.fillRect(QRectF(tile.left(), tile.top() + param_h, tile.width(), tile.height() - param_h), placed(MemoryCategory::optimizer_states, c.optimizer_states));
    if (m.dp > 1 && tile.width() / static_cast<double>(m.dp) >= 3) {
      p.setPen(QPen(Qt::white, 1));
      for (int64_t s = 1; s < m.dp; ++s) {
        const double x = tile.left() + tile.width() * static_cast<double>(s) / static_cast<double>(m.dp);
        p.drawLine(QPointF(x, tile.top()), QPointF(x, tile.bottom()));
      }
    }
    p.setPen(c.kept_gathered ? QPen(QColor(0x20, 0x20, 0x20), 3) : QPen(QColor(0, 0, 0, 70), 1));
    p.drawRect(tile);
    if (tile.width() > metrics.horizontalAdvance(QStringLiteral("0000")) + 6 && param_h > metrics.height()) {
      p.setPen(Qt::white);
      p.drawText(QRectF(tile.left() + 3, tile.top() + 1, tile.width() - 6, param_h), Qt::AlignLeft | Qt::AlignTop, QString::number(i));
    }
  }
  draw_legend(p, QRectF(kMargin, height() - kMargin - legend_h, width() - 2 * kMargin, legend_h), legend);
}

QStringList ChunkView::headerLines() const {
  if (!map_ || map_->chunks.empty()) return {};
  const ChunkMap& m = *map_;
  double padded = 0;  // a tensor larger than chunk_size has a larger chunk of its own
  for (const planner::ChunkPlacement& c : m.chunks) padded += static_cast<double>(c.used_elements + c.padding_elements);
  QStringList header;
  if (m.plan_uses_chunks) {
    header << tr("Gemini chunks of %1").arg(QString::fromStdString(m.plan_description));
  } else {
    header << tr("Not this plan's layout: %1 does not use chunks. For comparison, the chunks Gemini would make of this model over dp %2:")
                  .arg(QString::fromStdString(m.plan_description))
                  .arg(m.dp);
  }
  header << tr("%1 chunks × %2 elements (%3 each) · padding %4 elements = %5 (%6% of the chunks)")
                .arg(m.chunks.size())
                .arg(elements_text(m.chunk_size))
                .arg(bytes_text(m.chunk_size * m.bytes_per_element))
                .arg(elements_text(m.waste_elements))
                .arg(bytes_text(m.waste_elements * m.bytes_per_element))
                .arg(100 * static_cast<double>(m.waste_elements) / padded, 0, 'f', 2);
  header << tr("each of the %1 data-parallel ranks owns 1/%1 of every chunk (%2) · placement: %3")
                .arg(m.dp)
                .arg(bytes_text(m.chunk_size / m.dp * m.bytes_per_element))
                .arg(QString::fromStdString(m.placement));
  return header;
}

QString ChunkView::tooltip(size_t index) const {
  const ChunkMap& m = *map_;
  const planner::ChunkPlacement& c = m.chunks[index];
  const std::vector<std::string>& names = m.tensors[index];
  QStringList tensors;
  for (size_t i = 0; i < names.size() && i < 6; ++i) tensors << QString::fromStdString(names[i]).toHtmlEscaped();
  if (names.size() > 6) tensors << tr("… %1 more").arg(names.size() - 6);
  QStringList owners;
  for (int64_t rank = 0; rank < m.dp && rank < 8; ++rank) {
    owners << tr("rank %1: elements %2–%3").arg(rank).arg(elements_text(rank * c.shard_elements)).arg(elements_text((rank + 1) * c.shard_elements));
  }
  if (m.dp > 8) owners << tr("… one shard for each of the %1 ranks").arg(m.dp);
  const auto where = [](MemorySpace s) { return s == MemorySpace::device ? tr("GPU") : tr("host"); };
  return tr("<b>chunk %1</b>: %2 of %3 elements used, padding %4<br>parameters on %5, optimizer states on %6<br>%7<br><i>tensors</i><br>%8")
      .arg(index)
      .arg(elements_text(c.used_elements), elements_text(c.used_elements + c.padding_elements), elements_text(c.padding_elements), where(c.parameters), where(c.optimizer_states),
           owners.join(QStringLiteral("<br>")) + (c.kept_gathered ? tr("<br>stays gathered from forward to backward (shard_param_frac)") : QString()),
           tensors.join(QStringLiteral("<br>")));
}

bool ChunkView::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip && map_) {
    const auto* help = static_cast<QHelpEvent*>(event);
    for (size_t i = 0; i < tiles_.size(); ++i) {
      if (tiles_[i].contains(help->pos())) {
        QToolTip::showText(help->globalPos(), tooltip(i), this);
        return true;
      }
    }
    QToolTip::hideText();
    return true;
  }
  return QWidget::event(event);
}

}  // namespace tessera::gui
