// What a pipeline's stages send each other (Narayanan et al. 2021, §2.2;
// Megatron-LM's p2p_communication.py): per micro-batch, each stage boundary
// carries the activation forward and its gradient back, each b·s·h elements
// in the compute dtype, a tp-th of them per rank under sequence parallelism
// (each tensor-parallel rank sends its own rows). The memory model sizes the
// stages' send and receive buffers with it, the simulator times it, and the
// engine's pipeline (parallel/pipeline.h) sends exactly it.
#pragma once

#include <cstdint>

#include "tessera/planner/tp_traffic.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// Bytes of one activation (or gradient) crossing a stage boundary, per rank.
int64_t stage_boundary_bytes(int64_t micro_batch, int64_t seq_len, int64_t hidden_size, Precision precision, const ParallelLayout& layout);

// What `stage` sends in a step of `micro_batches` (and receives, as many):
// every chunk's output forward unless it is the model's last virtual stage,
// and every chunk's input gradient back unless it is the first.
CollectiveCalls stage_sends_per_step(int64_t pp, int64_t stage, int64_t chunks, int64_t micro_batches, int64_t boundary_bytes);

}  // namespace tessera::planner
