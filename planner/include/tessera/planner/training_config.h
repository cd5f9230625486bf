// What the user asks the planner about: the training set-up, the parallel
// layout, the plugin and its knobs, and the stated assumptions. The command
// line, plan files and the GUI all bind to these structs. Each field states its
// default; plugin knobs carry ColossalAI's names so that exports map one to one.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "tessera/planner/enum_names.h"
#include "tessera/planner/transformers_version.h"

namespace tessera::planner {

// fp16/bf16: mixed precision with fp32 master weights. fp8: Transformer
// Engine's FP8 training (fp8.h): bf16 weights, fp32 master weights, the
// blocks' GEMMs in FP8 (E4M3 forward, E5M2 gradients, delayed scaling).
enum class Precision { fp32, fp16, bf16, fp8 };
enum class OptimizerKind { adam, adamw, sgd, sgd_momentum };
// none, selective and full: Korthikanti et al. 2022 §5; op_selective: torchtitan's
// op-level policy (op_checkpoint_policy.h), which only --runtime torchtitan runs.
enum class RecomputeMode { none, selective, full, op_selective };
// Which runtime's saved tensors the activation model counts (see activations.h):
// flash for GPU runtimes (PyTorch SDPA, FlashAttention-2), hf* for Hugging
// Face models run eagerly (measured), megatron for Korthikanti et al.'s
// accounting, tessera for our engine on the CPU, tessera_gpu for its GPU step.
enum class ActivationProfile { megatron, tessera, flash, hf, hf_eager, hf_autocast, tessera_gpu };
// interleaved: 1F1B over virtual stages, each GPU holding several model chunks (Narayanan et al. 2021, §2.2.2).
enum class PipelineSchedule { gpipe, one_f_one_b, interleaved };
enum class PluginKind { torch_ddp, torch_fsdp, low_level_zero, gemini, hybrid_parallel };
enum class FsdpStrategy { full_shard, shard_grad_op };
enum class GeminiPlacement { cuda, cpu, static_placement, auto_placement };
// Which runtime executes the plan, for the model states it keeps (model_states.h):
// colossalai for ColossalAI's Booster plugins, which Tessera's engine follows
// (every plugin); megatron for Megatron-Core (hybrid_parallel; --zero-stage 1 is
// its distributed optimizer); torchtitan for FSDP2 as torchtitan applies it
// (torch_fsdp); deepspeed for DeepSpeed ZeRO-3 (low_level_zero at stage 3) or
// its pipeline engine with the BF16_Optimizer or, under fp16, DeepSpeedZeroOptimizer
// at stage 1 (hybrid_parallel: deepspeed_pipeline.h).
enum class Runtime { colossalai, megatron, torchtitan, deepspeed };

// The plugin whose model states a runtime describes by default (validate_runtime.cpp):
// Megatron-Core's hybrid_parallel, torchtitan's FSDP2 as torch_fsdp, DeepSpeed's
// ZeRO-3 as low_level_zero (its pipeline engine is hybrid_parallel); under
// colossalai, any (torch_ddp by default).
constexpr PluginKind runtime_plugin(Runtime runtime) {
  switch (runtime) {
    case Runtime::colossalai: return PluginKind::torch_ddp;
    case Runtime::megatron: return PluginKind::hybrid_parallel;
    case Runtime::torchtitan: return PluginKind::torch_fsdp;
    case Runtime::deepspeed: return PluginKind::low_level_zero;
  }
  return PluginKind::torch_ddp;
}

inline constexpr std::array<EnumName<Precision>, 4> kPrecisionNames{
    {{Precision::fp32, "fp32"}, {Precision::fp16, "fp16"}, {Precision::bf16, "bf16"}, {Precision::fp8, "fp8"}}};
inline constexpr std::array<EnumName<OptimizerKind>, 4> kOptimizerNames{{{OptimizerKind::adam, "adam"}, {OptimizerKind::adamw, "adamw"}, {OptimizerKind::sgd, "sgd"}, {OptimizerKind::sgd_momentum, "sgd_momentum"}}};
inline constexpr std::array<EnumName<RecomputeMode>, 4> kRecomputeNames{
    {{RecomputeMode::none, "none"}, {RecomputeMode::selective, "selective"}, {RecomputeMode::full, "full"}, {RecomputeMode::op_selective, "op_selective"}}};
// The modes `tessera plan` and the GUI's search try: those of ColossalAI's and Megatron's runtimes.
inline constexpr std::array<RecomputeMode, 3> kSearchedRecomputeModes{RecomputeMode::none, RecomputeMode::selective, RecomputeMode::full};
inline constexpr std::array<EnumName<ActivationProfile>, 7> kActivationProfileNames{{{ActivationProfile::megatron, "megatron"},
                                                                                     {ActivationProfile::tessera, "tessera"},
                                                                                     {ActivationProfile::flash, "flash"},
                                                                                     {ActivationProfile::hf, "hf"},
                                                                                     {ActivationProfile::hf_eager, "hf_eager"},
                                                                                     {ActivationProfile::hf_autocast, "hf_autocast"},
                                                                                     {ActivationProfile::tessera_gpu, "tessera_gpu"}}};
// What Tessera's engine keeps, on the CPU or in its GPU step.
constexpr bool is_tessera_engine(ActivationProfile p) { return p == ActivationProfile::tessera || p == ActivationProfile::tessera_gpu; }
// The hf profiles: Hugging Face's modules, run eagerly (activations_hf.h, eager_elementwise.h).
constexpr bool runs_hugging_face_modules(ActivationProfile p) {
  return p == ActivationProfile::hf || p == ActivationProfile::hf_eager || p == ActivationProfile::hf_autocast;
}
inline constexpr std::array<EnumName<PipelineSchedule>, 3> kPipelineScheduleNames{
    {{PipelineSchedule::gpipe, "gpipe"}, {PipelineSchedule::one_f_one_b, "1f1b"}, {PipelineSchedule::interleaved, "interleaved"}}};
inline constexpr std::array<EnumName<PluginKind>, 5> kPluginNames{{{PluginKind::torch_ddp, "torch_ddp"}, {PluginKind::torch_fsdp, "torch_fsdp"}, {PluginKind::low_level_zero, "low_level_zero"}, {PluginKind::gemini, "gemini"}, {PluginKind::hybrid_parallel, "hybrid_parallel"}}};
inline constexpr std::array<EnumName<FsdpStrategy>, 2> kFsdpStrategyNames{{{FsdpStrategy::full_shard, "full_shard"}, {FsdpStrategy::shard_grad_op, "shard_grad_op"}}};
inline constexpr std::array<EnumName<Runtime>, 4> kRuntimeNames{
    {{Runtime::colossalai, "colossalai"}, {Runtime::megatron, "megatron"}, {Runtime::torchtitan, "torchtitan"}, {Runtime::deepspeed, "deepspeed"}}};
inline constexpr std::array<EnumName<GeminiPlacement>, 4> kGeminiPlacementNames{{{GeminiPlacement::cuda, "cuda"}, {GeminiPlacement::cpu, "cpu"}, {GeminiPlacement::static_placement, "static"}, {GeminiPlacement::auto_placement, "auto"}}};

inline std::span<const EnumName<Precision>> enum_names(Precision) { return kPrecisionNames; }
inline std::span<const EnumName<OptimizerKind>> enum_names(OptimizerKind) { return kOptimizerNames; }
inline std::span<const EnumName<RecomputeMode>> enum_names(RecomputeMode) { return kRecomputeNames; }
inline std::span<const EnumName<ActivationProfile>> enum_names(ActivationProfile) { return kActivationProfileNames; }

// tessera plan --sequence-parallel: with tp > 1, on, off, or both tried.
enum class SequenceParallelChoice { on, off, both };
inline constexpr std::array<EnumName<SequenceParallelChoice>, 3> kSequenceParallelChoiceNames{
    {{SequenceParallelChoice::on, "on"}, {SequenceParallelChoice::off, "off"}, {SequenceParallelChoice::both, "both"}}};
inline std::span<const EnumName<SequenceParallelChoice>> enum_names(SequenceParallelChoice) { return kSequenceParallelChoiceNames; }

inline std::span<const EnumName<PipelineSchedule>> enum_names(PipelineSchedule) { return kPipelineScheduleNames; }
inline std::span<const EnumName<PluginKind>> enum_names(PluginKind) { return kPluginNames; }
inline std::span<const EnumName<FsdpStrategy>> enum_names(FsdpStrategy) { return kFsdpStrategyNames; }
inline std::span<const EnumName<GeminiPlacement>> enum_names(GeminiPlacement) { return kGeminiPlacementNames; }
inline std::span<const EnumName<Runtime>> enum_names(Runtime) { return kRuntimeNames; }

// Bytes of one element of the weights, gradients and activations in compute
// precision: under fp8 the weights, gradients and most activations stay bf16
// (Transformer Engine casts a GEMM's operands to FP8 inside the layer).
constexpr int64_t compute_bytes(Precision p) { return p == Precision::fp32 ? 4 : 2; }
constexpr bool is_mixed_precision(Precision p) { return p != Precision::fp32; }
// fp32 tensors per parameter the optimizer keeps: Adam's two moments (Kingma & Ba
// 2015), SGD's momentum buffer, nothing for plain SGD.
constexpr int64_t optimizer_state_count(OptimizerKind k) {
  return (k == OptimizerKind::adam || k == OptimizerKind::adamw) ? 2 : (k == OptimizerKind::sgd_momentum ? 1 : 0);
}

// Where torchtitan's --fused-rmsnorm (its eager block's Triton RMSNorm) and
// --compile-model-only (its compiled blocks beside an eager loss) apply: under
// its runtime and the flash profile, eager or compiled (estimate's and plan's checks).
constexpr bool fused_rmsnorm_applies(Runtime runtime, ActivationProfile profile, bool torch_compile) {
  return runtime == Runtime::torchtitan && profile == ActivationProfile::flash && !torch_compile;
}
constexpr bool compile_model_only_applies(Runtime runtime, ActivationProfile profile, bool torch_compile) {
  return runtime == Runtime::torchtitan && profile == ActivationProfile::flash && torch_compile;
}

// Global gradient-norm clipping (Pascanu et al. 2013) that Tessera's engine
// applies and every export writes: DeepSpeed's gradient_clipping, ColossalAI's
// plugins' max_norm or the optimizer wrapper's clip_grad_by_norm.
constexpr double kMaxGradNorm = 1.0;

struct TrainingOptions {
  Precision precision = Precision::bf16;
  OptimizerKind optimizer = OptimizerKind::adamw;
  RecomputeMode recompute = RecomputeMode::none;
  // --recompute full: how many blocks of each model chunk backward recomputes
  // whole, the first ones, the others keeping all they save; 0 = every block
  // (recompute_blocks.h).
  int64_t recompute_num_layers = 0;
  ActivationProfile activation_profile = ActivationProfile::flash;  // GPU runtimes; the engine's CPU runs set tessera
  int64_t micro_batch_size = 1;   // samples per micro-batch per data-parallel rank
  int64_t seq_len = 1024;         // tokens per sample
  int64_t num_micro_batches = 1;  // micro-batches per step (gradient accumulation / pipeline)
  // The model runs under torch.compile: its element-wise ops fused, so each tensor kept for
  // backward crosses HBM once, as in runtimes that fuse them. Without it torchtitan's Llama
  // block and Hugging Face's GPT-2 run op by op (eager_elementwise.h). Memory is the profile's either way.
  bool torch_compile = false;
  // The hf profiles: which transformers release runs the model (--transformers-version;
  // transformers_version.h says what each keeps). Ignored by the other profiles.
  TransformersVersion transformers_version = kMeasuredTransformers;
};

// Ranks are ordered tensor-parallel fastest, then context, then data, then
// pipeline, as Megatron-Core orders them (megatron/core/parallel_state.py,
// initialize_model_parallel's order "tp-cp-ep-dp-pp" and its RankGenerator,
// NVIDIA/Megatron-LM@934c8260ada361db9b155d504c5b20600731d773):
// rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank)).
struct ParallelLayout {
  int64_t dp = 1;                  // data-parallel size; 1 = no replication
  int64_t tp = 1;                  // tensor-parallel size; 1 = no tensor parallelism
  int64_t pp = 1;                  // pipeline stages; 1 = no pipeline
  bool sequence_parallel = false;  // Megatron sequence parallelism in the tp group (needs tp > 1)
  // Context parallelism (--cp): each sequence split over cp ranks, attention
  // as a ring passing keys and values (Megatron-Core's context_parallel_size,
  // Transformer Engine's ring attention; torchtitan's context_parallel).
  int64_t cp = 1;
  // Hybrid sharding (--dp-replicate R): the data-parallel ranks form R
  // replicas, each sharding the model states over its dp/R ranks (× cp); the
  // gradients are reduce-scattered within a replica and each shard all-reduced
  // across the R replicas. PyTorch FSDP's HYBRID_SHARD and FSDP2's 2-D mesh
  // (torchtitan's data_parallel_replicate_degree), DeepSpeed's MiCS
  // (mics_shard_size), Megatron-Core's num_distributed_optimizer_instances.
  // 1 = shard over every data-parallel rank.
  int64_t dp_replicate = 1;
  int64_t world_size() const { return dp * tp * pp * cp; }
  // The ranks that hold the same parameters and reduce their gradients
  // together: data and context parallel ranks (Megatron-Core reduces over its
  // "dp-cp" group and its distributed optimizer shards over it; torchtitan
  // shards FSDP over dp_shard × cp).
  int64_t data_ranks() const { return dp * cp; }
  // The ranks ZeRO, FSDP and Gemini shard the model states over: one replica's.
  int64_t shard_ranks() const { return data_ranks() / dp_replicate; }
};

// ColossalAI's GeminiPlugin knobs (colossalai/booster/plugin/gemini_plugin.py).
struct GeminiOptions {
  int64_t chunk_size = 0;           // elements per chunk; 0 = search (chunks.h)
  GeminiPlacement placement_policy = GeminiPlacement::static_placement;
  double shard_param_frac = 1.0;    // static: fraction of chunks sharded across dp (rest replicated)
  double offload_optim_frac = 0.0;  // static: fraction of fp32 master + optimizer chunks on the host
  double offload_param_frac = 0.0;  // static: fraction of 16-bit parameter chunks on the host
  double search_range_m = 32;       // chunk search: range above the start, in Mi elements
  double min_chunk_size_m = 32;     // chunk search: smallest chunk, in Mi elements
  int64_t search_interval = 1024;   // chunk search: step between candidates (ColossalAI's hidden_dim)
};

// DeepSpeed ZeRO-3's parameter knobs, in elements, at DeepSpeed's defaults
// (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig, at edaa722).
struct DeepSpeedZero3Options {
  int64_t param_persistence_threshold = 100000;  // stage3_param_persistence_threshold: tensors this small stay whole
  int64_t prefetch_bucket_size = 50000000;       // stage3_prefetch_bucket_size: gathered ahead of use
  int64_t max_live_parameters = 1000000000;      // stage3_max_live_parameters: bounds what the prefetch may add
  int64_t max_reuse_distance = 1000000000;       // stage3_max_reuse_distance: kept if used again within this many
  int64_t reduce_bucket_size = 500000000;        // reduce_bucket_size: the gradient bucket (contiguous_gradients)
  int64_t sub_group_size = 1000000000;           // sub_group_size: the optimizer steps the partitions in groups this large
  bool offload_param = false;                    // offload_param on the CPU: the 16-bit partitions live on the host
};

struct PluginOptions {
  PluginKind kind = PluginKind::torch_ddp;
  Runtime runtime = Runtime::colossalai;
  // torch_ddp: PyTorch DistributedDataParallel's bucket_cap_mb (25) and gradient_as_bucket_view (False).
  int64_t bucket_bytes = int64_t{25} << 20;
  bool gradient_as_bucket_view = false;
  // torch_ddp as Tessera's engine runs it on GPUs: the gradients' all-reduce
  // sums in rank order through a scratch of one bucket (rank_order_reduction.h).
  bool rank_order_reduction = false;
  FsdpStrategy fsdp_strategy = FsdpStrategy::full_shard;
  // low_level_zero: stage 1 or 2 (default 1, as LowLevelZeroPlugin), 3 under --runtime deepspeed
  // (its default there); hybrid_parallel: 0, 1 or 2 (default 0; 1 under --runtime deepspeed).
  int zero_stage = -1;  // -1 = the plugin's default
  // ZeRO-Offload: the ZeRO optimizer's fp32 master weights, states and gradient shard on the host;
  // torch_fsdp: FSDP's CPU offload, every shard (weights, gradients, optimizer states) on the host (cpu_offload_applies).
  bool cpu_offload = false;
  int64_t reduce_bucket_numel = int64_t{12} << 20;  // low_level_zero reduce_bucket_size_in_m = 12
  // Whether the runtime pins its host buffers (pinned_host_blocks.h): ColossalAI
  // Gemini's pin_memory, which its default enable_async_reduce=True turns on;
  // DeepSpeed's offload_optimizer.pin_memory (offload_config.py at edaa722:
  // True by default). Tessera's own engine ignores it (it pins what it offloads
  // on GPUs, and nothing on the CPU).
  bool pin_memory = true;
  GeminiOptions gemini;
  DeepSpeedZero3Options deepspeed;  // --runtime deepspeed
  PipelineSchedule pp_schedule = PipelineSchedule::one_f_one_b;
  // interleaved: model chunks per GPU (HybridParallelPlugin num_model_chunks), 1 otherwise.
  int64_t num_model_chunks = 1;
  // hybrid_parallel with tp > 1 and sequence parallelism: Megatron-Core's --tp-comm-overlap
  // (Transformer Engine's userbuffers) or torchtitan's async TP, which split the tensor-parallel
  // all-gathers and reduce-scatters into chunks that run under the GEMMs they feed.
  bool tp_comm_overlap = false;
  // hybrid_parallel with a ZeRO stage (Megatron-Core's distributed optimizer): --overlap-param-gather,
  // the all-gather of the updated parameters run under the next step's first forward.
  bool overlap_param_gather = false;
  // --runtime megatron: Megatron-Core's --cross-entropy-loss-fusion, the vocabulary-parallel
  // loss compiled into fused kernels (vocab_parallel_loss.h).
  bool cross_entropy_loss_fusion = false;
  // hybrid_parallel: the data-parallel gradient reduction runs after the whole backward pass
  // instead of bucket by bucket under it: Megatron-LM's LocalDDP (--DDP-impl local, which
  // all-reduces its contiguous gradient buffer after forward_backward_func returns), Megatron-Core
  // without --overlap-grad-reduce, and DeepSpeed's pipeline engine (its ReduceGrads step ends the schedule).
  bool grad_reduce_after_backward = false;
  // Pipeline sends (simulate.h, pipeline_send_hold_seconds). Megatron-LM runs the
  // interleaved schedule's sends under the passes by default since Megatron-Core
  // (core_r0.8.0); --no-overlap-p2p-communication makes them wait, as 1F1B's
  // always do. Megatron-LM's --scatter-gather-tensors-in-pipeline (its default
  // through 2022, without sequence parallelism; Megatron-Core has none) sends
  // each tp rank's 1/tp of a stage's output, which the receiver all-gathers.
  bool no_overlap_p2p_comm = false;
  bool pipeline_scatter_gather = false;
  // --runtime megatron: Megatron-LM's --no-gradient-accumulation-fusion, every
  // gradient added into the main-gradient buffer by a kernel of its own
  // (gradient_accumulation.h), as Megatron-LM did for fp16 through 2022.
  bool no_gradient_accumulation_fusion = false;
  // --runtime megatron under bf16 or fp8: Megatron-LM's --grad-reduce-in-bf16, the
  // main-gradient buffer kept and reduced in bf16 instead of fp32 (NeMo's
  // grad_sync_dtype: bf16; gradient_accumulation.h, model_states_megatron.cpp).
  bool grad_reduce_in_bf16 = false;
  // --runtime megatron under fp8 with the distributed optimizer: Megatron-LM's
  // --fp8-param-gather (NeMo's fp8_params): Transformer Engine's GEMM weights are
  // FP8 tensors themselves, all-gathered in FP8, with no bf16 copy to cast (fp8.h).
  bool fp8_param_gather = false;
  // --runtime torchtitan: torchtitan's `norm_type = "fused_rmsnorm"`, its Triton RMSNorm
  // (pytorch/torchtitan 34711655, 2024-04-05, until 37c4b818 removed it, 2025-02-06;
  // the 8B and 13B configs of its 2024 performance tables), one kernel each way
  // that keeps its 16-bit input and an fp32 rstd per row, where the Python RMSNorm
  // runs op by op and keeps an fp32 copy (activations_torchtitan.h).
  bool fused_rmsnorm = false;
  // --runtime torchtitan under torch.compile: the blocks compiled, the loss eager
  // (torchtitan's `[compile] components = ["model"]`; every torchtitan from
  // e8977b00, 2024-12-18, which stopped compiling the loss, to bbb1b616, 2025-04-02).
  bool compile_model_only = false;

  // Model chunks per pipeline stage: num_model_chunks under the interleaved schedule, else 1.
  int64_t model_chunks() const { return pp_schedule == PipelineSchedule::interleaved ? num_model_chunks : 1; }

  // DeepSpeed's pipeline engine (deepspeed_pipeline.h).
  bool deepspeed_pipeline() const { return runtime == Runtime::deepspeed && kind == PluginKind::hybrid_parallel; }

  int effective_zero_stage() const {
    if (zero_stage >= 0) return zero_stage;
    if (deepspeed_pipeline()) return 1;  // its optimizers shard the fp32 states over dp
    if (kind != PluginKind::low_level_zero) return 0;
    return runtime == Runtime::deepspeed ? 3 : 1;
  }

  // Whether cpu_offload has shards to offload: ColossalAI passes it to
  // LowLevelZeroOptimizer under low_level_zero, and under hybrid_parallel at
  // zero_stage 1 or 2 (its zero_config's cpu_offload, HybridParallelZeroOptimizer),
  // colossalai/booster/plugin/hybrid_parallel_plugin.py at v0.5.0 (d322ff8c);
  // TorchFSDPPlugin hands its cpu_offload (torch's CPUOffload) to FSDP
  // (colossalai/booster/plugin/torch_fsdp_plugin.py at 014837e7, TorchFSDPModel),
  // and torchtitan its CPUOffloadPolicy to fully_shard (torchtitan/distributed/
  // fsdp.py at 01e1814a, apply_fsdp_to_decoder).
  bool cpu_offload_applies() const {
    return kind == PluginKind::low_level_zero || kind == PluginKind::torch_fsdp || (kind == PluginKind::hybrid_parallel && effective_zero_stage() >= 1);
  }
  // torch_fsdp with cpu_offload: FSDP keeps every shard on the host (fsdp_offload.h).
  bool fsdp_offload() const { return kind == PluginKind::torch_fsdp && cpu_offload; }
};

// What the estimate assumes about the runtime; printed with every report.
struct Assumptions {
  int64_t cuda_context_bytes = -1;          // -1 = the GPU profile's figure
  double allocator_reserve_fraction = 0.05; // fragmentation reserve of the caching allocator
  // NCCL_BUFFSIZE is 4 MiB per channel and direction (NCCL docs, "Environment
  // Variables"); 16 channels in both directions give 128 MiB per communicator.
  int64_t nccl_bytes_per_group = int64_t{128} << 20;
  // cuBLAS keeps a 32 MiB workspace per handle on Hopper (cuBLAS docs, cublasSetWorkspace).
  int64_t cublas_workspace_bytes = int64_t{32} << 20;
  // Gemini "auto" keeps device use under this fraction of the GPU, after
  // ColossalAI's steady_cuda_cap_ratio (0.9).
  double auto_placement_cuda_fraction = 0.9;
  // What a plan must leave free on every GPU (--memory-headroom): these bytes
  // plus this fraction of the GPU's memory; 0 and 0 = none. The user's margin
  // (other processes, a safety allowance), not a figure of the runtime.
  int64_t memory_headroom_bytes = 0;
  double memory_headroom_fraction = 0;
  int64_t memory_headroom(int64_t gpu_memory_bytes) const {
    return memory_headroom_bytes + static_cast<int64_t>(memory_headroom_fraction * static_cast<double>(gpu_memory_bytes));
  }
  // What PyTorch's caching-allocator counters see: neither the CUDA context nor
  // NCCL's buffers (NCCL cudaMallocs them itself); max_memory_allocated leaves
  // out the allocator's cached-but-free reserve too, max_memory_reserved keeps it.
  Assumptions as_pytorch_counts(bool with_allocator_reserve) const {
    Assumptions a = *this;
    a.cuda_context_bytes = 0;
    a.nccl_bytes_per_group = 0;
    if (!with_allocator_reserve) a.allocator_reserve_fraction = 0;
    return a;
  }
};

struct EstimateRequest {
  TrainingOptions training;
  ParallelLayout layout;
  PluginOptions plugin;
  Assumptions assumptions;
  // Tokens of each sequence one rank holds: its 1/cp of the sequence (the
  // load-balanced halves Megatron-Core and Transformer Engine give each rank
  // under causal masking add up to the same count).
  int64_t local_seq_len() const { return training.seq_len / layout.cp; }
};

}  // namespace tessera::planner
