#include "memory_timeline_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "category_style.h"
#include "memory_timeline_chart.h"
#include "tessera/planner/report.h"

namespace tessera::gui {

MemoryTimelineView::MemoryTimelineView(QWidget* parent) : QWidget(parent) {
  row_choice_ = new QComboBox;
  row_choice_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  chart_ = new MemoryTimelineChart;
  measured_note_ = new QLabel;
  measured_note_->setWordWrap(true);
  measured_note_->setVisible(false);
  auto* choice_line = new QHBoxLayout;
  choice_line->addWidget(new QLabel(tr("Bytes in use over one step on")));
  choice_line->addWidget(row_choice_);
  choice_line->addStretch(1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(choice_line);
  layout->addWidget(chart_, 1);
  layout->addWidget(measured_note_);
  connect(row_choice_, &QComboBox::currentIndexChanged, this, &MemoryTimelineView::showRow);
}

void MemoryTimelineView::setPlan(std::shared_ptr<const ShownPlan> shown, std::vector<planner::RankMemoryTimeline> timeline) {
  const bool same_rows = plan_ && plan_->memory.ranks.size() == shown->memory.ranks.size();
  const int kept = row_choice_->currentIndex();
  plan_ = std::move(shown);
  const ShownPlan& plan = *plan_;
  timeline_ = std::move(timeline);
  const QSignalBlocker blocker(row_choice_);
  row_choice_->clear();
  for (const planner::RankMemory& row : plan.memory.ranks) row_choice_->addItem(QString::fromStdString(planner::row_label(row)));
  // The tightest row first; the one chosen stays while the plan keeps its rows.
  const auto tightest = static_cast<int>(&plan.memory.tightest() - plan.memory.ranks.data());
  row_choice_->setCurrentIndex(same_rows && kept >= 0 ? kept : tightest);
  showRow(row_choice_->currentIndex());
}

void MemoryTimelineView::clearPlan() {
  plan_.reset();
  timeline_.clear();
  const QSignalBlocker blocker(row_choice_);
  row_choice_->clear();
  chart_->clearTimeline();
}

void MemoryTimelineView::showRow(int row) {
  if (!plan_ || row < 0 || row >= static_cast<int>(timeline_.size())) return;
  const planner::RankMemoryTimeline& timeline = timeline_[static_cast<size_t>(row)];
  std::vector<planner::TraceEvent> passes;
  for (const planner::TraceEvent& e : plan_->events()) {
    if (e.lane == 2 * timeline.stage && e.micro_batch >= 0) passes.push_back(e);
  }
  const planner::RankMemory& rank = plan_->memory.ranks[static_cast<size_t>(row)];
  chart_->setTimeline(timeline, std::move(passes), rank.gpu_capacity, rank.gpu_capacity - rank.headroom);
}

void MemoryTimelineView::setMeasured(std::optional<MemoryBreakdown> measured) {
  chart_->setMeasuredPeak(measured ? std::optional<int64_t>(measured->device_total()) : std::nullopt);
  measured_note_->setVisible(measured.has_value());
  if (measured) {
    // Tessera's engine books its buffers before the first step and holds them (its ledger does not move
    // during a step), so metrics.json has no course over the step to draw: it keeps each category's peak.
    measured_note_->setText(tr("The measured run's metrics.json holds each category's peak on every rank, not their course over the step "
                               "(the engine allocates its buffers before the first step and holds them): rank 0's peak, %1, is the "
                               "dotted line. The memory view sets its categories beside the prediction.")
                                .arg(bytes_text(measured->device_total())));
  }
}

QString MemoryTimelineView::measuredNote() const { return measured_note_->isVisible() ? measured_note_->text() : QString(); }

}  // namespace tessera::gui
