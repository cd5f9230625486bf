// Per-rank, per-category memory of one training configuration: the planner's
// central estimate. Ranks that differ (pipeline stages) are reported one by
// one; consecutive stages with identical bytes share a row.
//
// Model states follow Rajbhandari et al. 2020 ("ZeRO", §3.1 and §5): under
// mixed precision with Adam every parameter costs 2 (16-bit weight) + 2 (16-bit
// gradient) + 12 (fp32 master, momentum, variance) bytes = 16Ψ; ZeRO-1 shards
// the 12, ZeRO-2 also the gradient, ZeRO-3 (FSDP, Gemini) everything.
// Activations follow activations.h; buffers, workspaces and the runtime reserve
// are stated as Assumptions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "tessera/planner/gemini_gathering.h"
#include "tessera/planner/hardware.h"
#include "tessera/planner/memory_categories.h"
#include "tessera/planner/model.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

struct RankMemory {
  int first_stage = 0;          // pipeline stages this row covers (inclusive)
  int last_stage = 0;
  int64_t first_rank = 0;       // global ranks this row covers (inclusive)
  int64_t last_rank = 0;
  int first_layer = 0;          // blocks held, first..last (inclusive); last < first when none
  int last_layer = -1;
  bool has_embedding = false;
  bool has_head = false;
  int64_t in_flight_micro_batches = 1;  // chunk forwards under the interleaved schedule
  // Interleaved schedule: each model chunk's blocks (first_layer..last_layer
  // then span the first and the last chunk); empty otherwise.
  std::vector<StageLayers> layer_chunks;
  MemoryBreakdown bytes;
  int64_t device_total = 0;
  int64_t host_total = 0;
  int64_t gpu_capacity = 0;     // the GPU's total memory
  int64_t headroom = 0;         // what the plan must leave free (Assumptions::memory_headroom)
  int64_t margin = 0;           // capacity - headroom - device_total; negative when it does not fit
  // Kept from one step into the next besides the model states (Megatron-Core's
  // pipeline inputs and their gradients, retained_between_steps.cpp); freed
  // before the next step's peak, so not part of device_total.
  int64_t retained_between_steps = 0;
  bool fits() const { return margin >= 0; }
};

// What Gemini's chunk manager does with this model (placement after "auto").
// Backward holds, per gathered parameter chunk, a full gradient chunk until its
// reduce-scatter; recomputing a block's forward in backward gathers the same
// chunks that its backward needs, so recompute does not change the peaks.
struct GeminiSummary {
  int64_t chunk_size = 0;
  int64_t num_chunks = 0;
  std::vector<int64_t> chunk_used;      // elements used in each chunk, in packing order
  std::vector<int64_t> chunk_capacity;  // elements of each chunk: chunk_size, or a larger tensor's own (chunks.h)
  int64_t waste_elements = 0;
  int64_t peak_gathered_chunks = 0;    // parameter chunks one layer gathers at most (forward and backward)
  std::vector<std::vector<int>> chunks_of_layer;  // per layer slot, its chunks (chunks_by_layer)
  double kept_gathered_elements = 0;   // shard_param_frac's budget of chunks left gathered (gemini_static_placement.h)
  std::vector<bool> parameters_on_host;  // per chunk: its 16-bit parameter and gradient shards on the host
  GeminiStepReplay step;                 // a step of the request under this placement (gemini_gathering.h)
  int64_t padded_elements() const;     // all chunks' elements
  double shard_param_frac = 1;
  double offload_optim_frac = 0;       // of the chunks' elements: under `static`, whole chunks as ColossalAI moves them
  double offload_param_frac = 0;       // of the chunks' elements on the host (parameters_on_host)
  int64_t optimizer_chunks_on_host = 0;  // `static`: the chunks whose fp32 states ColossalAI offloads
  std::vector<int64_t> chunk_tensors;    // tensors packed in each chunk (ColossalAI's static placement counts them)
  // Sets parameters_on_host and the share offload_param_frac it makes.
  void set_parameters_on_host(std::vector<bool> on_host);
  bool parameter_chunk_on_host(size_t chunk) const { return chunk < parameters_on_host.size() && parameters_on_host[chunk]; }
  // Its fp32 states on the host: every chunk's at an offload_optim_frac of 1
  // (`cpu`, `auto`), else the leading optimizer_chunks_on_host (`static`).
  bool optimizer_chunk_on_host(size_t chunk) const {
    return offload_optim_frac >= 1 || static_cast<int64_t>(chunk) < optimizer_chunks_on_host;
  }
  GeminiChunkSet chunk_set() const;  // what the gathering replay needs (gemini_gathering.h)
};

struct MemoryEstimate {
  std::vector<RankMemory> ranks;  // every distinct rank, in rank order
  std::optional<GeminiSummary> gemini;
  int64_t cuda_context_bytes = 0;  // the figure used (assumption or GPU profile)
  bool fits() const;
  // The rank row with the least margin.
  const RankMemory& tightest() const;
};

// What a stage's activations are made of: each forward pass of model chunk j
// keeps pass_bytes[j] until its backward (the embedding's output with the
// first chunk; the head's and the logits with the last, logits_per_pass of
// it); a block running holds `working`, the backward pass `backward_scratch`
// besides. The memory model counts the passes held at the peak plus both.
struct StageActivations {
  std::vector<int64_t> pass_bytes;  // one per model chunk
  int64_t logits_per_pass = 0;      // of the last chunk's pass, on the last stage
  int64_t working = 0;
  int64_t backward_scratch = 0;
  // The working set and scratch come after the logits are freed
  // (ActivationTable::working_set_after_loss, on the stage holding the loss).
  bool working_after_logits = false;
  // What the working set and scratch add at the stage's peak: beyond the logits
  // where they follow them.
  int64_t transient_beyond(int64_t logits) const {
    const int64_t transient = working + backward_scratch;
    return working_after_logits ? std::max<int64_t>(0, transient - logits) : transient;
  }
};

// One pipeline stage as the memory model and the simulator see it.
struct StageShape {
  int stage = 0;
  int first_layer = 0;
  int num_layers = 0;
  bool first = false;        // holds the embedding
  bool last = false;         // holds the final norm, the head and the loss
  int64_t params = 0;        // parameters on one rank of this stage before data-parallel sharding
  int64_t non_matmul_params = 0;  // of which no GEMM's weight gradient produces (ParamTotals::non_matmul_per_tp_rank)
  std::vector<StageLayers> chunks;               // the stage's blocks, one range per model chunk
  std::vector<int64_t> in_flight_per_chunk{1};   // micro-batches of each chunk's activations held at the peak
  StageActivations activations;                  // what its passes keep
  // Micro-batches of activations held at the peak (chunk passes when interleaved).
  int64_t in_flight() const;
  // Block activations held at the peak, in micro-batch · block units.
  int64_t in_flight_blocks() const;
};

// The stages of a request, first to last (one stage without a pipeline), each
// with its activations (one activation table for all of them).
std::vector<StageShape> stage_shapes(const Model& model, const EstimateRequest& request);
// The same stages' blocks and parameters only, without what they keep for
// backward (activations, in_flight_per_chunk): what the simulator times.
std::vector<StageShape> stage_layouts(const Model& model, const EstimateRequest& request);

// --tp against the model: a positive tp must divide the attention heads, the
// key-value heads and the MLP width, so that every GPU holds whole heads and an
// equal slice of the MLP (Megatron-LM's column and row splits).
Status check_tensor_parallel(const ModelConfig& config, int64_t tp);

// --precision against the GPU (bf16 and fp8 need their tensor cores) and the
// activation profile (fp8 is Transformer Engine's, with the flash or megatron profile).
Status check_precision(Precision precision, ActivationProfile profile, const GpuProfile& gpu);

// --dp-replicate against the layout and plugin: R divides dp, and the plugin
// shards its model states (FSDP, ZeRO; not DDP, ZeRO-0 or Gemini's chunks).
Status check_hybrid_sharding(const EstimateRequest& request);

// Context parallelism against the sequence and the activation profile: ring
// attention runs a fused attention kernel (the flash profile), and each rank
// takes two balanced chunks of every sequence, so 2·cp must divide it.
Status check_context_parallel_sequence(int64_t seq_len, int64_t cp, ActivationProfile profile);

// ZeRO-2 (or 3 through ZeRO) with a pipeline: no runtime runs it (ColossalAI's
// HybridParallelPlugin asserts zero stage 0 or 1 under pp > 1, DeepSpeed's
// PipelineEngine asserts ZeRO stage < 2). `stage` names the option as typed.
Status check_zero_stage_with_pipeline(const std::string& stage, int zero_stage, int64_t pp);

// Checks the request against the model and GPU; the error names the option to change.
Status validate_request(const Model& model, const GpuProfile& gpu, const EstimateRequest& request);

// What the pipeline schedule's runtime accepts: the interleaved schedule needs a
// pipeline, 2 or more model chunks per stage, a block for every virtual stage
// and micro-batches in whole groups of pp (Megatron-LM; ColossalAI's
// InterleavedSchedule asserts num_microbatch % num_stages == 0); ColossalAI's
// 1F1B needs at least pp micro-batches (OneForwardOneBackwardSchedule asserts
// "Number of microbatch should be larger than number of stages",
// colossalai/pipeline/schedule/one_f_one_b.py and interleaved_pp.py at v0.5.0,
// d322ff8c). The search offers only layouts that pass.
Status check_pipeline_schedule(const Model& model, const EstimateRequest& request);

// torch_fsdp's CPU offload under ColossalAI (PyTorch FSDP1) keeps only the
// last micro-batch's gradient (fsdp_offload.h): one micro-batch per step
// there; FSDP2 (--runtime torchtitan) accumulates. The search offers only plans that pass.
Status check_fsdp_offload_accumulation(const EstimateRequest& request);

// ColossalAI's Gemini runs mixed precision only (GeminiDDP asserts fp16 or
// bf16) with an Adam (GeminiOptimizer's _AVAIL_OPTIM_LIST: FusedAdam, CPUAdam,
// HybridAdam), colossalai/zero/gemini/ at v0.5.0 (d322ff8c): otherwise one line
// naming the flag and the fix.
Status gemini_precision_and_optimizer(Precision precision, OptimizerKind optimizer);

Result<MemoryEstimate> estimate_memory(const Model& model, const GpuProfile& gpu, const EstimateRequest& request);

}  // namespace tessera::planner
