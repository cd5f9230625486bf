// A measured run against the planner's prediction of the same set-up, one row
// per rank and memory category: predicted, measured, error on the device (as
// `tessera compare` prints). A one-rank run has one row per category.
#pragma once

#include <cstdint>
#include <vector>

#include <QAbstractTableModel>

#include "tessera/planner/memory_comparison.h"

namespace tessera::gui {

class ComparisonModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { kRank, kCategory, kPredicted, kMeasured, kError, kColumnCount };

  explicit ComparisonModel(QObject* parent = nullptr);
  void setRanks(const std::vector<planner::RankComparison>& ranks);
  // The measured ranks shown; the view hides the rank column when there is one.
  int rankCount() const { return rank_count_; }

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  struct Row {
    int64_t rank = 0;
    planner::CategoryError error;
  };
  std::vector<Row> rows_;  // rank by rank, each in the order of kAllMemoryCategories
  int rank_count_ = 0;
};

}  // namespace tessera::gui
