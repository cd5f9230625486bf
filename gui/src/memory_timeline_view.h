// The "Memory over one step" view: a rank row chosen above the chart (the
// tightest at first), its bytes in use over the simulated step, and a line on
// what a measured run can show beside it.
#pragma once

#include <optional>
#include <vector>

#include <QWidget>

#include "planner_session.h"

class QComboBox;
class QLabel;

namespace tessera::gui {

class MemoryTimelineChart;

class MemoryTimelineView : public QWidget {
  Q_OBJECT

 public:
  explicit MemoryTimelineView(QWidget* parent = nullptr);

  // `timeline`: the plan's, one per rank row (PlannerSession::memoryTimeline).
  void setPlan(std::shared_ptr<const ShownPlan> shown, std::vector<planner::RankMemoryTimeline> timeline);
  void clearPlan();
  // The measured run's first rank row: its peak total as a line; metrics.json holds no timeline, the note says so.
  void setMeasured(std::optional<MemoryBreakdown> measured);

  QComboBox* rowChoice() const { return row_choice_; }
  MemoryTimelineChart* chart() const { return chart_; }
  QString measuredNote() const;

 private:
  void showRow(int row);

  QComboBox* row_choice_ = nullptr;
  MemoryTimelineChart* chart_ = nullptr;
  QLabel* measured_note_ = nullptr;
  std::shared_ptr<const ShownPlan> plan_;
  std::vector<planner::RankMemoryTimeline> timeline_;
};

}  // namespace tessera::gui
