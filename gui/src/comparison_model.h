// A measured run against the planner's prediction of the same set-up, one row
// per memory category: predicted, measured, error (as `tessera compare` prints).
#pragma once

#include <vector>

#include <QAbstractTableModel>

#include "tessera/planner/measured_run.h"

namespace tessera::gui {

class ComparisonModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { kCategory, kPredicted, kMeasured, kError, kColumnCount };

  explicit ComparisonModel(QObject* parent = nullptr);
  void setErrors(std::vector<planner::CategoryError> errors);

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<planner::CategoryError> errors_;
};

}  // namespace tessera::gui
