// What a tensor-parallel group moves, call by call, for one micro-batch of b
// sequences of s tokens (N = b·s rows of h activations of `activation_bytes`
// each), as Megatron-LM lays the collectives out (Shoeybi et al. 2019, §3;
// Korthikanti et al. 2022, §4.2.2) and the engine's Transformer calls them:
//
//  without sequence parallelism, all-reduces of N·h:
//    forward  the vocabulary-parallel embedding (1), each block's attention
//             output and MLP output (2 per block);
//    backward the head's input gradient (1), each block's two column-parallel
//             input gradients (2 per block);
//  with it, a reduce-scatter where the all-reduce was, and all-gathers of N·h:
//    forward  each block's two norm outputs and the head's input (2 per block + 1);
//    backward the head's input again, each block's output gradient and
//             attention-output gradient and its two norm outputs again (the
//             weight gradients need the whole sequence; Megatron-LM gathers
//             them again in backward rather than keep them), and the
//             embedding's gradient (4 per block + 2);
//  full recompute repeats each block's forward calls in backward;
//  with --tp-comm-overlap (tp_overlap_schedule.h), each block's all-gathers
//  before its column-parallel GEMMs (2 in forward, and in backward the 2 of the
//  output gradients before the row-parallel input-gradient GEMMs) and its
//  reduce-scatters after the GEMMs whose partial sums they reduce (2 in forward,
//  2 in backward), are tp - 1 sends and recvs of N·h/tp each instead; the
//  embedding's, the head's and the norm outputs' gathers for the weight
//  gradients stay collectives;
//  the vocabulary-parallel cross-entropy all-reduces each row's maximum, sum
//  and target logit (3 of N fp32) in forward.
// Payloads are counted as nccl-tests does (the engine's CommCounters): an
// all-reduce's buffer, a reduce-scatter's whole input, an all-gather's whole output.
#pragma once

#include <cstdint>
#include <optional>

#include "tessera/planner/model.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

struct CollectiveCalls {
  int64_t calls = 0;
  int64_t bytes = 0;  // the calls' payloads together
};

struct TpCalls {
  CollectiveCalls all_reduce, reduce_scatter, all_gather;
  CollectiveCalls send, recv;  // --tp-comm-overlap's chunks
};

// --tp-comm-overlap in a group of `tp` ranks; disabled: every call a collective.
struct TpCommOverlap {
  bool enabled = false;
  int64_t tp = 1;
};

struct TpMicroBatchTraffic {
  TpCalls forward, backward;  // recompute's calls are in backward, where they run
};

// A pipeline stage's share: its `layers` blocks, the embedding's calls where
// it is the first stage, the head's and the loss's where it is the last.
struct TpStage {
  int64_t layers = 0;
  bool first = true, last = true;
  // Under --recompute full, the blocks recomputed whole (recompute_blocks.h): all `layers` when unset.
  std::optional<int64_t> recomputed_whole = std::nullopt;
};

TpMicroBatchTraffic tp_micro_batch_traffic(const ModelConfig& config, TpStage stage, int64_t micro_batch, int64_t seq_len, bool sequence_parallel,
                                           RecomputeMode recompute, int64_t activation_bytes, TpCommOverlap overlap = {});

// Once per step: under sequence parallelism each norm's weight (and bias)
// gradient, partial per rank, is all-reduced (gradient_bytes per element),
// and the gradient norm's sum of squares is all-reduced (one fp64).
CollectiveCalls tp_step_all_reduces(const ModelConfig& config, bool sequence_parallel, int64_t gradient_bytes);

}  // namespace tessera::planner
