// One GPU's training step of the engine's transformer in bf16 mixed
// precision (fp32 master weights and AdamW states, Micikevicius et al. 2018),
// (below: data and tensor parallelism, one GPU per rank), for both families the CPU model trains (GPT-2; the Llama
// layout: Llama, Mistral, Qwen2): forward, backward and AdamW on the device
// with the engine's CUDA launchers (embeddings, LayerNorm and RMSNorm, GELU
// and SwiGLU, RoPE, residual, the fused cross-entropy that turns bf16 logits
// into their gradient, the gradients' sum of squares, AdamW), cuBLASLt GEMMs
// (cuda/gemm.h) and cuDNN's fused attention (cuda/attention.h).
//
// It shares the CPU model's sources rather than copying them: the planner's
// tensor inventory and flat order (planner/sharding.h), the parameter roles
// (model/parameter_slots.h), the initial weights (model/initialization.h),
// the activation table that names and sizes what a block keeps
// (planner/activations.h, the `tessera_gpu` profile: `tessera`'s terms with
// the GPU's bf16 logits and its device copies of the tokens and targets, so
// that the ledger books per category what the planner estimates) and the rule that chooses,
// per recompute mode, what a block keeps and what is rebuilt before its
// backward (model/activation_buffers.h), the weight-decay mask and AdamW's
// scalars (optimizer.h, adamw_step.h). Every device byte comes from the
// caching allocator (device/caching_allocator.h) and is booked in the ledger
// under its category (cuDNN's attention workspace under `workspace`), and
// cuBLASLt's own 32 MiB workspace under `workspace` too. The logits are kept
// in bf16 (the fused cross-entropy never holds fp32 ones), where the CPU
// model keeps fp32.
//
// Activation recomputation, as the CPU model's: under `selective` each block
// keeps all but the attention's log-sum-exp, and the attention core runs
// again from the kept q, k and v before the block's backward (Korthikanti et
// al. 2022 §5); under `full` each block keeps its input only and its whole
// forward runs again before its backward. What is recomputed lives in one
// working set shared by the blocks (device/step_activations.h), booked under
// `activations` as the planner counts it (block_activation_bytes' `working`).
//
// Gradient accumulation, by the CPU trainer's rule (gradient_accumulation.h):
// a step of k micro-batches runs k forwards and backwards, each adding its
// gradient, scaled by 1 / (k · dp), into the flat bf16 gradients, then one
// optimizer step; the loss is the mean over the micro-batches.
//
// Data parallelism (PyTorch DDP's, as the CPU engine's torch_ddp runs it):
// given a communicator over the ranks (NCCL's, comm/nccl.h, on this rank's
// device), each rank computes its micro-batches' gradients, and in the last
// micro-batch's backward (earlier ones accumulate locally, DDP's no_sync)
// the flat gradients are all-reduced in the CPU engine's buckets
// (parallel/ddp_buckets.h: the same ranges, in the same order). Each bucket's
// all-reduce is started as soon as the backward of the layers holding its
// gradients has been queued on the compute stream: the communicator records an
// event on the compute stream there and its own stream waits for it, so the
// reduction runs while the compute stream goes on through the earlier layers.
// The optimizer waits for every reduction (finish_started) before it reads a
// gradient. The sums are the communicator's rank-order ones, the same bits on
// every rank, so every rank's update is the same.
//
// ZeRO-1/2 (low_level_zero, as the CPU engine's, parallel/data_parallel.h):
// with the plugin given, each rank keeps only its shard of the fp32 master
// weights and AdamW's states, the gradients are reduce-scattered over NCCL in
// the CPU engine's ranges and order (parallel/zero_buckets.h), AdamW updates
// the shard on the device (with --cpu-offload on the host, ZeRO-Offload:
// src/cuda/zero_offload.h) and the bf16 parameters are all-gathered; the
// buffers, their categories and the collectives are src/cuda/zero_shards.h's.
//
// Gemini (ColossalAI's chunk-based ZeRO-3, as the CPU engine's,
// parallel/gemini.h), on one GPU or one per rank: the parameters live in the
// CPU engine's chunks, sharded over the ranks (on the device, or pinned on
// the host under the `cpu` placement); before each layer's forward and
// backward the shared gathering's moves gather its chunks (NCCL all-gathers;
// host shards copied up on a copy stream), open gradient chunks and
// reduce-scatter those complete, and the layer's parameters and gradients
// point into the gathered chunks; AdamW updates each rank's slots on the
// device, or on the host with the CPU engine's optimizer. See
// src/cuda/gemini_shards.h and device/gemini_device_chunks.h.
//
// FSDP (PyTorch's, as the CPU engine's torch_fsdp runs it, parallel/fsdp.h),
// on one GPU or one per rank, full_shard or shard_grad_op: each rank keeps its
// fp32 shard of every unit (the root, each block: planner::fsdp_layout) with
// its gradients and AdamW's states; around each layer's forward and backward
// the CPU engine's schedule (parallel/fsdp_schedule.h) gathers units into bf16
// buffers (the next block prefetched), opens a unit's bf16 gradient and
// reduce-scatters it, started on NCCL's stream, into the fp32 gradient shard;
// AdamW updates the fp32 shard. See src/cuda/fsdp_shards.h and
// device/fsdp_device_units.h.
//
// Tensor parallelism (Megatron-LM's, as the CPU engine's hybrid_parallel runs
// it, model/tensor_parallel.h): given a communicator over the tensor-parallel
// ranks, each rank holds its part of every split layer by the planner's rule
// (planner::tp_rank_model), initialised with the values the CPU model's rank
// of the same group gets (for_each_initial_value_of_part), and computes with
// its part's widths; the row-parallel outputs, the vocabulary-parallel
// embedding and the column-parallel input gradients are all-reduced over the
// group, and the loss is the vocabulary-parallel fused cross-entropy, which
// never gathers the logits (src/cuda/tensor_parallel_step.h). The activations
// are the `tessera_gpu` table's for tp ranks (the planner's division). With a
// data-parallel communicator too (over the ranks of the same tp rank), DDP
// all-reduces each part's gradients in the CPU engine's buckets of the part,
// or, at hybrid_parallel's ZeRO stage 1 or 2, each rank keeps its shard of
// its part (ZeRO's over the dp communicator, one bucket reduced after
// backward: src/cuda/zero_shards.h; with --cpu-offload its optimizer on the
// host, src/cuda/zero_offload.h), as ColossalAI's HybridParallelPlugin
// with zero_stage 1 or 2 (and cpu_offload) and the CPU engine do.
// With sequence parallelism (GpuTensorParallel::sequence_parallel) each rank
// keeps its N/tp rows outside the split layers, all-gathers the norms'
// outputs before the column-parallel layers and reduce-scatters the row-
// parallel sums, as the CPU model does; the activations are the table's for
// sequence-parallel tp ranks, and the norms' gradients are summed over the
// group after the step's last backward, before DDP's buckets start (as the
// CPU trainer does). With --tp-comm-overlap (GpuTensorParallel::comm_overlap)
// those gathers and reduce-scatters move as chunks under the GEMMs beside
// them, as the CPU model's (cuda/tensor_parallel_step.h).
//
// Pipeline parallelism (hybrid_parallel's, as the CPU engine's
// parallel/pipeline.h): given a communicator over the stages, this rank holds
// its stage's tensors (planner::stage_model: the planner's split_layers, the
// embedding on the first stage, the final norm and head on the last, a tied
// embedding's copy there) initialised with the whole model's values, and runs
// the planner's schedule for it (GPipe, 1F1B or interleaved, stage_schedule)
// with send_recvs between passes (parallel/pipeline_transfers.h: NCCL's
// grouped ncclSend/ncclRecv). Interleaved, the stage holds the blocks of its
// model chunks (stage_chunks, in the stage model the CPU engine builds, so
// that checkpoints cross), the first virtual stage embeds and the last holds
// the head. Each forward keeps its chunk's activations over its micro-batch
// until its backward (device/step_activations.h: a pass's buffers from begin
// to end, as many in flight as the planner books), the boundary buffers are
// the planner's four (device/stage_boundaries.h; every stage's under interleaving). After the schedule a tied
// embedding's gradient is summed between the first and the last stage (Megatron-LM's
// _allreduce_word_embedding_grads, as the CPU trainer), then DDP's buckets
// start (none during backward, as on the CPU); the gradient norm's sum of
// squares is summed over the stages (the copy counted once). The loss is the
// last stage's (0 elsewhere). With tensor parallelism too, each stage's
// part is its tp rank's (tp_rank_model of the stage), the boundary its rows
// (N/tp under sequence parallelism), and the pipeline group joins the ranks
// of the same tp rank, as on the CPU; every group's calls block between kernels, one communicator at a time.
//
// Context parallelism (hybrid_parallel's, as the CPU engine's
// model/ring_attention.h): given a communicator over the context ranks,
// each rank holds its two chunks of every sequence (planner/context_split.h;
// the caller gives their tokens, (micro_batches, B, T/cp)), RoPE and the
// position embedding place them by their positions in the whole sequence, and
// attention is the GPU ring (cuda/ring_attention.h: the CPU ring's blocks,
// buffers and sends; rerun with it under recompute), its buffers the
// table's ring_* terms. The data-parallel communicator is then the dp × cp
// ranks' (ProcessGroups::data_context): DDP and ZeRO reduce and shard over
// them, the gradients scaled by 1 / (k · dp · cp), each rank's loss the mean
// over its tokens. Its buckets start after backward (the ring's send_recvs
// run on the context group during it). With tensor parallelism too (the
// ranks ordered tp, cp, dp as the planner's groups are), each tp rank's ring
// runs over its own heads: its K/V blocks are kv_width/tp wide
// (ring_kv_block, planner::ring_block_elements), and the ring's send_recvs
// and the tp group's calls block in turn, one communicator at a time. In a
// pipeline, each stage's ring runs over its blocks inside every pass, the
// stage boundaries (B · T/cp rows) move between passes, and DDP or ZeRO-1
// reduce over each stage's dp × cp ranks.
//
// Never run on a GPU, recompute, ZeRO, Gemini, FSDP, tensor, pipeline and
// context parallelism included: compiled for sm_90 and checked on the day one is lent
// (tests/cuda/gpt_training_gpu_test.cpp, recompute_gpu_test.cpp,
// ddp_gpu_test.cpp, zero_gpu_test.cpp, gemini_gpu_test.cpp, fsdp_gpu_test.cpp,
// tensor_parallel_gpu_test.cpp, hybrid_zero_gpu_test.cpp, pipeline_gpu_test.cpp,
// ring_attention_gpu_test.cpp, context_parallel_gpu_test.cpp,
// context_tensor_parallel_gpu_test.cpp, pipeline_gpu_test.cpp's pp × cp, tools/gpu-check).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/flat_checkpoint.h"
#include "tessera/engine/half.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/engine/optimizer.h"
#include "tessera/planner/model.h"
#include "tessera/planner/training_config.h"
#include "tessera/planner/status.h"

namespace tessera::engine::cuda {

struct GpuStepResult {
  double loss = 0;       // mean over the micro-batches' tokens (this rank's)
  double grad_norm = 0;  // before clipping
  bool updated = false;  // false: a gradient was not finite, no update
};

struct GpuDataParallel {
  GpuDataParallel() = default;
  GpuDataParallel(comm::Communicator* group, planner::PluginOptions plugin, std::optional<int64_t> gemini_parameter_chunks_on_host = std::nullopt)
      : group(group), plugin(std::move(plugin)), gemini_parameter_chunks_on_host(gemini_parameter_chunks_on_host) {}
  comm::Communicator* group = nullptr;  // over the data-parallel ranks, on device buffers; null: one GPU
  // torch_ddp (its bucket_bytes, the plan's bucket_cap_mb), low_level_zero
  // (its zero stage, 1 or 2, and reduce_bucket_numel), hybrid_parallel (DDP
  // at zero stage 0, else as low_level_zero), gemini (its chunk size and
  // placement; on one GPU too) or torch_fsdp (its sharding strategy; on one
  // GPU too); device/gpu_plugins.h refuses the others.
  planner::PluginOptions plugin;
  // Gemini `auto` as the planner solved it for the GPU (the CLI's
  // resolve_auto_placement): `plugin` then static with every optimizer
  // state on the host, and these leading chunks' 16-bit shards on the host.
  std::optional<int64_t> gemini_parameter_chunks_on_host;
};

struct GpuTensorParallel {
  // Over the tensor-parallel ranks (hybrid_parallel's, same dp rank), on
  // device buffers (NCCL's); null or one rank: none. See "Tensor parallelism" above.
  comm::Communicator* group = nullptr;
  bool sequence_parallel = false;  // Megatron's sequence parallelism in that group (needs tp dividing micro-batch · seq)
  bool comm_overlap = false;       // with it, --tp-comm-overlap (model/sequence_overlap.h)
};

struct GpuContextParallel {
  // Over the context-parallel ranks (hybrid_parallel's, same dp rank), on
  // device buffers (NCCL's); null or one rank: none. See "Context parallelism" above.
  comm::Communicator* group = nullptr;
};

struct GpuPipelineParallel {
  // Over the pipeline stages (same dp rank), on device buffers (NCCL's), its
  // rank the stage; null or one rank: none. See "Pipeline parallelism" above.
  comm::Communicator* group = nullptr;
  planner::PipelineSchedule schedule = planner::PipelineSchedule::one_f_one_b;  // gpipe, 1f1b or interleaved
  int64_t chunks = 1;  // model chunks per stage: 2 or more under the interleaved schedule, else 1
};

class GptTraining {
 public:
  // One line, and nothing allocated, for what it does not train: what the
  // CPU model refuses (check_engine_computes), optimizers other than AdamW,
  // torchtitan's op_selective recompute, plugins other than check_gpu_plugin's,
  // a head size cuDNN's attention refuses, no device. `device_memory_bytes`
  // caps its caching allocator (--device-memory; 0: the device's memory).
  static Result<std::unique_ptr<GptTraining>> create(const planner::Model& model, MemoryLedger& ledger, int64_t micro_batch, int64_t seq_len,
                                                     uint64_t seed, const OptimizerOptions& options, const GpuDataParallel& data_parallel = {},
                                                     planner::BlockRecompute recompute = planner::RecomputeMode::none,
                                                     const GpuTensorParallel& tensor_parallel = {}, const GpuPipelineParallel& pipeline = {},
                                                     int64_t device_memory_bytes = 0, const GpuContextParallel& context_parallel = {});
  ~GptTraining();
  GptTraining(const GptTraining&) = delete;
  GptTraining& operator=(const GptTraining&) = delete;

  // One optimizer step on `micro_batches` accumulated micro-batches: tokens
  // and next-token targets, (micro_batches, B, T) each (T/cp under context parallelism: this rank's chunks), on the host. Under
  // data parallelism each rank gives its own share of the global batch
  // (DataLoader::read_rank_share; every stage of a pipeline the same); the
  // loss is this rank's (a pipeline's last stage's, 0 on the others), the gradient norm the global one.
  Result<GpuStepResult> step(const int32_t* tokens, const int32_t* targets, int64_t micro_batches = 1);

  // For checkpoints (flat_checkpoint.h): a host state laid out as this
  // rank's optimizer (every parameter whole, or under ZeRO this rank's shard,
  // planner/optimizer_layout.h); the fp32 master weights, AdamW's states and
  // its update count copied into it; and restored from it, with the bf16
  // parameters rounded from its weights as the CPU optimizer rounds them
  // (Optimizer::weights_restored; under ZeRO then all-gathered, collective).
  // One line on a CUDA error.
  FlatAdamWState host_state(const planner::Model& model) const;
  // Whether ranks hold different optimizer states (ZeRO, Gemini on 2 or more ranks): every rank saves its own.
  bool sharded() const;
  Status save_state(FlatAdamWState& state) const;
  Status restore_state(FlatAdamWState& state);

  // The flat parameters and the last step's gradients as the optimizer read
  // them, copied to the host, in flat order (under ZeRO the gradients are
  // this rank's reduced shard, its shard's elements; under Gemini both are
  // this rank's chunk slots, slot after slot, planner/optimizer_layout.h).
  std::vector<bf16> parameters() const;
  std::vector<bf16> gradients() const;

 private:
  struct State;
  explicit GptTraining(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tessera::engine::cuda
