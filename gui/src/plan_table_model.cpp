#include "plan_table_model.h"

#include <QBrush>
#include <QColor>
#include <QLocale>

#include "category_style.h"
#include "plan_labels.h"
#include "tessera/planner/recompute_blocks.h"

namespace tessera::gui {

using planner::EstimateRequest;

namespace {

QString text(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

}  // namespace

PlanTableModel::PlanTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void PlanTableModel::setResult(std::shared_ptr<const planner::PlanSearchResult> result, int64_t gpu_capacity) {
  beginResetModel();
  rows_.clear();
  if (result) {
    int rank = 0;
    for (const planner::Candidate& c : result->plans) {
      rows_.push_back(Row{c.request, planner::describe_plan(c.request), true, ++rank, c.peak_device_bytes(), c.simulation.step_time_s,
                          c.simulation.tokens_per_s, c.simulation.mfu, {}});
      if (c.memory.gemini) {
        rows_.back().optimizer_chunks_on_host = c.memory.gemini->optimizer_chunks_on_host;
        rows_.back().chunks = c.memory.gemini->num_chunks;
      }
    }
    for (const auto& [reason, rejection] : result->rejected) {
      Row row;
      row.request = rejection.closest_request;
      if (row.request) row.description = planner::describe_plan(*row.request);
      const bool over_gpu = reason.starts_with("over GPU memory");
      if (over_gpu && rejection.closest_overflow_bytes >= 0) row.memory_bytes = gpu_capacity + rejection.closest_overflow_bytes;
      row.reason = std::to_string(rejection.count) + " × " + reason + (rejection.closest.empty() ? "" : "; closest: " + rejection.closest);
      rows_.push_back(std::move(row));
    }
  }
  endResetModel();
}

std::optional<EstimateRequest> PlanTableModel::planAt(int row) const {
  if (row < 0 || row >= static_cast<int>(rows_.size())) return std::nullopt;
  return rows_[static_cast<size_t>(row)].request;
}

int PlanTableModel::rowOf(const EstimateRequest& plan) const {
  const std::string description = planner::describe_plan(plan);
  for (size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].description == description) return static_cast<int>(i);
  }
  return -1;
}

int PlanTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int PlanTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant PlanTableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const Row& row = rows_[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole: return display(row, index.column());
    case kSortRole: return sort_key(row, index.column());
    case Qt::ToolTipRole: return text(row.reason.empty() ? row.description : row.reason);
    case Qt::ForegroundRole:
      if (index.column() == kFits) return QBrush(row.fits ? QColor(0x1B, 0x7F, 0x3B) : QColor(0xB0, 0x1E, 0x1E));
      return {};
    case Qt::TextAlignmentRole: {
      const bool numeric = index.column() == kRank || (index.column() >= kMemory && index.column() <= kMfu && index.column() != kFits);
      return QVariant::fromValue(Qt::Alignment(numeric ? Qt::AlignRight | Qt::AlignVCenter : Qt::AlignLeft | Qt::AlignVCenter));
    }
    default: return {};
  }
}

QVariant PlanTableModel::display(const Row& row, int column) const {
  if (column == kFits) return row.fits ? tr("yes") : tr("no");
  if (column == kReason) return text(row.reason);
  if (column == kMemory) return row.memory_bytes >= 0 ? bytes_text(row.memory_bytes) : QString();
  if (!row.request) return {};
  const EstimateRequest& r = *row.request;
  switch (column) {
    case kRank: return row.rank > 0 ? QVariant(row.rank) : QVariant(QStringLiteral("–"));
    case kPlugin: return text(enum_name(r.plugin.kind));
    case kLayout:
      return QStringLiteral("%1×%2×%3%4%5%6")
          .arg(r.layout.dp)
          .arg(r.layout.tp)
          .arg(r.layout.pp)
          .arg(r.layout.cp > 1 ? QStringLiteral("×cp%1").arg(r.layout.cp) : QString())
          .arg(r.layout.sequence_parallel ? " +sp" : "")
          .arg(r.layout.dp_replicate > 1 ? QStringLiteral(" (%1 replicas)").arg(r.layout.dp_replicate) : QString());
    case kSchedule: return schedule_of(r);
    case kZeroStage: return zero_stage_of(r);
    case kOffload: return offload_of(r, row.optimizer_chunks_on_host, row.chunks);
    case kRecompute: return text(planner::describe_recompute(r));
    case kMicroBatch: return QStringLiteral("%1 × %2").arg(r.training.micro_batch_size).arg(r.training.num_micro_batches);
    case kStepTime: return row.fits ? seconds_text(row.step_time_s) : QString();
    case kTokensPerS: return row.fits ? QLocale().toString(row.tokens_per_s, 'f', 0) : QString();
    case kMfu: return row.fits ? QStringLiteral("%1%").arg(100 * row.mfu, 0, 'f', 1) : QString();
    default: return {};
  }
}

QVariant PlanTableModel::sort_key(const Row& row, int column) const {
  switch (column) {
    case kRank: return row.rank > 0 ? row.rank : 1 << 30;  // rejections after every plan
    case kMemory: return static_cast<qlonglong>(row.memory_bytes);
    case kFits: return row.fits ? 1 : 0;
    case kStepTime: return row.fits ? row.step_time_s : 1e300;
    case kTokensPerS: return row.tokens_per_s;
    case kMfu: return row.mfu;
    case kZeroStage: return row.request ? zero_stage_of(*row.request) : -1;
    default: return display(row, column);
  }
}

QVariant PlanTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 || section >= kColumnCount) return {};
  static const char* const kTitles[kColumnCount] = {"#", "plugin", "dp×tp×pp", "schedule", "ZeRO", "offload", "recompute", "micro-batch",
                                                    "memory / GPU", "fits", "step time", "tokens/s", "MFU", "rejected because"};
  return tr(kTitles[section]);
}

}  // namespace tessera::gui
