// One GPU's training step; see cuda/gpt_training.h. This file checks the
// options and builds the step's state (create), and runs a step: its
// micro-batches' forward and backward, the reductions and the optimizer.
// The state and the declarations of its parts are gpt_training_state.h; the
// parts live in gpt_training_layers.cpp, gpt_training_forward_backward.cpp,
// gpt_training_reductions.cpp, gpt_training_pipeline.cpp,
// gpt_training_optimizer.cpp, gpt_training_allocation.cpp and
// gpt_training_checkpoint.cpp.
#include "tessera/engine/cuda/gpt_training.h"

#include "gpt_training_state.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/engine/cuda/norms.h"
#include "tessera/engine/cuda/sum_of_squares.h"
#include "tessera/engine/device/gpu_plugins.h"
#include "tessera/engine/device/tensor_parallel_part.h"
#include "tessera/engine/gradient_accumulation.h"
#include "tessera/engine/model/engine_computes.h"
#include "tessera/engine/parallel/strategy.h"
#include "tessera/engine/parallel/zero_buckets.h"
#include "tessera/planner/activations.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/rank_order_reduction.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::engine::cuda {

GptTraining::GptTraining(std::unique_ptr<State> state) : state_(std::move(state)) {}
GptTraining::~GptTraining() = default;

Result<std::unique_ptr<GptTraining>> GptTraining::create(const planner::Model& model, MemoryLedger& ledger, int64_t micro_batch, int64_t seq_len,
                                                         uint64_t seed, const OptimizerOptions& options, const GpuDataParallel& data_parallel,
                                                         planner::BlockRecompute recompute, const GpuTensorParallel& tensor_parallel,
                                                         const GpuPipelineParallel& pipeline, int64_t device_memory_bytes,
                                                         const GpuContextParallel& context_parallel) {
  const planner::ModelConfig& c = model.config;
  const int64_t tp = tensor_parallel.group != nullptr ? tensor_parallel.group->size() : 1;
  const int64_t cp = context_parallel.group != nullptr ? context_parallel.group->size() : 1;
  const int64_t dp = data_parallel.group != nullptr ? data_parallel.group->size() : 1;  // dp × cp ranks under context parallelism
  const bool sequence_parallel = tensor_parallel.sequence_parallel && tp > 1;
  const bool comm_overlap = sequence_parallel && tensor_parallel.comm_overlap;
  const int64_t pp = pipeline.group != nullptr ? pipeline.group->size() : 1;
  planner::PluginOptions layout_plugin = data_parallel.plugin;
  layout_plugin.pp_schedule = pipeline.schedule;
  layout_plugin.num_model_chunks = pipeline.chunks;
  if (dp % cp != 0) return make_error(ErrorCode::invalid_argument, "--cp " + std::to_string(cp) + ": the data-parallel group is the dp × cp ranks");
  if (Status s = check_gpu_layout(layout_plugin, planner::ParallelLayout{dp / cp, tp, pp, sequence_parallel, cp}); !s) return s.error();
  if (Status s = planner::check_context_parallel_sequence(seq_len, cp, planner::ActivationProfile::tessera_gpu); !s) return s.error();
  if (cp > 1 && seq_len % (8 * cp) != 0) {  // the second chunk's fp32 log-sum-exps start T/2 floats in: cuDNN takes 16-byte aligned pointers (attention.h)
    return make_error(ErrorCode::invalid_argument, "--seq " + std::to_string(seq_len) + ": under --cp " + std::to_string(cp) +
                                                       " the GPU step needs chunks of a multiple of 4 tokens; use a --seq that is a multiple of 8 × --cp = " +
                                                       std::to_string(8 * cp));
  }
  // This rank's stage (planner/pipeline_stage_model.h; the whole model without a pipeline) and its chunks' blocks.
  const int64_t chunks = pp > 1 ? layout_plugin.model_chunks() : 1;
  const planner::PipelinePlacement stage = pp > 1 ? planner::PipelinePlacement{pp, pipeline.group->rank(), chunks} : planner::PipelinePlacement{};
  if (pp * chunks > c.num_layers) {
    const std::string asked = chunks > 1 ? "--pp " + std::to_string(pp) + " × --model-chunks " + std::to_string(chunks) : "--pp " + std::to_string(pp);
    return make_error(ErrorCode::invalid_argument, asked + ": every " + (chunks > 1 ? "model chunk" : "stage") + " holds at least one of the model's " +
                                                       std::to_string(c.num_layers) + " blocks; use at most that many");
  }
  const std::vector<planner::StageLayers> stage_chunks =
      planner::stage_chunks(static_cast<int>(c.num_layers), static_cast<int>(pp), static_cast<int>(chunks))[static_cast<size_t>(stage.stage)];
  if (!planner::tp_divides_model(c, tp)) {
    return make_error(ErrorCode::unsupported, "--tp " + std::to_string(tp) + ": each tensor-parallel rank holds whole attention and key-value heads and "
                                              "an equal share of the MLP; choose a --tp that divides " + std::to_string(c.num_heads) + ", " +
                                              std::to_string(c.num_kv_heads) + " and " + std::to_string(c.intermediate_size));
  }
  if (Status s = check_gpu_optimizer(options.kind); !s) return s.error();
  if (Status s = check_engine_computes(c, seq_len); !s) return s.error();
  if (recompute.mode == planner::RecomputeMode::op_selective) {
    return make_error(ErrorCode::unsupported, "--recompute op_selective: the GPU training step recomputes none, selective or full");
  }
  if (micro_batch <= 0 || seq_len <= 0) return make_error(ErrorCode::invalid_argument, "micro-batch and sequence length must be positive");
  if (sequence_parallel) {
    if (Status s = check_sequence_split(micro_batch, seq_len / cp, tp, cp); !s) return s.error();
  }
  if (seq_len > c.max_positions) {
    return make_error(ErrorCode::invalid_argument, "--seq " + std::to_string(seq_len) + " exceeds the model's " + std::to_string(c.max_positions) + " positions");
  }
  const planner::ModelConfig widths = tp_rank_widths(c, tp);
  const int64_t Tn = seq_len / cp;  // this rank's tokens of each sequence
  const cpu::AttentionShape shape = State::attention_shape(widths, micro_batch, Tn);
  if (std::string why = Attention::unsupported(shape); !why.empty()) return make_error(ErrorCode::unsupported, "--gpu: " + why);
  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    return make_error(ErrorCode::unsupported, std::string("--gpu: no CUDA device: ") + (e != cudaSuccess ? cudaGetErrorString(e) : "none found"));
  }

  auto s = std::make_unique<State>();
  if (!s->gemm.error().empty()) return make_error(ErrorCode::unsupported, "--gpu: " + s->gemm.error());
  // This rank's part of every tensor of its stage (all of it without tensor or pipeline parallelism), by the planner's sharding rule.
  const planner::Model part = planner::tp_rank_model(planner::stage_model(model, stage), tp);
  s->config = widths;
  s->B = micro_batch, s->Tn = Tn, s->N = micro_batch * Tn, s->C = c.hidden_size, s->I = widths.intermediate_size, s->V = widths.vocab_size;
  if (cp > 1) {
    s->context = context_parallel.group;
    s->split = planner::ContextSplit{cp, context_parallel.group->rank()};
  }
  s->options = options;
  s->ledger = &ledger;
  s->tp = TensorParallelStep(tensor_parallel.group, part, sequence_parallel, comm_overlap ? TpCommunication::overlapped : TpCommunication::collectives);
  s->stage = stage;
  s->chunks = stage_chunks;
  s->schedule = pipeline.schedule;
  if (pp > 1) {
    s->pipeline = pipeline.group;
    // Every stage takes part in the split (collective); the middle ones form a group they never use, as on the CPU.
    const bool tied = std::any_of(model.inventory.tensors.begin(), model.inventory.tensors.end(), [](const planner::TensorInfo& t) { return t.tied_to >= 0; });
    if (tied) {
      auto ends = pipeline.group->split(stage.first() || stage.last() ? 0 : 1, pipeline.group->rank(), "embedding");
      if (!ends) return ends.error();
      if (stage.first() || stage.last()) s->embedding = std::move(ends).value();
      s->tied_piece_numel = planner::ddp_bucket_numel(data_parallel.plugin.bucket_bytes, static_cast<int64_t>(sizeof(T)));
    }
  }
  s->Nl = s->tp.local_rows(s->N);
  s->order = planner::flat_parameter_order(part.inventory);
  s->slots = parameter_slots(part.inventory, static_cast<int>(c.num_layers));
  std::vector<std::vector<int64_t>> shapes;
  for (const planner::FlatParameter& flat : s->order) shapes.push_back(part.inventory.tensors[static_cast<size_t>(flat.tensor_index)].shape);
  s->decay = decay_mask(shapes);
  s->numel = part.inventory.parameter_count();
  const planner::PluginOptions& plugin = data_parallel.plugin;
  if (Status supported = check_gpu_plugin(plugin); !supported) return supported.error();
  const bool sharded = data_parallel.group != nullptr && data_parallel.group->size() > 1 && zero_stage_of(plugin) > 0;
  if (sharded && plugin.kind == planner::PluginKind::hybrid_parallel) {  // its one bucket (planner::hybrid_zero_buckets), as the CPU engine's
    if (Status s = check_data_parallel_supported(plugin, planner::Precision::bf16, part, dp); !s) return s.error();
  }
  const bool gemini = plugin.kind == planner::PluginKind::gemini;  // on one GPU too
  const bool fsdp = plugin.kind == planner::PluginKind::torch_fsdp;  // likewise
  if (data_parallel.group != nullptr && data_parallel.group->size() > 1) {
    s->group = data_parallel.group;
    if (!sharded && !gemini && !fsdp) s->buckets.emplace(part.inventory, s->order, s->numel, plugin.bucket_bytes, static_cast<int64_t>(sizeof(T)));
  }
  s->allocator = std::make_unique<CachingAllocator>(s->memory, s->events, ledger, device_memory_bytes);
  s->attention = std::make_unique<Attention>(*s->allocator);
  if (!s->attention->error().empty()) return make_error(ErrorCode::unsupported, "--gpu: " + s->attention->error());
  s->ring = std::make_unique<RingAttention>(*s->attention, s->context, nullptr);
  s->library_workspace_bytes = Gemm::kWorkspaceBytes;
  ledger.allocated(MemoryCategory::workspace, MemorySpace::device, s->library_workspace_bytes);

  try {
    const int64_t n = s->numel, N = s->N, C = s->C;
    if (gemini) {
      s->allocate_gemini(model, seed, data_parallel);  // tensor parallelism is hybrid_parallel's: `part` is `model` here
    } else if (fsdp) {
      s->allocate_fsdp(model, seed, plugin);  // likewise
    } else {
      s->allocate_model_states(model, part, seed, sharded ? &plugin : nullptr);
    }

    // What the forward keeps and the recompute rebuilds, sized and named by
    // the planner's `tessera_gpu` table by the CPU model's rule (model/activation_buffers.h).
    const planner::ActivationTable table = planner::activation_table(c, planner::ActivationProfile::tessera_gpu, planner::Precision::bf16);
    const planner::ActivationShape shape{micro_batch, Tn, tp, sequence_parallel, cp, comm_overlap};
    const ActivationBuffers buffers = activation_buffers(table, shape, recompute);
    s->ring_block = ring_kv_block(shape, c.kv_width());
    if (pp > 1) {
      s->activations = StepActivations(*s->allocator, buffers, c.num_layers, stage_chunks, stage.first(), stage.last());
      s->boundaries = StageBoundaries(*s->allocator, s->boundary_numel() * static_cast<int64_t>(sizeof(T)), stage.first(), stage.last(), chunks);
    } else {
      s->activations = StepActivations(*s->allocator, buffers, c.num_layers);
    }
    // Workspaces: a column of ones for the bias gradients (1 · dout), the
    // norms' partial sums, the gradient norm's partial sums and its result
    // (a double and the overflow flag).
    s->ones = s->take(N * 2, MemoryCategory::workspace);
    const std::vector<T> ones(static_cast<size_t>(N), narrow<T>(1.0f));
    check(cudaMemcpy(s->ones.as<T>(), ones.data(), ones.size() * sizeof(T), cudaMemcpyHostToDevice), "copying the ones");
    s->norm_workspace = s->take(static_cast<int64_t>(norm_backward_workspace_bytes(N, C)), MemoryCategory::workspace);
    // Gemini sums a shard at a time, FSDP its shard.
    const int64_t summed = s->gemini ? std::max(n, s->gemini->layout().shard_numel) : s->fsdp ? std::max(n, s->fsdp->shard_numel()) : n;
    s->sum_workspace = s->take(static_cast<int64_t>(sum_of_squares_workspace_bytes(summed)), MemoryCategory::workspace);
    s->norm_sum = s->take(16, MemoryCategory::workspace);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::unsupported, std::string("--gpu: ") + e.what());
  }
  return std::unique_ptr<GptTraining>(new GptTraining(std::move(s)));
}

Result<GpuStepResult> GptTraining::step(const int32_t* tokens, const int32_t* targets, int64_t micro_batches) {
  State& s = *state_;
  if (micro_batches < 1) return make_error(ErrorCode::invalid_argument, "--micro-batches must be a positive integer");
  if (s.stage.chunks > 1 && micro_batches % s.stage.pp != 0) {  // as the CPU engine's check_pipeline
    return make_error(ErrorCode::invalid_argument, "--micro-batches " + std::to_string(micro_batches) +
                                                       ": the interleaved schedule runs the micro-batches in groups of pp; use a multiple of " +
                                                       std::to_string(s.stage.pp));
  }
  // Each offloaded gradient shard is copied over the host's, not added
  // (FSDP1's CPUOffload cannot accumulate: planner::check_fsdp_offload_accumulation).
  if (s.fsdp && s.fsdp->offloaded() && micro_batches > 1) {
    return make_error(ErrorCode::invalid_argument, "--micro-batches " + std::to_string(micro_batches) +
                                                       ": torch_fsdp with --cpu-offload keeps one micro-batch's gradient; use --micro-batches 1");
  }
  try {
    if (s.zero) {
      check(s.zero->zero_gradients());
    } else if (s.gemini) {
      check(s.gemini->zero_gradients());
    } else if (s.fsdp) {
      check(s.fsdp->zero_gradients());
    } else {
      check(cudaMemsetAsync(s.grads.as<void>(), 0, static_cast<size_t>(s.numel) * sizeof(T), nullptr), "zeroing the gradients");
    }
    GpuStepResult result;
    const double scale = micro_batch_gradient_scale(1.0, micro_batches, s.data_parallel_size());
    if (s.pipeline != nullptr) result.loss = s.run_pipeline(tokens, targets, micro_batches, scale);
    for (int64_t micro = 0; micro < micro_batches && s.pipeline == nullptr; ++micro) {
      const int64_t first = micro * s.N;
      result.loss = add_micro_batch_loss(result.loss, s.forward(tokens + first, targets + first, scale), micro_batches);
      s.backward(reduces_in_backward(micro, micro_batches));
    }
    s.reduce_sequence_parallel_gradients();
    s.finish_reductions();
    const std::optional<double> norm = s.optimizer_step();
    result.updated = norm.has_value();
    result.grad_norm = norm.value_or(NAN);
    check(cudaDeviceSynchronize(), "the step");
    return result;
  } catch (const std::exception& e) {
    s.finish_started_after_failure();
    return make_error(ErrorCode::unsupported, std::string("GPU step: ") + e.what());
  }
}

}  // namespace tessera::engine::cuda
