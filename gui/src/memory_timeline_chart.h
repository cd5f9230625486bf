// Bytes in use over one step on one rank row, as PyTorch's memory snapshot
// viewer draws a real one: every category stacked in its colour over the
// step's time, the GPU's capacity (and what the headroom leaves usable) as
// dashed lines, the peak marked, the stage's forward and backward passes in a
// strip under the time axis, and a measured run's peak as a dotted line.
// Hovering shows the bytes of every category at that moment.
#pragma once

#include <optional>
#include <vector>

#include <QWidget>

#include "tessera/planner/memory_timeline.h"
#include "tessera/planner/simulate.h"

namespace tessera::gui {

class MemoryTimelineChart : public QWidget {
  Q_OBJECT

 public:
  explicit MemoryTimelineChart(QWidget* parent = nullptr);

  // `passes`: the forward and backward events of the row's stage; `usable_bytes`: capacity less the headroom.
  void setTimeline(const planner::RankMemoryTimeline& timeline, std::vector<planner::TraceEvent> passes, int64_t capacity_bytes,
                   int64_t usable_bytes);
  void clearTimeline();
  void setMeasuredPeak(std::optional<int64_t> bytes);

  const std::optional<planner::RankMemoryTimeline>& timeline() const { return timeline_; }
  // "peak 61.23 GiB at 412.3 ms", as drawn beside the marker; empty without a timeline.
  QString peakText() const;

  QSize sizeHint() const override { return {900, 420}; }
  QSize minimumSizeHint() const override { return {420, 260}; }

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;

 private:
  struct Plot;
  Plot plot() const;
  void drawAreas(QPainter& painter, const Plot& plot) const;
  void drawAxes(QPainter& painter, const Plot& plot) const;
  void drawMarks(QPainter& painter, const Plot& plot) const;
  void drawPasses(QPainter& painter, const Plot& plot) const;
  QString tooltipAt(double x) const;

  std::optional<planner::RankMemoryTimeline> timeline_;
  std::vector<planner::TraceEvent> passes_;
  int64_t capacity_bytes_ = 0;
  int64_t usable_bytes_ = 0;
  std::optional<int64_t> measured_peak_;
};

}  // namespace tessera::gui
