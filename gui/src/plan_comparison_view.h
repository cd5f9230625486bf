// The "Compare plans" view: two plans side by side, A and B each chosen from
// the plan in view and the ranked plans (A: the plan in view, B: the best
// other plan at first), their memory per category and step-time components
// and B − A (plan_difference_model.h).
#pragma once

#include <memory>
#include <optional>

#include <QWidget>

#include "plan_difference_model.h"
#include "planner_session.h"

class QComboBox;
class QTableView;

namespace tessera::gui {

class PlanComparisonView : public QWidget {
  Q_OBJECT

 public:
  explicit PlanComparisonView(QWidget* parent = nullptr);

  // The plans to choose from; a choice whose plan is still offered stays.
  void setPlans(const std::shared_ptr<const ShownPlan>& shown, std::shared_ptr<const planner::PlanSearchResult> result);

  // Fills the choices with the plans last given, where they changed since. A hidden view
  // waits until it is shown or printed: thousands of ranked plans would slow every control change.
  void updateChoices();

  QComboBox* planA() const { return plan_a_; }
  QComboBox* planB() const { return plan_b_; }
  PlanDifferenceModel* differenceModel() const { return model_; }
  QTableView* table() const { return table_; }

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  void compare();
  // Choice `index` of the combo boxes: 0 is the plan in view (when there is one), then the ranked plans.
  std::optional<PlanFigures> figuresOf(int index) const;

  QComboBox* plan_a_ = nullptr;
  QComboBox* plan_b_ = nullptr;
  PlanDifferenceModel* model_ = nullptr;
  QTableView* table_ = nullptr;
  // The plan in view as the comparison reads it (not the whole plan: its events stay out of every control change).
  std::optional<PlanFigures> shown_;
  QString shown_description_;
  std::shared_ptr<const planner::PlanSearchResult> result_;
  bool choices_stale_ = false;
};

}  // namespace tessera::gui
