// How a pipeline splits the blocks over stages, in which order each stage runs
// its passes, and how many micro-batches of activations each stage holds at
// its peak.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/planner/training_config.h"

namespace tessera::planner {

struct StageLayers {
  int first_layer = 0;  // first block of the stage
  int num_layers = 0;   // blocks in the stage
};

// Blocks per stage: L / pp each, the remainder going one each to the middle
// stages (ColossalAI PipelineStageManager.distribute_layers: the first and last
// stages also hold the embedding and the head, so they get the fewer blocks).
// Where pp does not divide L this is the uneven split that Megatron-LM's
// --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers
// express (NVIDIA/Megatron-LM@307dcf37f03d44da131ba21999278abe4112d2ad,
// megatron/training/arguments.py: with either set, L need not divide by pp)
// and that Llama 3 405B ran: 126 layers on 16 stages, "one Transformer layer
// less each on the first and the last stages" (Llama Team, "The Llama 3 Herd
// of Models", 2024, §3.3.2): 7, 8 × 14, 7. BLOOM-176B's 70 on 12: 5, 6 × 10, 5.
std::vector<StageLayers> split_layers(int num_layers, int pp);

// The model chunks of every stage: the blocks split over pp · chunks virtual
// stages as above, and stage k holding virtual stages k, k + pp, k + 2·pp, ...
// (Narayanan et al. 2021, §2.2.2; ColossalAI PipelineStageManager.get_stage_index).
// One chunk per stage without interleaving.
std::vector<std::vector<StageLayers>> stage_chunks(int num_layers, int pp, int chunks);

// The interleaved schedule's chunk counts for L blocks on pp stages: every v of
// 2 or more that divides each stage's blocks of split_layers, ascending, so that
// every virtual stage holds L / (pp·v) blocks. Megatron-Core requires it of each
// stage, the uneven first and last included (NVIDIA/Megatron-LM@d98e8a64ddf3,
// megatron/core/transformer/transformer_config.py, TransformerConfig.__post_init__:
// "number of layers at first stage ... must be divisible by virtual pipeline
// parallel degree", the same of the last and of each middle stage; and
// transformer_block.py, get_num_layers_to_build: num_layers_per_pipeline_rank %
// vp_size == 0). An uneven split's counts q and q + 1 share no divisor, so it
// leaves none: uneven pipelines run 1F1B.
std::vector<int64_t> interleaved_chunk_counts(int64_t num_layers, int64_t pp);

// Blocks per stage (all its chunks together) in stage order, runs of equal
// counts folded: "5, 6 × 10, 5" for 70 layers on 12 stages.
std::string describe_layer_split(int num_layers, int pp, int chunks);

enum class PipelinePass { forward, backward };

struct PipelineOp {
  int64_t micro_batch = 0;
  PipelinePass pass = PipelinePass::forward;
  int64_t chunk = 0;  // the stage's model chunk (0 without interleaving)
};

// The order in which each stage runs its passes, computed before anything runs
// (as Megatron-LM's schedules are): per stage, a list of (micro-batch, pass, chunk).
// GPipe: every forward, then every backward in reverse (Huang et al. 2019).
// 1F1B: pp - stage - 1 warm-up forwards, then one forward and one backward in
// turn, then the remaining backwards (Narayanan et al. 2021, §2.2.1).
// Interleaved: 1F1B over the m · chunks chunk passes, in groups of pp
// micro-batches per chunk (Narayanan et al. 2021, §2.2.2), with
// min((pp - stage - 1) · 2 + (chunks - 1) · pp, m · chunks) warm-up forwards as
// ColossalAI's InterleavedSchedule runs them; m must be a multiple of pp.
std::vector<PipelineOp> stage_schedule(PipelineSchedule schedule, int64_t pp, int64_t stage, int64_t num_micro_batches, int64_t chunks = 1);
std::vector<std::vector<PipelineOp>> pipeline_schedule(PipelineSchedule schedule, int64_t pp, int64_t num_micro_batches, int64_t chunks = 1);

// Walks one stage's list of stage_schedule() pass by pass without building it
// (stage_schedule collects what it yields): the simulator runs every table of
// every candidate the search weighs, thousands of passes each.
class StageScheduleCursor {
 public:
  StageScheduleCursor(PipelineSchedule schedule, int64_t pp, int64_t stage, int64_t num_micro_batches, int64_t chunks = 1);
  bool done() const { return position_ == length_; }
  // The pass at the cursor (done() must be false), and on to the next; inline,
  // as the simulator calls them for every pass.
  PipelineOp op() const {
    if (forward_) return {forwards_.group_start + forwards_.lane, PipelinePass::forward, forwards_.chunk};
    // GPipe's backwards run in reverse; the others' take the chunks backwards.
    if (schedule_ == PipelineSchedule::gpipe) return {length_ - 1 - position_, PipelinePass::backward, 0};
    return {backwards_.group_start + backwards_.lane, PipelinePass::backward, chunks_ - 1 - backwards_.chunk};
  }
  void advance() {
    (forward_ ? forwards_ : backwards_).advance(pp_, chunks_);
    forward_ = forward_at(++position_);
  }
  // Forwards before the first backward.
  int64_t warmup() const { return warmup_; }

 private:
  // Forwards (and, but under GPipe, backwards) go through the chunk passes in
  // Megatron-LM's interleaved order, which numbers a stage's chunk passes
  // 0 .. m·v - 1 and runs chunk (k mod pp·v) / pp of micro-batch
  // (k / (pp·v)) · pp + k mod pp as pass k: micro-batches in groups of pp, each
  // group through every chunk in turn; with one chunk, micro-batch after micro-batch.
  struct ChunkPassOrder {
    int64_t group_start = 0, lane = 0, chunk = 0;
    void advance(int64_t pp, int64_t chunks) {
      if (++lane < pp) return;
      lane = 0;
      if (++chunk < chunks) return;
      chunk = 0;
      group_start += pp;
    }
  };
  bool forward_at(int64_t position) const { return position < warmup_ || (position < length_ - warmup_ && (position - warmup_) % 2 == 0); }

  PipelineSchedule schedule_;
  int64_t pp_, chunks_, warmup_ = 0, length_, position_ = 0;
  bool forward_ = false;  // forward_at(position_), kept: op() and advance() ask for every pass
  ChunkPassOrder forwards_, backwards_;
};

// Per model chunk of `stage`, the micro-batches whose activations it holds when
// its memory peaks, `bytes_per_pass[j]` (not negative) being what one pass of chunk j keeps.
// GPipe: all m; 1F1B: min(pp - stage, m) (Narayanan et al. 2021, §2.2.1: the
// count reached before the first backward stays through the steady state).
// Interleaved: the stage's table is replayed, a forward adding a pass of its
// chunk and a backward freeing one; the mix of chunks shifts in the steady
// state, so the peak of the weighted sum is taken (in time independent of m).
// Without a pipeline, one micro-batch: gradient accumulation frees each one's
// activations in its backward.
std::vector<int64_t> in_flight_at_peak(PipelineSchedule schedule, int64_t pp, int64_t stage, int64_t num_micro_batches, int64_t chunks,
                                       const std::vector<int64_t>& bytes_per_pass);

}  // namespace tessera::planner
