// Two plans side by side as a table: the device bytes of each memory category
// on each plan's tightest rank, then the step time's components (compute,
// exposed communication, pipeline bubble, offload, optimizer), the step time
// and tokens/s, each with plan B − plan A. A difference that costs (more
// memory, more time, fewer tokens/s) is red, one that saves green.
#pragma once

#include <optional>
#include <vector>

#include <QAbstractTableModel>
#include <QString>

#include "tessera/planner/memory_model.h"
#include "tessera/planner/simulate.h"

namespace tessera::gui {

// What the comparison reads of one plan.
struct PlanFigures {
  QString label;                    // "1F1B · dp 2 × tp 4 × pp 2 ..."
  planner::RankMemory tightest;     // the rank row with the least margin
  planner::StepBreakdown step;
  double step_time_s = 0;
  double tokens_per_s = 0;
};

PlanFigures plan_figures(const QString& label, const planner::MemoryEstimate& memory, const planner::StepSimulation& simulation);

class PlanDifferenceModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { kQuantity, kPlanA, kPlanB, kDifference, kColumnCount };
  // The row's plain number for plan B − plan A (bytes, seconds or tokens/s), for tests.
  static constexpr int kDifferenceRole = Qt::UserRole;

  explicit PlanDifferenceModel(QObject* parent = nullptr);
  void setPlans(std::optional<PlanFigures> a, std::optional<PlanFigures> b);

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  enum class Unit { bytes, seconds, tokens_per_s };
  struct Row {
    QString quantity;
    Unit unit = Unit::bytes;
    double a = 0, b = 0;
    bool heading = false;  // "Memory on the tightest rank", "Step time"
  };
  static QString valueText(Unit unit, double value);
  static QString differenceText(const Row& row);

  std::vector<Row> rows_;
  QString label_a_, label_b_;
};

}  // namespace tessera::gui
