// The ranked plans of a search as a table: one row per plan that fits (best
// first), then one row per rejection reason showing the candidate that came
// closest. Qt::DisplayRole gives text with units; kSortRole the raw number, so
// a QSortFilterProxyModel sorts numerically.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <QAbstractTableModel>

#include "tessera/planner/search.h"

namespace tessera::gui {

class PlanTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { kRank, kPlugin, kLayout, kSchedule, kZeroStage, kOffload, kRecompute, kMicroBatch, kMemory, kFits, kStepTime, kTokensPerS, kMfu, kReason, kColumnCount };
  static constexpr int kSortRole = Qt::UserRole;

  explicit PlanTableModel(QObject* parent = nullptr);

  // `gpu_capacity` turns a rejection's overflow into the memory the closest candidate needs.
  void setResult(std::shared_ptr<const planner::PlanSearchResult> result, int64_t gpu_capacity);

  // The plan of a row; empty for a rejection that has no candidate (an invalid set-up).
  std::optional<planner::EstimateRequest> planAt(int row) const;
  // The row showing `plan` (same description), or -1.
  int rowOf(const planner::EstimateRequest& plan) const;

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  struct Row {
    std::optional<planner::EstimateRequest> request;
    std::string description;
    bool fits = false;
    int rank = 0;                 // 1.. for plans that fit, 0 for rejections
    int64_t memory_bytes = -1;    // peak device bytes per GPU; -1 unknown
    double step_time_s = 0, tokens_per_s = 0, mfu = 0;
    std::string reason;           // why the row's candidates were rejected
    int64_t optimizer_chunks_on_host = -1, chunks = 0;  // Gemini static: what its fraction sends (-1 unknown)
  };
  QVariant display(const Row& row, int column) const;
  QVariant sort_key(const Row& row, int column) const;

  std::vector<Row> rows_;
};

}  // namespace tessera::gui
