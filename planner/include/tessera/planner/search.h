// The plan search: every plugin and layout for a model, cluster, global batch
// and sequence; each candidate's memory (memory_model.h) decides whether it
// fits, the simulator (simulate.h) how fast it runs; the ones that fit are
// ranked by tokens per second.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessera/planner/cluster.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/model.h"
#include "tessera/planner/simulate.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

struct PlanRequest {
  ClusterSpec cluster;
  int64_t global_batch_size = 8;  // sequences per optimizer step, fixed: accumulation steps follow
  int64_t seq_len = 1024;
  Precision precision = Precision::bf16;
  OptimizerKind optimizer = OptimizerKind::adamw;
  ActivationProfile activation_profile = ActivationProfile::flash;
  bool torch_compile = false;  // TrainingOptions::torch_compile
  TransformersVersion transformers_version = kMeasuredTransformers;  // TrainingOptions::transformers_version
  // Whose model states the plans count, and so which plugins and layouts the
  // search tries (--runtime; search_templates.cpp): ColossalAI's five plugins,
  // Megatron-Core's hybrid_parallel, torchtitan's FSDP2 or DeepSpeed's ZeRO-3.
  Runtime runtime = Runtime::colossalai;
  Assumptions assumptions;
  SimulationSettings simulation;
  // Optional restrictions of the search (0, -1 or empty: any).
  std::vector<PluginKind> plugins;      // empty: every plugin of the runtime
  std::vector<RecomputeMode> recompute; // empty: none, selective and full (and op_selective under torchtitan)
  // --recompute-num-layers (with --recompute full): every plan recomputes this
  // many blocks per chunk whole. 0: every block; and where no --recompute is
  // given and the runtime can recompute only some (partial_recompute_counts:
  // Megatron-LM, torchtitan, ColossalAI's Llama pipelines), the fewest that fit are tried too.
  int64_t recompute_num_layers = 0;
  int64_t dp = 0, tp = 0, pp = 0;
  int64_t micro_batch_size = 0;
  int zero_stage = -1;
  // Gemini's chunk size in elements (--chunk-size); 0: ColossalAI's search (chunks.h).
  int64_t chunk_size = 0;
  // Whether ColossalAI's Gemini pins a host copy of every chunk (--pin-memory;
  // PluginOptions::pin_memory): its default, enable_async_reduce=True.
  bool pin_memory = true;
  // Sequence parallelism for layouts with tp > 1 (--sequence-parallel): on
  // (it divides the activations; the default), off, or both tried (twice the
  // tensor-parallel candidates: it also moves more bytes, tp_traffic.h).
  SequenceParallelChoice sequence_parallel = SequenceParallelChoice::on;
  // Context parallelism for hybrid_parallel layouts (--cp): 0 tries 1 and, for
  // sequences of kLongSequence tokens or more, 2, 4 and 8; a size tries only it.
  int64_t cp = 0;
  // Pipelines of this schedule only (--pp-schedule: 1f1b or interleaved;
  // empty: both); layouts without a pipeline are kept. The other schedule's
  // pipelines are still simulated (an interleaved layout's chunk count is
  // predicted from its 1F1B twin), then left out of the plans.
  std::optional<PipelineSchedule> pp_schedule;
  // --runtime megatron: Megatron-LM's --grad-reduce-in-bf16 and --fp8-param-gather
  // (PluginOptions) set on every candidate; --fp8-param-gather needs the
  // distributed optimizer, so the search then tries ZeRO stage 1 only.
  bool grad_reduce_in_bf16 = false;
  bool fp8_param_gather = false;
  // --runtime torchtitan: torchtitan's Triton RMSNorm (--fused-rmsnorm, eager
  // only) and its loss left out of torch.compile (--compile-model-only), on
  // every candidate (PluginOptions).
  bool fused_rmsnorm = false;
  bool compile_model_only = false;
  // Hybrid sharding (--dp-replicate): 1 shards over every data-parallel rank;
  // R > 1 searches only the layouts whose model states shard (FSDP, ZeRO), as
  // R replicas of dp/R ranks.
  int64_t dp_replicate = 1;
};

// Writes the training settings every candidate of `request` shares into
// `training`: precision, optimizer, activation profile, compilation,
// transformers release and sequence length (the micro-batch and recompute are
// each plan's own).
void apply_shared_training(const PlanRequest& request, TrainingOptions& training);

// The sequence length from which the search tries context parallelism by itself.
inline constexpr int64_t kLongSequence = 16384;

struct Candidate {
  EstimateRequest request;
  MemoryEstimate memory;
  StepSimulation simulation;            // events left empty
  int64_t max_micro_batch_that_fits = 0;  // same plan, largest micro-batch that fits every rank (0: none)
  int64_t peak_device_bytes() const;
};

// Candidates rejected for one reason: how many, and the one that came closest.
struct Rejection {
  int64_t count = 0;
  int64_t closest_overflow_bytes = -1;  // how far the closest one missed (-1: not a memory reason)
  std::string closest;                  // that candidate and where it does not fit, e.g. "...: DOES NOT FIT: ranks 0-7 need ..."
  std::optional<EstimateRequest> closest_request;  // that candidate's settings (absent: not a memory reason)
};

struct PlanSearchResult {
  std::vector<Candidate> plans;             // every plan that fits, best first, each at its fastest micro-batch
  int64_t candidates_evaluated = 0;       // estimates made: an interleaved candidate at each chunk count tried
  int64_t candidates_fitting = 0;
  std::map<std::string, Rejection> rejected;  // by reason
  std::string explanation;                  // why the winner, what the runner-up costs
  std::vector<std::string> suggestions;     // when nothing fits: what would
  // The rejected candidate that came closest to fitting (when nothing fits).
  std::optional<EstimateRequest> closest;
  int64_t closest_overflow_bytes = 0;
  // Which of the ways to save memory the candidates tried, whatever the filters left.
  bool tried_full_recompute = false;
  bool tried_offload = false;  // optimizer states or parameters kept on the host
  bool tried_micro_batch_one = false;
};

// The largest global batch and sequence length validate_plan_request accepts.
inline constexpr int64_t kMaxGlobalBatchSize = int64_t{1} << 24;
inline constexpr int64_t kMaxSeqLen = int64_t{1} << 20;

Status validate_plan_request(const Model& model, const PlanRequest& request);

// The filters (--plugin, --dp, --tp, --pp, --micro-batch, --zero-stage)
// against the model, the cluster, the batch and each other. A set of filters
// that leaves no candidate, or only candidates the estimate refuses, is a
// usage error: the message names the filter that excludes everything and why,
// rather than the search reporting that nothing fits in memory.
Status validate_plan_filters(const Model& model, const PlanRequest& request);

// Every candidate the search evaluates, before memory is considered: each
// plugin and layout the filters allow, at each micro-batch that divides a
// data-parallel rank's share of the global batch, in each recompute mode.
std::vector<EstimateRequest> plan_candidates(const Model& model, const PlanRequest& request);

// How far a running search is, for another thread to read (the GUI's progress
// count), and its stop request: the search checks it before each candidate and
// then returns an error of code `cancelled`.
struct SearchProgress {
  std::atomic<int64_t> candidates{0};  // enumerated, set once before the first is evaluated
  std::atomic<int64_t> done{0};        // evaluated or skipped so far
  std::atomic<bool> stop{false};
};

// `progress`, where given, is updated as the candidates are evaluated. The
// suggestions made when nothing fits (a few smaller searches) are not counted.
Result<PlanSearchResult> search_plans(const Model& model, const PlanRequest& request, SearchProgress* progress = nullptr);

// "hybrid_parallel dp 2 × tp 8 × pp 4 + sp, zero 1, recompute selective, micro-batch 1 × 16"
std::string describe_plan(const EstimateRequest& request);

}  // namespace tessera::planner
