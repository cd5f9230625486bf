#include "mesh_view.h"

#include <functional>

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QVBoxLayout>

#include "category_style.h"
#include "group_colours.h"
#include "plan_labels.h"
#include "tessera/planner/report.h"

namespace tessera::gui {

using planner::MeshAxis;
using planner::ParallelLayout;

namespace {

constexpr double kMargin = 12;
// Beyond this many ranks the mesh is a compact grid: tiles close together, nodes told apart by a gap, no node boxes or titles.
constexpr int64_t kMaxBoxedRanks = 128;

struct Spacing {
  double node_gap, tile_gap, node_pad, node_title;
};
constexpr Spacing kBoxed{14, 4, 6, 18}, kCompact{4, 1, 0, 0};

// Pastel colours far apart for consecutive groups (golden-angle hues).
Qt::PenStyle outline_of(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::tensor: return Qt::SolidLine;
    case MeshAxis::data: return Qt::DashLine;
    case MeshAxis::pipeline: return Qt::DotLine;
    case MeshAxis::context: return Qt::DashDotLine;
  }
  return Qt::SolidLine;
}

QString rank_list(const std::vector<int64_t>& ranks) {
  QStringList parts;
  for (size_t i = 0; i < ranks.size() && i < 12; ++i) parts << QString::number(ranks[i]);
  if (ranks.size() > 12) parts << QStringLiteral("… %1").arg(ranks.back());
  return QStringLiteral("{%1} (%2 %3)").arg(parts.join(QStringLiteral(", "))).arg(ranks.size()).arg(ranks.size() == 1 ? "rank" : "ranks");
}

}  // namespace

QString fitting_text(const QStringList& candidates, const QFontMetricsF& metrics, double width) {
  for (const QString& text : candidates) {
    if (metrics.horizontalAdvance(text) <= width) return text;
  }
  return {};
}

// The tiles; MeshView owns the data and tells it what to draw.
class MeshCanvas : public QWidget {
 public:
  explicit MeshCanvas(QWidget* parent) : QWidget(parent) {
    setMinimumSize(320, 240);
    setBackgroundRole(QPalette::Base);
    setAutoFillBackground(true);
  }
  int64_t nodes = 0, gpus_per_node = 0;
  std::optional<ParallelLayout> layout;
  MeshAxis colouring = MeshAxis::data;
  int64_t selected = 0;
  std::function<void(int64_t)> on_select;
  QSizeF tile_size;  // as last painted

 protected:
  void paintEvent(QPaintEvent*) override;
  void mousePressEvent(QMouseEvent* event) override {
    for (size_t i = 0; i < tiles_.size(); ++i) {
      if (tiles_[i].contains(event->position()) && on_select) on_select(static_cast<int64_t>(i));
    }
  }

 private:
  std::vector<QRectF> tiles_;  // by rank, as last painted
};

void MeshCanvas::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  tiles_.clear();
  const QFontMetricsF metrics(font());
  if (!layout || nodes <= 0) {
    p.drawText(rect(), Qt::AlignCenter, tr("No plan to show."));
    return;
  }
  const int64_t groups = layout->world_size() / (colouring == MeshAxis::tensor ? layout->tp : colouring == MeshAxis::data ? layout->dp : layout->pp);
  std::vector<LegendEntry> legend = group_legend(QString::fromLatin1(enum_name(colouring).data()), groups);
  for (MeshAxis axis : {MeshAxis::tensor, MeshAxis::data, MeshAxis::pipeline}) {
    legend.push_back({QColor(Qt::white), tr("%1 group of the selected rank (%2 outline)")
                                             .arg(QString::fromLatin1(enum_name(axis).data()),
                                                  axis == MeshAxis::tensor ? tr("solid") : axis == MeshAxis::data ? tr("dashed") : tr("dotted"))});
  }
  const double legend_h = legend_height(metrics, width() - 2 * kMargin, legend);
  const QRectF area(kMargin, kMargin, width() - 2 * kMargin, height() - 3 * kMargin - legend_h);
  const bool compact = nodes * gpus_per_node > kMaxBoxedRanks;
  const Spacing sp = compact ? kCompact : kBoxed;
  // Node boxes in a grid: pick the column count that gives the largest tiles.
  double best_tile = 0;
  int64_t node_columns = 1;
  for (int64_t columns = 1; columns <= nodes; ++columns) {
    const int64_t rows = (nodes + columns - 1) / columns;
    const double box_w = (area.width() - sp.node_gap * static_cast<double>(columns - 1)) / static_cast<double>(columns);
    const double box_h = (area.height() - sp.node_gap * static_cast<double>(rows - 1)) / static_cast<double>(rows);
    const double tile_w = (box_w - 2 * sp.node_pad - sp.tile_gap * static_cast<double>(gpus_per_node - 1)) / static_cast<double>(gpus_per_node);
    const double tile = std::min(tile_w, std::min(box_h - sp.node_title - 2 * sp.node_pad, tile_w * 0.75));
    if (tile > best_tile) {
      best_tile = tile;
      node_columns = columns;
    }
  }
  const double tile_w = best_tile > 0 ? std::min(best_tile / 0.75, 120.0) : 1, tile_h = best_tile > 0 ? std::min(best_tile, 90.0) : 1;
  tile_size = QSizeF(tile_w, tile_h);
  const double box_w = 2 * sp.node_pad + static_cast<double>(gpus_per_node) * tile_w + sp.tile_gap * static_cast<double>(gpus_per_node - 1);
  const double box_h = sp.node_title + 2 * sp.node_pad + tile_h;
  QFont small = font();
  small.setPointSizeF(std::max(6.0, font().pointSizeF() * 0.85));
  const QFontMetricsF small_metrics(small);
  for (int64_t node = 0; node < nodes; ++node) {
    const double x0 = area.left() + static_cast<double>(node % node_columns) * (box_w + sp.node_gap);
    const double y0 = area.top() + static_cast<double>(node / node_columns) * (box_h + sp.node_gap);
    if (!compact) {
      p.setPen(QColor(0, 0, 0, 80));
      p.setBrush(QColor(0xF4, 0xF4, 0xF4));
      p.drawRoundedRect(QRectF(x0, y0, box_w, box_h), 5, 5);
      const QString title = fitting_text({tr("node %1").arg(node), QString::number(node)}, metrics, box_w - 2 * sp.node_pad);
      if (!title.isEmpty() && metrics.height() < sp.node_title + 2) {
        p.setPen(QColor(0x44, 0x44, 0x44));
        p.drawText(QRectF(x0 + sp.node_pad, y0 + 2, box_w - 2 * sp.node_pad, sp.node_title), Qt::AlignLeft | Qt::AlignVCenter, title);
      }
    }
    for (int64_t g = 0; g < gpus_per_node; ++g) {
      const int64_t rank = node * gpus_per_node + g;
      const QRectF tile(x0 + sp.node_pad + static_cast<double>(g) * (tile_w + sp.tile_gap), y0 + sp.node_title + sp.node_pad, tile_w, tile_h);
      tiles_.push_back(tile);
      p.setPen(Qt::NoPen);
      p.setBrush(group_colour(planner::group_index(*layout, rank, colouring), groups));
      p.drawRoundedRect(tile, compact ? 1 : 3, compact ? 1 : 3);
    }
  }
  // The selected rank's groups, outlined (inside the tile where it is large enough to nest three outlines); the rank itself in bold.
  p.setBrush(Qt::NoBrush);
  for (MeshAxis axis : {MeshAxis::tensor, MeshAxis::data, MeshAxis::pipeline}) {
    p.setPen(QPen(QColor(0x20, 0x20, 0x20), compact ? 1 : 2, outline_of(axis)));
    const double inset = compact ? 0 : axis == MeshAxis::tensor ? 1.5 : axis == MeshAxis::data ? 4 : 6.5;
    for (int64_t member : planner::group_members(*layout, selected, axis)) {
      if (member != selected) p.drawRoundedRect(tiles_[static_cast<size_t>(member)].adjusted(inset, inset, -inset, -inset), 2, 2);
    }
  }
  p.setPen(QPen(Qt::black, compact ? 2 : 4));
  p.drawRoundedRect(tiles_[static_cast<size_t>(selected)], 2, 2);
  // The labels last, each on a patch of its tile's colour, so that no outline crosses a number.
  for (int64_t rank = 0; rank < static_cast<int64_t>(tiles_.size()) && tile_h >= metrics.height() + 4; ++rank) {
    const QRectF& tile = tiles_[static_cast<size_t>(rank)];
    // "rank 12", else "12", else nothing: never a clipped label.
    const double text_w = tile_w - 4;
    const bool two_lines = tile_h >= 2.2 * metrics.height();
    const QString label = fitting_text({tr("rank %1").arg(rank), QString::number(rank)}, metrics, text_w);
    if (label.isEmpty()) continue;
    const planner::RankCoordinates c = planner::rank_coordinates(*layout, rank);
    const QString coordinates = two_lines ? fitting_text({tr("t%1 d%2 p%3").arg(c.tp_rank).arg(c.dp_rank).arg(c.pp_rank)}, small_metrics, text_w) : QString();
    const QRectF label_box = tile.adjusted(2, 2, -2, coordinates.isEmpty() ? -2 : -tile_h / 2);
    const QColor colour = group_colour(planner::group_index(*layout, rank, colouring), groups);
    p.fillRect(metrics.boundingRect(label_box, Qt::AlignCenter, label).adjusted(-1, 0, 1, 0), colour);
    p.setPen(Qt::black);
    p.setFont(font());
    p.drawText(label_box, Qt::AlignCenter, label);
    if (!coordinates.isEmpty()) {
      p.setFont(small);
      const QRectF coordinates_box = tile.adjusted(2, tile_h / 2, -2, -2);
      p.fillRect(small_metrics.boundingRect(coordinates_box, Qt::AlignHCenter | Qt::AlignTop, coordinates).adjusted(-1, 0, 1, 0), colour);
      p.drawText(coordinates_box, Qt::AlignHCenter | Qt::AlignTop, coordinates);
      p.setFont(font());
    }
  }
  draw_legend(p, QRectF(kMargin, height() - kMargin - legend_h, width() - 2 * kMargin, legend_h), legend);
}

MeshView::MeshView(QWidget* parent) : QWidget(parent) {
  colouring_ = new QComboBox(this);
  for (MeshAxis axis : {MeshAxis::data, MeshAxis::tensor, MeshAxis::pipeline}) {
    colouring_->addItem(tr("colour by %1-parallel group").arg(QString::fromLatin1(enum_name(axis).data())), static_cast<int>(axis));
  }
  canvas_ = new MeshCanvas(this);
  canvas_->on_select = [this](int64_t rank) { selectRank(rank); };
  details_ = new QLabel(this);
  details_->setWordWrap(true);
  details_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  details_->setMinimumWidth(260);
  details_->setMaximumWidth(360);
  auto* left = new QVBoxLayout;
  left->addWidget(colouring_, 0, Qt::AlignLeft);
  left->addWidget(canvas_, 1);
  auto* row = new QHBoxLayout(this);
  row->addLayout(left, 1);
  row->addWidget(details_);
  connect(colouring_, &QComboBox::currentIndexChanged, this, [this] {
    canvas_->colouring = static_cast<MeshAxis>(colouring_->currentData().toInt());
    canvas_->update();
  });
}

void MeshView::setPlan(const planner::ClusterSpec& cluster, std::shared_ptr<const ShownPlan> plan) {
  cluster_ = cluster;
  plan_ = std::move(plan);
  if (selected_rank_ >= plan_->request.layout.world_size()) selected_rank_ = 0;
  refresh();
}

void MeshView::clearPlan() {
  plan_.reset();
  refresh();
}

bool MeshView::selectRank(int64_t rank) {
  if (!plan_ || rank < 0 || rank >= plan_->request.layout.world_size()) return false;
  selected_rank_ = rank;
  refresh();
  return true;
}

QSizeF MeshView::tileSize() const { return canvas_->tile_size; }

void MeshView::setColouring(MeshAxis axis) { colouring_->setCurrentIndex(colouring_->findData(static_cast<int>(axis))); }

void MeshView::refresh() {
  canvas_->layout = plan_ ? std::optional<ParallelLayout>(plan_->request.layout) : std::nullopt;
  // The plan's ranks fill the cluster's nodes in order (a smaller plan fills the first).
  const int64_t world = plan_ ? plan_->request.layout.world_size() : 0;
  canvas_->gpus_per_node = std::min(cluster_.gpus_per_node, std::max<int64_t>(world, 1));
  canvas_->nodes = plan_ ? (world + canvas_->gpus_per_node - 1) / canvas_->gpus_per_node : 0;
  canvas_->selected = selected_rank_;
  canvas_->update();
  details_stale_ = !isVisible();
  if (!details_stale_) details_->setText(selectedRankText());
}

void MeshView::showEvent(QShowEvent* event) {
  if (details_stale_) details_->setText(selectedRankText());
  details_stale_ = false;
  QWidget::showEvent(event);
}

QString MeshView::selectedRankText() const {
  if (!plan_) return {};
  const planner::EstimateRequest& r = plan_->request;
  const ParallelLayout& l = r.layout;
  const int64_t rank = selected_rank_;
  const planner::RankCoordinates c = planner::rank_coordinates(l, rank);
  QString text = tr("<b>Rank %1</b> — node %2, GPU %3<br>tp rank %4 of %5 · dp rank %6 of %7 · stage %8 of %9")
                     .arg(rank)
                     .arg(rank / cluster_.gpus_per_node)
                     .arg(rank % cluster_.gpus_per_node)
                     .arg(c.tp_rank)
                     .arg(l.tp)
                     .arg(c.dp_rank)
                     .arg(l.dp)
                     .arg(c.pp_rank)
                     .arg(l.pp);
  for (const planner::RankMemory& row : plan_->memory.ranks) {
    if (c.pp_rank < row.first_stage || c.pp_rank > row.last_stage) continue;
    text += tr("<br><br><b>Holds</b>: %1").arg(QString::fromStdString(planner::row_label(row)).toHtmlEscaped());
    text += tr("<br>device %1 of %2 (margin %3)").arg(bytes_text(row.device_total), bytes_text(row.gpu_capacity), bytes_text(row.margin));
    if (row.host_total > 0) text += tr("<br>host %1").arg(bytes_text(row.host_total));
  }
  text += tr("<br><br><b>Shards</b>");
  if (l.tp > 1) text += tr("<br>1/%1 of every split weight and activation (tensor parallel)").arg(l.tp);
  const int zero = zero_stage_of(r);
  if (zero >= 1 && l.dp > 1) {
    const QString states = zero == 1 ? tr("optimizer states and master weights") : zero == 2 ? tr("optimizer states, master weights and gradients") : tr("model states");
    text += tr("<br>ZeRO-%1: shard %2 of %3 of the %4").arg(zero).arg(c.dp_rank).arg(l.dp).arg(states);
  } else if (l.dp > 1) {
    text += tr("<br>model states replicated over the %1 data-parallel ranks").arg(l.dp);
  } else {
    text += tr("<br>one data-parallel rank: no model states sharded over data parallelism");
  }
  if (plan_->memory.gemini) {
    const planner::GeminiSummary& g = *plan_->memory.gemini;
    text += tr("<br>Gemini: shard %1 of each of %2 chunks (%3 elements each)").arg(c.dp_rank).arg(g.num_chunks).arg(g.chunk_size / l.dp);
  }
  text += tr("<br><br><b>Groups</b><br>tensor %1<br>data %2<br>pipeline %3")
              .arg(rank_list(planner::group_members(l, rank, MeshAxis::tensor)), rank_list(planner::group_members(l, rank, MeshAxis::data)),
                   rank_list(planner::group_members(l, rank, MeshAxis::pipeline)));
  return text;
}

QWidget* MeshView::canvas() const { return canvas_; }

}  // namespace tessera::gui
