// The engine's activation buffers per recompute mode; see model/activation_buffers.h.
#include "tessera/engine/model/activation_buffers.h"

namespace tessera::engine {

namespace {

std::vector<ActivationBuffer> buffers_of(const std::vector<planner::ActivationTerm>& terms, const planner::ActivationShape& shape, MemoryCategory category) {
  std::vector<ActivationBuffer> out;
  for (const planner::ActivationTerm& term : terms) out.push_back({term.name, planner::term_bytes(term, shape), term.bytes_per_element, category});
  return out;
}

}  // namespace

BlockRerun block_rerun(planner::RecomputeMode mode) {
  switch (mode) {
    case planner::RecomputeMode::selective: return BlockRerun::attention;
    case planner::RecomputeMode::full: return BlockRerun::block;
    case planner::RecomputeMode::none:
    case planner::RecomputeMode::op_selective: break;  // torchtitan's policy, refused by the engine (check_engine_supports)
  }
  return BlockRerun::nothing;
}

bool ActivationBuffers::follows_mode(int64_t index_in_chunk) const {
  return recompute.mode != planner::RecomputeMode::full || planner::block_recomputed_whole(recompute, index_in_chunk);
}

const std::vector<ActivationBuffer>& ActivationBuffers::kept_by(int64_t index_in_chunk) const { return follows_mode(index_in_chunk) ? kept : kept_whole; }

BlockRerun ActivationBuffers::rerun_of(int64_t index_in_chunk) const { return follows_mode(index_in_chunk) ? rerun : BlockRerun::nothing; }

int64_t ActivationBuffers::bytes(MemoryCategory category, int64_t blocks, int64_t align) const {
  const auto sum = [&](const std::vector<ActivationBuffer>& buffers) {
    int64_t total = 0;
    for (const ActivationBuffer& b : buffers) {
      if (b.category == category) total += (b.bytes + align - 1) / align * align;
    }
    return total;
  };
  int64_t per_blocks = 0;
  for (int64_t i = 0; i < blocks; ++i) per_blocks += sum(kept_by(i));
  return per_blocks + sum(working) + sum(first_stage) + sum(last_stage) + sum(logits) + sum(scratch);
}

ActivationBuffers activation_buffers(const planner::ActivationTable& table, const planner::ActivationShape& shape, planner::BlockRecompute recompute) {
  ActivationBuffers out;
  const planner::RecomputeMode mode = recompute.mode;
  for (const planner::ActivationTerm& term : table.block) {
    const ActivationBuffer buffer{term.name, planner::term_bytes(term, shape), term.bytes_per_element, MemoryCategory::activations};
    if (planner::term_kept(term, mode)) {
      out.kept.push_back(buffer);
    } else if (planner::term_kept(term, planner::RecomputeMode::none)) {
      out.working.push_back(buffer);
    }
    if (recompute.num_layers > 0 && planner::term_kept(term, planner::RecomputeMode::none)) out.kept_whole.push_back(buffer);
  }
  out.recompute = recompute;
  out.first_stage = buffers_of(table.first_stage, shape, MemoryCategory::activations);
  out.last_stage = buffers_of(table.last_stage, shape, MemoryCategory::activations);
  out.logits = buffers_of(table.logits, shape, MemoryCategory::logits);
  out.scratch = buffers_of(table.backward_scratch, shape, MemoryCategory::activations);
  out.rerun = block_rerun(mode);
  return out;
}

}  // namespace tessera::engine
