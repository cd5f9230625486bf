#include "plan_comparison_view.h"

#include <QComboBox>
#include <QFormLayout>
#include <QHeaderView>
#include <QTableView>
#include <QVBoxLayout>

#include "plan_difference_model.h"

namespace tessera::gui {

namespace {

QString plan_text(const planner::EstimateRequest& request) { return QString::fromStdString(planner::describe_plan(request)); }

// The combo box's entry showing `text`, or -1.
int entry_of(const QComboBox& box, const QString& text) { return text.isEmpty() ? -1 : box.findText(text); }

}  // namespace

PlanComparisonView::PlanComparisonView(QWidget* parent) : QWidget(parent) {
  plan_a_ = new QComboBox;
  plan_b_ = new QComboBox;
  for (QComboBox* box : {plan_a_, plan_b_}) {
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    box->setMinimumContentsLength(40);
    connect(box, &QComboBox::currentIndexChanged, this, &PlanComparisonView::compare);
  }
  model_ = new PlanDifferenceModel(this);
  table_ = new QTableView;
  table_->setModel(model_);
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->horizontalHeader()->setSectionResizeMode(PlanDifferenceModel::kQuantity, QHeaderView::ResizeToContents);
  table_->setSelectionMode(QAbstractItemView::NoSelection);
  table_->setWordWrap(false);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 8);
  auto* choices = new QFormLayout;
  choices->addRow(tr("Plan A"), plan_a_);
  choices->addRow(tr("Plan B"), plan_b_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(choices);
  layout->addWidget(table_, 1);
}

void PlanComparisonView::setPlans(const std::shared_ptr<const ShownPlan>& shown, std::shared_ptr<const planner::PlanSearchResult> result) {
  shown_ = shown ? std::optional<PlanFigures>(plan_figures(QString(), shown->memory, shown->simulation)) : std::nullopt;
  shown_description_ = shown ? plan_text(shown->request) : QString();
  result_ = std::move(result);
  choices_stale_ = true;
  if (isVisible()) updateChoices();
}

void PlanComparisonView::showEvent(QShowEvent* event) {
  updateChoices();
  QWidget::showEvent(event);
}

void PlanComparisonView::updateChoices() {
  if (!choices_stale_) return;
  choices_stale_ = false;
  const QString chosen_a = plan_a_->currentIndex() > 0 ? plan_a_->currentText() : QString();
  const QString chosen_b = plan_b_->currentText();
  QStringList entries;
  if (shown_) entries << tr("the plan in view: %1").arg(shown_description_);
  if (result_) {
    for (size_t i = 0; i < result_->plans.size(); ++i) entries << QStringLiteral("#%1 %2").arg(i + 1).arg(plan_text(result_->plans[i].request));
  }
  {
    const QSignalBlocker block_a(plan_a_), block_b(plan_b_);
    plan_a_->clear();
    plan_b_->clear();
    plan_a_->addItems(entries);
    plan_b_->addItems(entries);
    plan_a_->setCurrentIndex(std::max(0, entry_of(*plan_a_, chosen_a)));
    int b = entry_of(*plan_b_, chosen_b);
    if (b < 0 || b == plan_a_->currentIndex()) {
      // The best ranked plan that is not plan A.
      const QString a_plan = shown_ && plan_a_->currentIndex() == 0 ? shown_description_ : QString();
      b = -1;
      for (int i = shown_ ? 1 : 0; i < plan_b_->count() && b < 0; ++i) {
        if (i != plan_a_->currentIndex() && !plan_b_->itemText(i).endsWith(QStringLiteral(" ") + a_plan)) b = i;
      }
    }
    plan_b_->setCurrentIndex(b);
  }
  compare();
}

std::optional<PlanFigures> PlanComparisonView::figuresOf(int index) const {
  if (index < 0) return std::nullopt;
  if (shown_ && index == 0) {
    PlanFigures figures = *shown_;
    figures.label = plan_a_->itemText(0);
    return figures;
  }
  const size_t ranked = static_cast<size_t>(index - (shown_ ? 1 : 0));
  if (!result_ || ranked >= result_->plans.size()) return std::nullopt;
  const planner::Candidate& plan = result_->plans[ranked];
  return plan_figures(plan_a_->itemText(index), plan.memory, plan.simulation);
}

void PlanComparisonView::compare() {
  model_->setPlans(figuresOf(plan_a_->currentIndex()), figuresOf(plan_b_->currentIndex()));
}

}  // namespace tessera::gui
