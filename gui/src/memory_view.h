// Memory per rank: one stacked bar per distinct rank row (every category in
// its colour), the GPU's capacity as a dashed line, the host bar beneath when
// anything is offloaded, and the measured run's bar beneath the first row
// when one is open. Hovering a segment shows its bytes and its formula's inputs.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <QWidget>

#include "category_style.h"
#include "planner_session.h"

namespace tessera::gui {

class MemoryView : public QWidget {
  Q_OBJECT

 public:
  explicit MemoryView(QWidget* parent = nullptr);

  void setPlan(std::shared_ptr<const planner::Model> model, std::shared_ptr<const ShownPlan> plan);
  void clearPlan();
  // The measured run's first rank row, drawn under the first predicted row; none: hidden.
  void setMeasured(std::optional<MemoryBreakdown> measured);

  // What is drawn, for tests: the rank rows of the shown estimate.
  const std::vector<planner::RankMemory>& rows() const { return rows_; }
  const std::optional<MemoryBreakdown>& measured() const { return measured_; }

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;

 private:
  enum class BarKind { device, host, measured };
  struct Segment {
    QRectF rect;
    size_t row = 0;
    MemoryCategory category = MemoryCategory::parameters;
    BarKind kind = BarKind::device;
    int64_t bytes = 0;
  };
  struct Layout;
  Layout layout(const QFontMetricsF& metrics) const;
  QString tooltip(const Segment& segment) const;
  static std::vector<LegendEntry> legend();

  std::shared_ptr<const planner::Model> model_;
  std::shared_ptr<const ShownPlan> plan_;
  std::vector<planner::RankMemory> rows_;
  std::optional<MemoryBreakdown> measured_;
  std::vector<Segment> segments_;  // as last painted, for hover
};

}  // namespace tessera::gui
