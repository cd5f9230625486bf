// Input checks for an estimate. Every message names the option to change and
// how: the command line prints it as the one line a user sees.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "activations_hf.h"
#include "model_states.h"
#include "tessera/planner/activations.h"
#include "tessera/planner/fp8.h"
#include "tessera/planner/gradient_accumulation.h"
#include "tessera/planner/memory_headroom.h"
#include "tessera/planner/op_checkpoint_policy.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/recompute_blocks.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner {
namespace {

constexpr double kMaxChunkCandidates = 1 << 20;  // chunk sizes the Gemini search may try (about a second)
constexpr double kMaxActivationBytes = 1152921504606846976.0;  // 2^60 bytes: int64 sums stay exact

Error invalid(std::string message) { return make_error(ErrorCode::invalid_argument, std::move(message)); }

std::string str(int64_t v) { return std::to_string(v); }

// Divisors of n up to `limit` entries, for "choose one of" hints.
std::string divisors(int64_t n) {
  std::string out;
  int shown = 0;
  for (int64_t d = 1; d <= n && shown < 8; ++d) {
    if (n % d == 0) {
      out += (out.empty() ? "" : ", ") + str(d);
      ++shown;
    }
  }
  return out;
}

Status check_positive(const char* option, int64_t value) {
  if (value <= 0) return invalid(std::string(option) + " must be a positive integer, got " + str(value));
  return Status::success();
}

Status check_fraction(const char* option, double value) {
  if (!(value >= 0.0 && value <= 1.0)) return invalid(std::string(option) + " must lie in [0, 1], got " + std::to_string(value));
  return Status::success();
}

Status check_sizes(const EstimateRequest& r) {
  const auto& t = r.training;
  const auto& l = r.layout;
  for (auto [option, value] : {std::pair{"--micro-batch", t.micro_batch_size}, std::pair{"--seq", t.seq_len},
                               std::pair{"--micro-batches", t.num_micro_batches}, std::pair{"--dp", l.dp},
                               std::pair{"--tp", l.tp}, std::pair{"--pp", l.pp}, std::pair{"--cp", l.cp},
                               std::pair{"--dp-replicate", l.dp_replicate}}) {
    if (Status s = check_positive(option, value); !s) return s;
  }
  // Bounds on the sizes themselves; check_activation_bytes bounds their products.
  if (t.seq_len > (int64_t{1} << 20)) return invalid("--seq must be at most 1048576, got " + str(t.seq_len));
  if (t.micro_batch_size > (int64_t{1} << 16)) return invalid("--micro-batch must be at most 65536, got " + str(t.micro_batch_size));
  if (t.num_micro_batches > (int64_t{1} << 20)) return invalid("--micro-batches must be at most 1048576, got " + str(t.num_micro_batches));
  if (l.world_size() > (int64_t{1} << 20)) return invalid("--dp x --tp x --pp x --cp must be at most 1048576 GPUs, got " + str(l.world_size()));
  return Status::success();
}

// Context parallelism as the runtimes that have it run it: ColossalAI's
// HybridParallelPlugin (sequence_parallelism_mode "ring_attn"), Megatron-Core
// (context_parallel_size) and torchtitan (FSDP2 with context_parallel), each a
// ring over fused attention kernels. The sequence splits into 2·cp chunks,
// each rank taking chunk i and 2·cp − 1 − i so that causal attention's work
// balances (Megatron-LM's get_batch_on_this_cp_rank, Transformer Engine's
// ring attention), so the sequence must divide by 2·cp.
Status check_context_parallel(const EstimateRequest& r) {
  const int64_t cp = r.layout.cp;
  if (cp == 1) return Status::success();
  const PluginOptions& p = r.plugin;
  const bool supported = p.kind == PluginKind::hybrid_parallel || (p.kind == PluginKind::torch_fsdp && p.runtime == Runtime::torchtitan);
  if (!supported) {
    return invalid("--cp " + str(cp) + " needs --plugin hybrid_parallel, or torch_fsdp with --runtime torchtitan; " +
                   std::string(enum_name(p.kind)) + (p.runtime == Runtime::colossalai ? "" : " under " + std::string(enum_name(p.runtime))) +
                   " has no context parallelism");
  }
  return check_context_parallel_sequence(r.training.seq_len, cp, r.training.activation_profile);
}

// --recompute-num-layers K: Megatron-LM's --recompute-method block, K blocks of
// each model chunk recomputed whole (recompute_blocks.h).
Status check_recompute_num_layers(const ModelConfig& c, const EstimateRequest& r) {
  const TrainingOptions& t = r.training;
  const int64_t k = t.recompute_num_layers;
  if (k == 0) return Status::success();
  if (k < 0) return invalid("--recompute-num-layers must be a positive count of blocks (or 0 for every block), got " + str(k));
  if (t.recompute != RecomputeMode::full) {
    return invalid("--recompute-num-layers " + str(k) + " says how many blocks of each model chunk --recompute full recomputes whole; add --recompute full (got --recompute " +
                   std::string(enum_name(t.recompute)) + ")");
  }
  if (k > c.num_layers) {
    return invalid("--recompute-num-layers " + str(k) + " exceeds the " + str(c.num_layers) + " layers of " + c.name + "; use at most " + str(c.num_layers) +
                   ", or 0 for every block");
  }
  if (const std::optional<std::string> refusal = torchtitan_count_refusal(c, r)) return invalid(*refusal);
  return Status::success();
}

Status check_model_fit(const Model& m, const EstimateRequest& r) {
  const ModelConfig& c = m.config;
  const auto& l = r.layout;
  if (Status s = check_tensor_parallel(c, l.tp); !s) return s;
  if (l.pp > c.num_layers) {
    return invalid("--pp " + str(l.pp) + " exceeds the " + str(c.num_layers) + " layers of " + c.name +
                   "; use at most --pp " + str(c.num_layers));
  }
  if (Status s = check_context_parallel(r); !s) return s;
  if (Status s = check_runtime_model(c, r); !s) return s;
  if (Status s = check_op_selective(c, r); !s) return s;
  if (Status s = check_recompute_num_layers(c, r); !s) return s;
  if (l.sequence_parallel && r.local_seq_len() % l.tp != 0) {
    return invalid("--seq " + str(r.training.seq_len) + " must be a multiple of --tp " + str(l.tp) + (l.cp > 1 ? " × --cp " + str(l.cp) : "") +
                   " under --sequence-parallel");
  }
  if (c.learned_positions && r.training.seq_len > c.max_positions) {
    return invalid("--seq " + str(r.training.seq_len) + " exceeds the " + str(c.max_positions) + " learned positions of " +
                   c.name + "; use --seq " + str(c.max_positions) + " or less");
  }
  return Status::success();
}

Status check_plugin(const Model& m, const EstimateRequest& r) {
  const PluginOptions& p = r.plugin;
  const auto& l = r.layout;
  const std::string plugin(enum_name(p.kind));
  if (p.kind != PluginKind::hybrid_parallel && (l.tp > 1 || l.pp > 1)) {
    return invalid("--tp/--pp above 1 need --plugin hybrid_parallel (" + plugin + " is data parallel only)");
  }
  if (p.kind != PluginKind::hybrid_parallel && l.sequence_parallel) {
    return invalid("--sequence-parallel needs --plugin hybrid_parallel with --tp above 1");
  }
  if (Status s = check_runtime(r); !s) return s;
  if (Status s = check_hybrid_sharding(r); !s) return s;
  const int stage = p.effective_zero_stage();
  if (p.zero_stage >= 0 && p.kind != PluginKind::low_level_zero && p.kind != PluginKind::hybrid_parallel) {
    return invalid("--zero-stage applies to low_level_zero and hybrid_parallel, not " + plugin +
                   " (gemini and torch_fsdp are ZeRO-3 already)");
  }
  const bool deepspeed_zero3 = p.runtime == Runtime::deepspeed && !p.deepspeed_pipeline();  // check_runtime held it to low_level_zero at stage 3
  if (stage == 3 && !deepspeed_zero3) return invalid("--zero-stage 3: use --plugin gemini or --plugin torch_fsdp for ZeRO-3");
  if (p.kind == PluginKind::low_level_zero && !deepspeed_zero3 && (stage < 1 || stage > 2)) {
    return invalid("--zero-stage must be 1 or 2 for low_level_zero, got " + std::to_string(stage));
  }
  if (p.kind == PluginKind::hybrid_parallel && (stage < 0 || stage > 2)) {
    return invalid("--zero-stage must be 0, 1 or 2 for hybrid_parallel, got " + std::to_string(stage));
  }
  if (Status s = check_zero_stage_with_pipeline("--zero-stage " + std::to_string(stage), stage, l.pp); !s) return s;
  if (p.tp_comm_overlap && !(p.kind == PluginKind::hybrid_parallel && l.tp > 1 && l.sequence_parallel)) {
    return invalid("--tp-comm-overlap overlaps sequence-parallel tensor-parallel calls: it needs --plugin hybrid_parallel, --tp above 1 and --sequence-parallel");
  }
  if (p.overlap_param_gather && !(p.kind == PluginKind::hybrid_parallel && stage >= 1)) {
    return invalid("--overlap-param-gather overlaps the distributed optimizer's all-gather: it needs --plugin hybrid_parallel with --zero-stage 1 or 2");
  }
  // Megatron-LM's validate_args (core_v0.14.0 megatron/training/arguments.py): without the
  // overlap the interleaved schedule needs 3 stages or more.
  if (p.no_overlap_p2p_comm && !(p.runtime == Runtime::megatron && p.pp_schedule == PipelineSchedule::interleaved && l.pp > 2)) {
    return invalid("--no-overlap-p2p-communication makes the interleaved schedule's pipeline sends wait (Megatron-LM): it needs --runtime megatron, "
                   "--pp-schedule interleaved and --pp above 2");
  }
  if (p.pipeline_scatter_gather && !(p.runtime == Runtime::megatron && l.pp > 1 && l.tp > 1 && !l.sequence_parallel)) {
    return invalid("--scatter-gather-tensors-in-pipeline splits Megatron-LM's pipeline sends over the tp ranks: it needs --runtime megatron, "
                   "--pp and --tp above 1 and no --sequence-parallel");
  }
  if (p.no_gradient_accumulation_fusion && p.runtime != Runtime::megatron) {
    return invalid("--no-gradient-accumulation-fusion turns off Megatron's fused weight-gradient accumulation: it needs --runtime megatron");
  }
  if (p.grad_reduce_in_bf16 && !(p.runtime == Runtime::megatron && grad_reduce_in_bf16_applies(r.training.precision))) {
    return invalid("--grad-reduce-in-bf16 keeps Megatron's main-gradient buffer in bf16 instead of fp32: it needs --runtime megatron and "
                   "--precision bf16 or fp8");
  }
  if (p.fp8_param_gather && !(p.runtime == Runtime::megatron && is_fp8(r.training.precision) && stage == 1)) {
    return invalid("--fp8-param-gather keeps Transformer Engine's weights in FP8 and all-gathers them so (Megatron-LM): it needs --runtime megatron, "
                   "--precision fp8 and the distributed optimizer (--zero-stage 1)");
  }
  const TrainingOptions& t = r.training;
  if (p.fused_rmsnorm && !(fused_rmsnorm_applies(p.runtime, t.activation_profile, t.torch_compile) && is_torchtitan_llama_block(m.config))) {
    return invalid("--fused-rmsnorm is torchtitan's Triton RMSNorm in its eager Llama block: it needs --runtime torchtitan, a Llama-shaped "
                   "model, --activation-profile flash and no --torch-compile");
  }
  if (p.compile_model_only && !compile_model_only_applies(p.runtime, t.activation_profile, t.torch_compile)) {
    return invalid("--compile-model-only leaves torchtitan's loss out of torch.compile: it needs --runtime torchtitan, --torch-compile and "
                   "--activation-profile flash");
  }
  if (p.cross_entropy_loss_fusion && p.runtime != Runtime::megatron) {
    return invalid("--cross-entropy-loss-fusion is Megatron-Core's fused loss: it needs --runtime megatron");
  }
  if (p.grad_reduce_after_backward && p.kind != PluginKind::hybrid_parallel) {
    return invalid("--grad-reduce-after-backward describes Megatron-LM's and DeepSpeed's pipeline reductions: it needs --plugin hybrid_parallel");
  }
  if (p.cpu_offload && !p.cpu_offload_applies()) {
    return invalid("--cpu-offload applies to torch_fsdp, low_level_zero and hybrid_parallel with --zero-stage 1 or 2; for gemini use --placement");
  }
  if (Status s = check_fsdp_offload_accumulation(r); !s) return s;
  if (p.kind == PluginKind::gemini) {
    if (Status s = gemini_precision_and_optimizer(r.training.precision, r.training.optimizer); !s) return s;
  }
  if (Status s = check_pipeline_schedule(m, r); !s) return s;
  if (p.bucket_bytes <= 0) return invalid("--bucket-mb must be positive");
  if (p.reduce_bucket_numel <= 0) return invalid("--reduce-bucket-m must be positive");
  const GeminiOptions& g = p.gemini;
  for (auto [option, value] : {std::pair{"--shard-param-frac", g.shard_param_frac}, std::pair{"--offload-optim-frac", g.offload_optim_frac},
                               std::pair{"--offload-param-frac", g.offload_param_frac}}) {
    if (Status s = check_fraction(option, value); !s) return s;
  }
  if (!(g.search_range_m >= 0 && g.search_range_m <= 4096)) return invalid("--search-range-m must lie in [0, 4096]");
  if (!(g.min_chunk_size_m >= 0 && g.min_chunk_size_m <= 4096)) return invalid("--min-chunk-size-m must lie in [0, 4096]");
  if (g.search_interval <= 0 || g.search_interval > (int64_t{1} << 32)) {
    return invalid("--search-interval must be a positive integer no larger than 4294967296, got " + str(g.search_interval));
  }
  // The search tries every size in the range at search_interval steps: bound its work.
  const double search_range = std::round(g.search_range_m * 1048576.0);
  if (p.kind == PluginKind::gemini && g.chunk_size == 0 && search_range / static_cast<double>(g.search_interval) > kMaxChunkCandidates) {
    return invalid("--search-interval " + str(g.search_interval) + " is too fine for --search-range-m " + format_number(g.search_range_m) +
                   " (over 1048576 chunk sizes to try); use --search-interval " +
                   str(static_cast<int64_t>(std::ceil(search_range / kMaxChunkCandidates))) + " or more");
  }
  if (g.chunk_size > (int64_t{1} << 40)) return invalid("--chunk-size must be at most 1099511627776 elements, got " + str(g.chunk_size));
  // Any size is a chunk size to ColossalAI: a tensor larger than it gets a chunk
  // of its own (ChunkManager.register_tensor); a sharded chunk must split evenly
  // (Chunk.__init__ asserts chunk_size % pg_size == 0), colossalai/zero/gemini/
  // chunk/manager.py and chunk.py at v0.5.0 (d322ff8c).
  if (p.kind == PluginKind::gemini && g.chunk_size != 0) {
    if (g.chunk_size < 0) return invalid("--chunk-size must be 0 (search) or a positive number of elements, got " + str(g.chunk_size));
    if (g.chunk_size % l.dp != 0) {
      return invalid("--chunk-size " + str(g.chunk_size) + " must be a multiple of --dp " + str(l.dp) + " (chunks shard evenly)");
    }
  }
  return Status::success();
}

// The largest byte counts the memory model forms are a stage's activations:
// bound them in double (every block, no tensor-parallel split) so that the
// int64 arithmetic of the estimate cannot overflow.
Status check_activation_bytes(const Model& m, const EstimateRequest& r) {
  const TrainingOptions& t = r.training;
  if (runs_hugging_face_modules(t.activation_profile) && !hf_profile_measured(m.config.family)) {
    return invalid("--activation-profile " + std::string(enum_name(t.activation_profile)) + " is measured for GPT-2 and Llama-layout models (llama, mistral, "
                   "qwen2), not " + std::string(to_string(m.config.family)) + "; use flash or megatron");
  }
  if (runs_hugging_face_modules(t.activation_profile)) {
    if (auto reason = unsupported_transformers_version(t.transformers_version, m.config.family)) return invalid(*reason);
  }
  const ActivationTable table = request_activation_table(m.config, r.plugin, t);
  const double tokens = static_cast<double>(t.micro_batch_size) * static_cast<double>(t.seq_len);
  const auto bytes = [&](const std::vector<ActivationTerm>& terms) {
    double total = 0;
    for (const ActivationTerm& term : terms) {
      total += (term.per_micro_batch ? 1.0 : term.per_position ? static_cast<double>(t.seq_len) : tokens) * static_cast<double>(term.elements_per_token) *
               static_cast<double>(term.bytes_per_element) * (term.per_key_position ? static_cast<double>(t.seq_len) : 1.0);
    }
    return total;
  };
  // Stage 0 holds the most; interleaved chunk forwards are counted as whole micro-batches (an upper bound).
  int64_t in_flight = 0;
  const int64_t chunks = r.plugin.model_chunks();
  for (int64_t n : in_flight_at_peak(r.plugin.pp_schedule, r.layout.pp, 0, t.num_micro_batches, chunks, std::vector<int64_t>(static_cast<size_t>(chunks), 1))) {
    in_flight += n;
  }
  const double per_micro_batch = static_cast<double>(m.config.num_layers) * bytes(table.block) + bytes(table.first_stage) +
                                 bytes(table.last_stage) + bytes(table.logits) + bytes(table.shared_checkpoint_inputs);
  const double total = static_cast<double>(in_flight) * per_micro_batch + bytes(table.backward_scratch) + bytes(table.block);
  if (total > kMaxActivationBytes) {
    return invalid("--seq " + str(t.seq_len) + " with --micro-batch " + str(t.micro_batch_size) + " and " + str(in_flight) +
                   " micro-batches in flight needs over 1 EiB of activations per GPU; lower --seq, --micro-batch or --micro-batches");
  }
  return Status::success();
}

Status check_assumptions(const Assumptions& a) {
  if (!(a.allocator_reserve_fraction >= 0 && a.allocator_reserve_fraction < 1)) return invalid("--fragmentation must lie in [0, 1)");
  if (!(a.auto_placement_cuda_fraction > 0 && a.auto_placement_cuda_fraction <= 1)) return invalid("the auto placement fraction must lie in (0, 1]");
  if (a.cuda_context_bytes < -1) return invalid("--cuda-context-mib must be -1 (the GPU profile's figure) or at least 0");
  if (a.nccl_bytes_per_group < 0) return invalid("--nccl-mib must not be negative");
  if (a.cublas_workspace_bytes < 0) return invalid("--cublas-workspace-mib must not be negative");
  if (a.memory_headroom_bytes < 0 || a.memory_headroom_bytes > (int64_t{1} << 50) || !(a.memory_headroom_fraction >= 0 && a.memory_headroom_fraction < 1)) {
    return invalid("--memory-headroom must be GiB from 0 to 1048576 (e.g. 2) or a percentage below 100 (e.g. 10%)");
  }
  return Status::success();
}

}  // namespace

Status check_fsdp_offload_accumulation(const EstimateRequest& r) {
  if (!r.plugin.fsdp_offload() || r.plugin.runtime != Runtime::colossalai || r.training.num_micro_batches == 1) return Status::success();
  return invalid("--micro-batches " + str(r.training.num_micro_batches) +
                 ": PyTorch FSDP keeps only the last micro-batch's gradient under --cpu-offload; use --micro-batches 1 (a larger --micro-batch), "
                 "or --runtime torchtitan (FSDP2)");
}

Status check_pipeline_schedule(const Model& m, const EstimateRequest& r) {
  const PluginOptions& p = r.plugin;
  const auto& l = r.layout;
  if (p.pp_schedule != PipelineSchedule::interleaved) {
    if (p.num_model_chunks != 1) return invalid("--model-chunks " + str(p.num_model_chunks) + " needs --pp-schedule interleaved");
    if (p.kind == PluginKind::hybrid_parallel && p.pp_schedule == PipelineSchedule::one_f_one_b && l.pp > 1 &&
        r.training.num_micro_batches < l.pp) {
      return invalid("--micro-batches " + str(r.training.num_micro_batches) + " is below --pp " + str(l.pp) +
                     ": ColossalAI's 1F1B schedule needs a micro-batch per stage at least; use --micro-batches " + str(l.pp) + " or more");
    }
    return Status::success();
  }
  if (l.pp < 2) return invalid("--pp-schedule interleaved needs a pipeline (--pp 2 or more)");
  if (p.num_model_chunks < 2) return invalid("--pp-schedule interleaved needs --model-chunks 2 or more (model chunks per stage)");
  if (p.num_model_chunks > m.config.num_layers || l.pp * p.num_model_chunks > m.config.num_layers) {
    return invalid("--pp " + str(l.pp) + " × --model-chunks " + str(p.num_model_chunks) + " exceeds the " + str(m.config.num_layers) +
                   " layers of " + m.config.name + "; each chunk needs a layer");
  }
  // ColossalAI spreads the blocks over the pp · chunks virtual stages however
  // they fall (stage_chunks); Megatron-Core needs every stage's blocks in equal
  // chunks (interleaved_chunk_counts), as the search offers them.
  if (p.runtime == Runtime::megatron) {
    const std::vector<int64_t> counts = interleaved_chunk_counts(m.config.num_layers, l.pp);
    if (std::find(counts.begin(), counts.end(), p.num_model_chunks) == counts.end()) {
      std::string allowed;
      for (int64_t v : counts) allowed += (allowed.empty() ? "" : ", ") + str(v);
      return invalid("--model-chunks " + str(p.num_model_chunks) + " does not divide the blocks of every stage (" +
                     describe_layer_split(static_cast<int>(m.config.num_layers), static_cast<int>(l.pp), 1) +
                     "), which Megatron-Core requires; " + (allowed.empty() ? "run --pp-schedule 1f1b" : "use --model-chunks " + allowed));
    }
  }
  if (r.training.num_micro_batches % l.pp != 0) {
    return invalid("--micro-batches " + str(r.training.num_micro_batches) + " must be a multiple of --pp " + str(l.pp) + " under --pp-schedule interleaved");
  }
  return Status::success();
}

Status gemini_precision_and_optimizer(Precision precision, OptimizerKind optimizer) {
  if (!is_mixed_precision(precision)) {
    return invalid("--precision " + std::string(enum_name(precision)) + ": Gemini runs mixed precision only (bf16 or fp16, fp32 master weights); "
                   "use --precision bf16 or fp16");
  }
  if (optimizer_state_count(optimizer) != 2) {
    return invalid("--optimizer " + std::string(enum_name(optimizer)) + ": Gemini's optimizer is an Adam (HybridAdam, CPUAdam or FusedAdam); "
                   "use --optimizer adamw or adam");
  }
  return Status::success();
}

namespace {

// The tensor-parallel sizes that split the model: dividing its heads, its
// key/value heads and its MLP width (the first eight).
std::string model_tensor_parallel_sizes(const ModelConfig& c) {
  std::string out;
  int shown = 0;
  for (int64_t d = 1; d <= c.num_heads && shown < 8; ++d) {
    if (c.num_heads % d != 0 || c.num_kv_heads % d != 0 || c.intermediate_size % d != 0) continue;
    out += (out.empty() ? "" : ", ") + str(d);
    ++shown;
  }
  return out + " (dividing its heads, key/value heads and MLP width)";
}

}  // namespace

Status check_tensor_parallel(const ModelConfig& c, int64_t tp) {
  const auto refuse = [&](const std::string& what) {
    return invalid("--tp " + str(tp) + " does not divide " + what + " of " + c.name + "; choose one of " + model_tensor_parallel_sizes(c));
  };
  if (c.num_heads % tp != 0) return refuse("num_attention_heads " + str(c.num_heads));
  if (c.num_kv_heads % tp != 0) return refuse("num_key_value_heads " + str(c.num_kv_heads));
  if (c.intermediate_size % tp != 0) return refuse("the MLP width " + str(c.intermediate_size));
  return Status::success();
}

Status validate_request(const Model& model, const GpuProfile& gpu, const EstimateRequest& request) {
  if (Status s = check_sizes(request); !s) return s;
  if (Status s = check_model_fit(model, request); !s) return s;
  if (Status s = check_plugin(model, request); !s) return s;
  if (Status s = check_activation_bytes(model, request); !s) return s;
  if (Status s = check_assumptions(request.assumptions); !s) return s;
  if (Status s = check_memory_headroom(request.assumptions, gpu); !s) return s;
  return check_precision(request.training.precision, request.training.activation_profile, gpu);
}

Status check_hybrid_sharding(const EstimateRequest& r) {
  const auto& l = r.layout;
  const PluginOptions& p = r.plugin;
  if (l.dp_replicate == 1) return Status::success();
  const std::string option = "--dp-replicate " + str(l.dp_replicate);
  if (l.dp % l.dp_replicate != 0) {
    return invalid(option + " does not divide --dp " + str(l.dp) + " (each replica shards over dp/R ranks); choose one of " + divisors(l.dp));
  }
  const bool shards = p.kind == PluginKind::torch_fsdp || p.kind == PluginKind::low_level_zero ||
                      (p.kind == PluginKind::hybrid_parallel && p.effective_zero_stage() >= 1);
  if (!shards) {
    return invalid(option + " needs sharded model states: torch_fsdp, low_level_zero, or hybrid_parallel with --zero-stage 1 or 2 (" +
                   std::string(enum_name(p.kind)) +
                   (p.kind == PluginKind::gemini ? " shards every chunk over all ranks)" : " keeps them whole on every rank)"));
  }
  return Status::success();
}

Status check_context_parallel_sequence(int64_t seq_len, int64_t cp, ActivationProfile profile) {
  if (cp <= 1) return Status::success();
  if (profile != ActivationProfile::flash && profile != ActivationProfile::tessera && profile != ActivationProfile::tessera_gpu) {
    return invalid("--cp " + str(cp) + " runs ring attention over a fused attention kernel; use --activation-profile flash (tessera or tessera_gpu for the engine's runs)");
  }
  if (seq_len % (2 * cp) != 0) {
    return invalid("--seq " + str(seq_len) + " must be a multiple of 2 × --cp = " + str(2 * cp) + " (each rank takes two balanced chunks of every sequence)");
  }
  return Status::success();
}

Status check_zero_stage_with_pipeline(const std::string& stage, int zero_stage, int64_t pp) {
  if (zero_stage < 2 || pp <= 1) return Status::success();
  return invalid(stage + " cannot be combined with --pp " + str(pp) +
                 " (pipeline micro-batches accumulate whole gradients, and no runtime runs it: ColossalAI and DeepSpeed's pipelines "
                 "take ZeRO stage 0 or 1); use --zero-stage 1 or 0");
}

Status check_precision(Precision precision, ActivationProfile profile, const GpuProfile& gpu) {
  if (precision == Precision::bf16 && gpu.peak_tflops.bf16 <= 0) {
    return invalid("--precision bf16 is not supported by " + gpu.name + " (no bf16 tensor cores); use --precision fp16");
  }
  if (precision == Precision::fp8 && gpu.peak_tflops.fp8 <= 0) {
    return invalid("--precision fp8 is not supported by " + gpu.name + " (no FP8 tensor cores: Ada or Hopper and later); use --precision " +
                   (gpu.peak_tflops.bf16 > 0 ? "bf16" : "fp16"));
  }
  // FP8 runs Transformer Engine's layers (fp8.h), whose saved tensors are the
  // flash profile's (or Korthikanti's), not those of Hugging Face's modules or Tessera's engine.
  if (precision == Precision::fp8 && profile != ActivationProfile::flash && profile != ActivationProfile::megatron) {
    return invalid("--precision fp8 runs Transformer Engine's layers; use --activation-profile flash or megatron, not " +
                   std::string(enum_name(profile)));
  }
  return Status::success();
}

}  // namespace tessera::planner
