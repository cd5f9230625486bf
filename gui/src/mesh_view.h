// The device mesh: nodes × GPUs as tiles, coloured by data-, tensor- or
// pipeline-parallel group (chosen above the mesh). Clicking a tile selects
// that rank: its three groups are outlined and the panel beside the mesh says
// what the rank holds (layers, shards, chunks, bytes).
#pragma once

#include <cstdint>
#include <optional>

#include <QFontMetricsF>
#include <QStringList>
#include <QWidget>

#include "planner_session.h"
#include "tessera/planner/cluster.h"
#include "tessera/planner/rank_groups.h"

class QComboBox;
class QLabel;

namespace tessera::gui {

class MeshCanvas;

// The first of `candidates` that fits `width` pixels in `metrics`, or empty when none does.
QString fitting_text(const QStringList& candidates, const QFontMetricsF& metrics, double width);

class MeshView : public QWidget {
  Q_OBJECT

 public:
  explicit MeshView(QWidget* parent = nullptr);

  void setPlan(const planner::ClusterSpec& cluster, std::shared_ptr<const ShownPlan> plan);
  void clearPlan();
  // Selects `rank` of the shown plan; false (and nothing changes) when there is no plan or no such rank.
  bool selectRank(int64_t rank);
  void setColouring(planner::MeshAxis axis);

  int64_t selectedRank() const { return selected_rank_; }
  // The selected rank's description, as shown beside the mesh.
  QString selectedRankText() const;
  // A tile's size as last painted, for tests.
  QSizeF tileSize() const;
  // The mesh itself, without the colouring control: what a report prints.
  QWidget* canvas() const;

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  void refresh();

  QComboBox* colouring_ = nullptr;
  MeshCanvas* canvas_ = nullptr;
  QLabel* details_ = nullptr;
  planner::ClusterSpec cluster_;
  std::shared_ptr<const ShownPlan> plan_;
  int64_t selected_rank_ = 0;
  // The rank's description is written into its rich-text label when the view
  // is shown, not on every change behind it (a twentieth of a millisecond each).
  bool details_stale_ = false;
};

}  // namespace tessera::gui
