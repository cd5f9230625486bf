#include "plan_difference_model.h"

#include <cmath>

#include <QBrush>
#include <QFont>
#include <QLocale>

#include "category_style.h"
#include "plan_labels.h"

namespace tessera::gui {

PlanFigures plan_figures(const QString& label, const planner::MemoryEstimate& memory, const planner::StepSimulation& simulation) {
  return PlanFigures{label, memory.tightest(), simulation.breakdown, simulation.step_time_s, simulation.tokens_per_s};
}

PlanDifferenceModel::PlanDifferenceModel(QObject* parent) : QAbstractTableModel(parent) {}

void PlanDifferenceModel::setPlans(std::optional<PlanFigures> a, std::optional<PlanFigures> b) {
  beginResetModel();
  rows_.clear();
  label_a_ = a ? a->label : QString();
  label_b_ = b ? b->label : QString();
  if (a && b) {
    rows_.push_back({tr("Memory on the tightest rank"), Unit::bytes, 0, 0, true});
    for (MemoryCategory c : kAllMemoryCategories) {
      const auto bytes_a = a->tightest.bytes[c].device, bytes_b = b->tightest.bytes[c].device;
      if (bytes_a == 0 && bytes_b == 0) continue;
      rows_.push_back({category_name(c), Unit::bytes, static_cast<double>(bytes_a), static_cast<double>(bytes_b)});
    }
    rows_.push_back({tr("device total"), Unit::bytes, static_cast<double>(a->tightest.device_total), static_cast<double>(b->tightest.device_total)});
    rows_.push_back({tr("Step time"), Unit::seconds, 0, 0, true});
    const auto compute = [](const PlanFigures& p) { return p.step.forward_s + p.step.backward_s + p.step.recompute_s; };
    rows_.push_back({tr("compute (forward, backward, recompute)"), Unit::seconds, compute(*a), compute(*b)});
    rows_.push_back({tr("exposed communication"), Unit::seconds, a->step.communication_s, b->step.communication_s});
    rows_.push_back({tr("pipeline bubble"), Unit::seconds, a->step.bubble_s, b->step.bubble_s});
    rows_.push_back({tr("offload"), Unit::seconds, a->step.offload_s, b->step.offload_s});
    rows_.push_back({tr("optimizer"), Unit::seconds, a->step.optimizer_s, b->step.optimizer_s});
    rows_.push_back({tr("step time"), Unit::seconds, a->step_time_s, b->step_time_s});
    rows_.push_back({tr("tokens/s"), Unit::tokens_per_s, a->tokens_per_s, b->tokens_per_s});
  }
  endResetModel();
}

int PlanDifferenceModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int PlanDifferenceModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QString PlanDifferenceModel::valueText(Unit unit, double value) {
  switch (unit) {
    case Unit::bytes: return bytes_text(static_cast<int64_t>(value));
    case Unit::seconds: return seconds_text(value);
    case Unit::tokens_per_s: return QLocale().toString(value, 'f', 0);
  }
  return {};
}

QString PlanDifferenceModel::differenceText(const Row& row) {
  const double d = row.b - row.a;
  if (d == 0) return QStringLiteral("same");
  const QString sign = d > 0 ? QStringLiteral("+") : QStringLiteral("−");
  // A change under 0.05% (the optimizer's bytes of a different padding) reads as its size alone.
  const double percent_of_a = row.a != 0 ? std::abs(100 * d / row.a) : 0;
  const QString percent = percent_of_a >= 0.05 ? QStringLiteral(" (%1%2%)").arg(sign).arg(percent_of_a, 0, 'f', 1) : QString();
  return sign + valueText(row.unit, std::abs(d)) + percent;
}

QVariant PlanDifferenceModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const Row& row = rows_[static_cast<size_t>(index.row())];
  if (row.heading) {
    if (role == Qt::DisplayRole && index.column() == kQuantity) return row.quantity;
    if (role == Qt::FontRole) {
      QFont bold;
      bold.setBold(true);
      return bold;
    }
    return {};
  }
  const double d = row.b - row.a;
  switch (role) {
    case Qt::DisplayRole:
      switch (index.column()) {
        case kQuantity: return row.quantity;
        case kPlanA: return valueText(row.unit, row.a);
        case kPlanB: return valueText(row.unit, row.b);
        case kDifference: return differenceText(row);
        default: return {};
      }
    case kDifferenceRole: return index.column() == kDifference ? QVariant(d) : QVariant();
    case Qt::DecorationRole: {
      const auto category = parse_memory_category(row.quantity.toStdString());
      return index.column() == kQuantity && category ? QVariant(category_qcolor(*category)) : QVariant();
    }
    case Qt::TextAlignmentRole:
      return index.column() == kQuantity ? QVariant() : QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
    case Qt::ForegroundRole: {
      if (index.column() != kDifference || d == 0) return {};
      const bool costs = row.unit == Unit::tokens_per_s ? d < 0 : d > 0;
      return QBrush(costs ? QColor(0xB0, 0x1E, 0x1E) : QColor(0x1B, 0x7F, 0x3B));
    }
    default: return {};
  }
}

QVariant PlanDifferenceModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= kColumnCount) return {};
  if (role == Qt::ToolTipRole && (section == kPlanA || section == kPlanB)) return section == kPlanA ? label_a_ : label_b_;
  if (role != Qt::DisplayRole) return {};
  switch (section) {
    case kQuantity: return tr("quantity");
    case kPlanA: return tr("plan A");
    case kPlanB: return tr("plan B");
    case kDifference: return tr("B − A");
    default: return {};
  }
}

}  // namespace tessera::gui
