#include "tessera/planner/flops.h"

#include "tessera/planner/op_checkpoint_policy.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/recompute_blocks.h"

namespace tessera::planner {
namespace {

// Attention's two batched matmuls, QK^T and AV: 2·s·d each per token.
double attention_core_flops_per_token(const ModelConfig& c, int64_t seq_len) {
  return 4.0 * static_cast<double>(seq_len) * static_cast<double>(c.q_width());
}

}  // namespace

double block_forward_flops_per_token(const Model& model, int layer, int64_t seq_len) {
  return 2.0 * static_cast<double>(model.blocks[static_cast<size_t>(layer)].matmul_weights) +
         attention_core_flops_per_token(model.config, seq_len);
}

double outside_blocks_forward_flops_per_token(const Model& model) {
  // OPT's projections and the head, tied or not (a tied head still runs its GEMM).
  return 2.0 * static_cast<double>(model.embedding.matmul_weights + model.head.matmul_weights + model.tied_head.matmul_weights);
}

FlopsPerToken flops_per_token(const Model& model, int64_t seq_len, RecomputeMode recompute) {
  double blocks = 0;
  for (const ParamTotals& block : model.blocks) blocks += 2.0 * static_cast<double>(block.matmul_weights);
  const double attention = static_cast<double>(model.config.num_layers) * attention_core_flops_per_token(model.config, seq_len);
  FlopsPerToken f;
  f.forward = blocks + attention + outside_blocks_forward_flops_per_token(model);
  f.backward = 2.0 * f.forward;
  switch (recompute) {
    case RecomputeMode::none: break;
    case RecomputeMode::selective: f.recompute = attention; break;  // only QK^T, softmax, AV (Korthikanti §5)
    case RecomputeMode::full: f.recompute = blocks + attention; break;  // every block's forward again
    case RecomputeMode::op_selective:  // the linears torchtitan's policy does not save; the attention output is kept
      f.recompute = static_cast<double>(model.config.num_layers) * op_policy_recompute_flops_per_token(model.config);
      break;
  }
  return f;
}

FlopsPerToken flops_per_token(const Model& model, const EstimateRequest& request) {
  const TrainingOptions& t = request.training;
  FlopsPerToken f = flops_per_token(model, t.seq_len, t.recompute);
  if (t.recompute != RecomputeMode::full || t.recompute_num_layers == 0) return f;
  f.recompute = 0;
  const auto stages = stage_chunks(static_cast<int>(model.config.num_layers), static_cast<int>(request.layout.pp), static_cast<int>(request.plugin.model_chunks()));
  for (const std::vector<StageLayers>& chunks : stages) {
    for (const StageLayers& chunk : chunks) {
      for (int64_t i = 0; i < blocks_recomputed_whole(t, chunk.num_layers); ++i) {
        f.recompute += block_forward_flops_per_token(model, chunk.first_layer + static_cast<int>(i), t.seq_len);
      }
    }
  }
  return f;
}

}  // namespace tessera::planner
