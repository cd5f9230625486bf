#include "memory_formula_inputs.h"

#include "tessera/planner/activations.h"
#include "tessera/planner/recompute_blocks.h"
#include "tessera/planner/report.h"

#include <QStringList>

#include "category_style.h"

namespace tessera::gui {

using planner::EstimateRequest;

namespace {

QString name_of(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

QString count_text(int64_t n) {
  if (n >= 1'000'000'000) return QStringLiteral("%1B").arg(static_cast<double>(n) / 1e9, 0, 'f', 2);
  if (n >= 1'000'000) return QStringLiteral("%1M").arg(static_cast<double>(n) / 1e6, 0, 'f', 1);
  return QString::number(n);
}

// Parameters one rank of the row's first stage holds before data-parallel sharding.
int64_t stage_parameters(const planner::RankMemory& row, const planner::Model& model, const EstimateRequest& request) {
  for (const planner::StageShape& s : planner::stage_shapes(model, request)) {
    if (s.stage == row.first_stage) return s.params;
  }
  return 0;
}

QStringList model_state_inputs(const planner::RankMemory& row, const planner::Model& model, const EstimateRequest& r) {
  return {QStringLiteral("parameters on this rank before sharding: %1 (stage %2, tp %3)")
              .arg(count_text(stage_parameters(row, model, r)))
              .arg(row.first_stage)
              .arg(r.layout.tp),
          QStringLiteral("plugin: %1, ZeRO sharding over dp %2").arg(name_of(enum_name(r.plugin.kind))).arg(r.layout.dp),
          QStringLiteral("precision %1, optimizer %2").arg(name_of(enum_name(r.training.precision)), name_of(enum_name(r.training.optimizer)))};
}

}  // namespace

QString formula_inputs(MemoryCategory category, const planner::RankMemory& row, const planner::Model& model, const EstimateRequest& r,
                       const planner::MemoryEstimate& estimate) {
  const auto& t = r.training;
  const auto& a = r.assumptions;
  const bool torchtitan_eager = planner::block_accounting(model.config, r.plugin, t) != planner::BlockAccounting::profile;
  const bool torchtitan_eager_loss = planner::loss_accounting(r.plugin, t) == planner::LossAccounting::torchtitan_eager;
  QStringList lines;
  switch (category) {
    case MemoryCategory::parameters:
    case MemoryCategory::master_weights:
    case MemoryCategory::gradients:
    case MemoryCategory::optimizer_states: lines = model_state_inputs(row, model, r); break;
    case MemoryCategory::activations:
      lines << QStringLiteral("%1, micro-batch %2 × seq %3").arg(QString::fromStdString(planner::layers_label(row))).arg(t.micro_batch_size).arg(t.seq_len)
            << (row.layer_chunks.empty()
                    ? QStringLiteral("micro-batches in flight: %1 of %2").arg(row.in_flight_micro_batches).arg(t.num_micro_batches)
                    : QStringLiteral("chunk passes in flight: %1 of %2 (%3 chunks × %4 micro-batches)")
                          .arg(row.in_flight_micro_batches)
                          .arg(static_cast<qlonglong>(row.layer_chunks.size()) * t.num_micro_batches)
                          .arg(row.layer_chunks.size())
                          .arg(t.num_micro_batches))
            << QStringLiteral("recompute %1, profile %2%3, tp %4%5")
                   .arg(QString::fromStdString(planner::describe_recompute(r)), name_of(enum_name(t.activation_profile)))
                   .arg(torchtitan_eager ? QStringLiteral(" in torchtitan's eager block (what each op saves)") : QString())
                   .arg(r.layout.tp)
                   .arg(r.layout.sequence_parallel ? " + sequence parallel" : "");
      break;
    case MemoryCategory::logits:
      lines << QStringLiteral("micro-batch %1 × seq %2 × vocabulary %3 / tp %4, fp32%5")
                   .arg(t.micro_batch_size)
                   .arg(t.seq_len)
                   .arg(model.config.vocab_size)
                   .arg(r.layout.tp)
                   .arg(torchtitan_eager_loss ? QStringLiteral(", three tensors (torchtitan's eager loss at backward's start)") : QString())
            << (row.has_head ? QStringLiteral("this row holds the head") : QStringLiteral("only the last stage holds the head"));
      break;
    case MemoryCategory::comm_buffers:
      lines << QStringLiteral("DDP bucket %1, ZeRO reduce bucket %2 elements").arg(bytes_text(r.plugin.bucket_bytes)).arg(count_text(r.plugin.reduce_bucket_numel))
            << QStringLiteral("pipeline stages %1 (send/receive buffers when > 1)").arg(r.layout.pp);
      break;
    case MemoryCategory::chunk_buffers:
      if (estimate.gemini) {
        lines << QStringLiteral("chunk size %1 elements, %2 chunks gathered at the peak")
                     .arg(count_text(estimate.gemini->chunk_size))
                     .arg(estimate.gemini->peak_gathered_chunks);
      } else {
        lines << QStringLiteral("largest block %1 parameters (FSDP unit)").arg(count_text(model.largest_block_numel));
      }
      break;
    case MemoryCategory::workspace:
      lines << QStringLiteral("cuBLAS workspace %1, NCCL %2 per communicator").arg(bytes_text(a.cublas_workspace_bytes), bytes_text(a.nccl_bytes_per_group));
      break;
    case MemoryCategory::runtime:
      lines << QStringLiteral("CUDA context %1, allocator reserve %2% of the rest")
                   .arg(bytes_text(estimate.cuda_context_bytes))
                   .arg(100 * a.allocator_reserve_fraction, 0, 'f', 1);
      break;
  }
  return lines.join(QStringLiteral("<br>"));
}

}  // namespace tessera::gui
