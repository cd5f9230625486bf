// Which blocks backward recomputes whole under --recompute full. Every block
// by default. With --recompute-num-layers K, the first K blocks of each model
// chunk, the others keeping everything they save: Megatron-LM's
// --recompute-method block (NVIDIA/Megatron-LM core_v0.14.0,
// megatron/core/transformer/transformer_block.py, _checkpointed_forward: a
// TransformerBlock, one per model chunk, checkpoints its layers with
// layer_idx < recompute_num_layers and runs the rest plainly). The planner's
// memory and time, the exports and the engine all ask here.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tessera/planner/model_config.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// A recompute mode and, under full, how many blocks of each chunk it
// recomputes whole (TrainingOptions' recompute and recompute_num_layers).
struct BlockRecompute {
  RecomputeMode mode = RecomputeMode::none;
  int64_t num_layers = 0;  // 0: every block
  BlockRecompute(RecomputeMode m = RecomputeMode::none, int64_t n = 0) : mode(m), num_layers(n) {}
  BlockRecompute(const TrainingOptions& t) : mode(t.recompute), num_layers(t.recompute_num_layers) {}
};

// Whether the block at `index_in_chunk` (0 = the chunk's first) is recomputed whole.
bool block_recomputed_whole(BlockRecompute r, int64_t index_in_chunk);

// How many of a chunk's `chunk_layers` blocks are recomputed whole.
int64_t blocks_recomputed_whole(BlockRecompute r, int64_t chunk_layers);

// The same over all of a stage's chunks.
int64_t blocks_recomputed_whole(BlockRecompute r, std::span<const StageLayers> chunks);

// Whether ColossalAI checkpoints only some blocks of `r`: HybridParallelPlugin's
// gradient_checkpoint_config (PipelineGradientCheckpointConfig's
// num_ckpt_layers_per_stage, colossalai v0.5.0 shardformer/shard/grad_ckpt_config.py),
// which the pipeline forwards of its Llama, Mistral and Qwen2 read, each
// checkpointing a stage's layers with idx − start_idx below the count
// (shardformer/modeling/llama.py, mistral.py, qwen2.py): so a pipeline, and one of
// those families. Without a pipeline Hugging Face's own forward checkpoints every block.
bool colossalai_pipelines_checkpoint_some_blocks(const ModelConfig& config);  // the family alone
bool colossalai_checkpoints_some_blocks(const ModelConfig& config, const EstimateRequest& r);

// The counts of blocks per chunk, between none and all, that the request's
// runtime can recompute whole, ascending: Megatron-LM any (--recompute-num-layers
// with --recompute-method block); torchtitan ⌊L/n⌋ (layer_checkpoint_frequency);
// ColossalAI any where colossalai_checkpoints_some_blocks; none under DeepSpeed
// (an exported config recomputes nothing).
std::vector<int64_t> partial_recompute_counts(const ModelConfig& config, const EstimateRequest& r);

// torchtitan's layer-level checkpointing, selective_ac_option n, wraps every
// n-th block (torchtitan/distributed/activation_checkpoint.py, _apply_layer_sac:
// a counter over the blocks from 1, checkpointed where it divides by n),
// ⌊L/n⌋ of L: the same count, memory and time as recomputing the first ones.
// The n that recomputes `blocks` of `num_layers`, if one does.
std::optional<int64_t> layer_checkpoint_frequency(int64_t num_layers, int64_t blocks);

// Under --runtime torchtitan, a count its layer-level option cannot give
// (neither every block nor ⌊L/n⌋): the refusal, naming the counts it can; else empty.
std::optional<std::string> torchtitan_count_refusal(const ModelConfig& config, const EstimateRequest& r);

// The request's mode as plan titles and reports name it: "full (16 blocks per stage)".
std::string describe_recompute(const EstimateRequest& r);

}  // namespace tessera::planner
