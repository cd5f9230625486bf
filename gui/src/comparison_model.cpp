#include "comparison_model.h"

#include <QBrush>

#include "category_style.h"

namespace tessera::gui {

ComparisonModel::ComparisonModel(QObject* parent) : QAbstractTableModel(parent) {}

void ComparisonModel::setRanks(const std::vector<planner::RankComparison>& ranks) {
  beginResetModel();
  rows_.clear();
  for (const planner::RankComparison& rank : ranks) {
    for (const planner::CategoryError& error : rank.categories) rows_.push_back(Row{rank.rank, error});
  }
  rank_count_ = static_cast<int>(ranks.size());
  endResetModel();
}

int ComparisonModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int ComparisonModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant ComparisonModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const Row& row = rows_[static_cast<size_t>(index.row())];
  const planner::CategoryError& e = row.error;
  if (role == Qt::DecorationRole && index.column() == kCategory) return category_qcolor(e.category);
  if (role == Qt::TextAlignmentRole && index.column() != kCategory) return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
  if (role == Qt::UserRole && index.column() == kError) return e.error_pct;
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kRank: return QString::number(row.rank);
    case kCategory: return category_name(e.category);
    case kPredicted: return bytes_text(e.predicted_bytes);
    case kMeasured: return bytes_text(e.measured_bytes);
    case kError: return QStringLiteral("%1%").arg(e.error_pct, 0, 'f', 1);
    default: return {};
  }
}

QVariant ComparisonModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 || section >= kColumnCount) return {};
  static const char* const kTitles[kColumnCount] = {"rank", "category", "predicted", "measured", "error"};
  return tr(kTitles[section]);
}

}  // namespace tessera::gui
