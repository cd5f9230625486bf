// The state of one GPU's training step (cuda/gpt_training.h), shared by the
// files that implement it: the shapes and parameter roles, the parallel
// groups, the device memory and its owners (the caching allocator, the ZeRO,
// Gemini and FSDP shards, the activations), the small helpers that name
// buffers and launch the attention, and the declarations of the step's parts:
// the linear and norm launchers (gpt_training_layers.cpp), the hooks around
// each layer and the gradient reductions (gpt_training_reductions.cpp), the
// forward and backward (gpt_training_forward_backward.cpp), the pipeline
// schedule (gpt_training_pipeline.cpp), the optimizer step
// (gpt_training_optimizer.cpp) and the model states' allocation
// (gpt_training_allocation.cpp). A failed call throws StepError (check), which
// the step turns into its one-line error.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fsdp_shards.h"
#include "gemini_shards.h"
#include "tensor_parallel_step.h"
#include "zero_shards.h"
#include "tessera/engine/cuda/attention.h"
#include "tessera/engine/cuda/device_memory.h"
#include "tessera/engine/cuda/gemm.h"
#include "tessera/engine/cuda/gpt_training.h"
#include "tessera/engine/cuda/ring_attention.h"
#include "tessera/engine/cuda/rope.h"
#include "tessera/engine/cuda/stream_events.h"
#include "tessera/engine/device/caching_allocator.h"
#include "tessera/engine/device/device_block.h"
#include "tessera/engine/device/stage_boundaries.h"
#include "tessera/engine/device/step_activations.h"
#include "tessera/engine/model/parameter_slots.h"
#include "tessera/engine/ops/linear.h"
#include "tessera/engine/parallel/ddp_buckets.h"
#include "tessera/engine/parallel/pipeline_transfers.h"
#include "tessera/planner/pipeline_stage_model.h"
#include "tessera/planner/sharding.h"

namespace tessera::engine::cuda {

using T = bf16;

// A failed launch or library call inside a step: the step returns it as its one-line error.
struct StepError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) throw StepError(std::string(what) + ": " + cudaGetErrorString(error));
}
inline void check(const std::string& error, const char* what) {
  if (!error.empty()) throw StepError(std::string(what) + ": " + error);
}
inline void check(const Status& status) {
  if (!status.ok()) throw StepError(status.error().message);
}
inline void check(const Status& status, const char* what) {
  if (!status.ok()) throw StepError(std::string(what) + ": " + status.error().message);
}

struct GptTraining::State {
  planner::ModelConfig config;  // the widths this rank computes with (tensor parallelism: its part's, tp_rank_widths)
  int64_t B = 0, Tn = 0, N = 0, C = 0, I = 0, V = 0, numel = 0;
  int64_t Nl = 0;  // the rows of an (N, C) tensor outside the split layers: N, or N/tp under sequence parallelism
  ParameterSlots slots;
  std::vector<planner::FlatParameter> order;
  std::vector<bool> decay;
  OptimizerOptions options;
  int64_t steps = 0;
  MemoryLedger* ledger = nullptr;
  // Data parallelism: the ranks' communicator; DDP: the CPU engine's buckets,
  // how many this backward has started; ZeRO: the shards (zero_shards.h).
  comm::Communicator* group = nullptr;
  std::optional<DdpBucketPlan> buckets;
  size_t started_buckets = 0;
  TensorParallelStep tp;  // the tensor-parallel group's sums, vocabulary slice and norm (tensor_parallel_step.h)
  // Pipeline parallelism: the stage this rank runs (the whole model without
  // one), its model chunks' blocks (one chunk but under the interleaved
  // schedule), the stages' communicator, the first and last stage's (a tied
  // embedding's gradient; null elsewhere) and the schedule.
  planner::PipelinePlacement stage;
  std::vector<planner::StageLayers> chunks;
  comm::Communicator* pipeline = nullptr;
  std::unique_ptr<comm::Communicator> embedding;
  int64_t tied_piece_numel = 0;  // the tied sum's pieces: a DDP bucket's elements (planner::ddp_bucket_numel)
  planner::PipelineSchedule schedule = planner::PipelineSchedule::one_f_one_b;
  // Context parallelism: the context group, which chunks of each sequence
  // this rank holds (Tn of its tokens), and one K/V block of its ring (its tp rank's key-value heads).
  comm::Communicator* context = nullptr;
  planner::ContextSplit split;
  int64_t ring_block = 0;

  CudaDeviceMemory memory;
  CudaEvents events;
  std::unique_ptr<CachingAllocator> allocator;  // declared after its sources, destroyed before them
  Gemm gemm;
  std::unique_ptr<Attention> attention;  // its workspace from the allocator: made after it, destroyed before it
  std::unique_ptr<RingAttention> ring;    // cuDNN's attention over the context group's ring (over this rank's tokens alone without one)
  int64_t library_workspace_bytes = 0;  // booked for cuBLASLt's workspace

  DeviceBlock params, grads, master, m, v;  // under ZeRO: the parameters only, padded; `zero` holds the rest
  std::unique_ptr<ZeroShards> zero;  // ZeRO's shards, from the allocator: declared after it, destroyed before it
  std::unique_ptr<GeminiShards> gemini;  // Gemini's chunks (gemini_shards.h), likewise
  std::unique_ptr<FsdpShards> fsdp;      // FSDP's units (fsdp_shards.h), likewise
  std::vector<T*> parameter_of;      // each flat parameter: in the flat buffer, or in its gathered Gemini chunk or FSDP unit
  std::vector<T*> gradient_of;       // each flat parameter's gradient: in the flat buffer, ZeRO-2's bucket, a Gemini gradient chunk or an FSDP unit's
  StepActivations activations;  // what the forward keeps, the recompute's working set, the logits, the tokens
  StageBoundaries boundaries;   // a pipeline stage's send and receive buffers
  DeviceBlock ones, norm_workspace, norm_sum, sum_workspace;

  ~State() {
    if (ledger != nullptr && library_workspace_bytes > 0) ledger->freed(MemoryCategory::workspace, MemorySpace::device, library_workspace_bytes);
  }

  DeviceBlock take(int64_t bytes, MemoryCategory category) { return DeviceBlock(*allocator, bytes, category); }
  T* param(int index) { return parameter_of[static_cast<size_t>(index)]; }
  T* grad(int index) { return gradient_of[static_cast<size_t>(index)]; }
  T* act(int layer, const char* name) { return static_cast<T*>(activations.block(layer, name)); }
  float* stats(int layer, const char* name) { return static_cast<float*>(activations.block(layer, name)); }
  template <typename X = T>
  X* outside(const char* name) { return static_cast<X*>(activations.outside(name)); }
  // Sequence parallelism's whole-sequence (N, C) buffers, one for values and
  // one for gradients, and what it gathers into them (tensor_parallel_step.h).
  bool sequence_parallel() const { return tp.sequence_parallel(); }
  T* gathered() { return outside("sequence_gathered"); }
  T* gathered_grad() { return outside("sequence_gathered_grad"); }
  const T* whole_values(const T* rows) { return tp.whole_rows(rows, sequence_parallel() ? gathered() : nullptr, N, C); }
  const T* whole_gradients(const T* rows) { return tp.whole_rows(rows, sequence_parallel() ? gathered_grad() : nullptr, N, C); }
  // The CPU model's gathered_gemms and reduced_gemms (model/transformer.h):
  // gemms(first_row, rows, input or out) over all N rows around the
  // collective, or under --tp-comm-overlap over one rank's rows at a time as
  // the chunks move (tensor_parallel_step.h).
  template <typename Gemms>
  const T* gathered_gemms(const T* mine, T* buffer, Gemms gemms) {
    if (!tp.overlapped()) {
      const T* whole = tp.whole_rows(mine, sequence_parallel() ? buffer : nullptr, N, C);
      gemms(int64_t{0}, N, whole);
      return whole;
    }
    tp.all_gather_overlapped(mine, buffer, N, C, [&](int64_t chunk) { gemms(chunk * Nl, Nl, buffer + chunk * Nl * C); });
    return buffer;
  }
  template <typename Gemms>
  void reduced_gemms(T* whole, T* mine, Gemms gemms) {
    if (!tp.overlapped()) {
      gemms(int64_t{0}, N, whole);
      tp.reduce_rows(whole, mine, N, C);
      return;
    }
    tp.reduce_scatter_overlapped(whole, outside("sequence_overlap_send"), mine, N, C, [&](int64_t chunk, T* into) { gemms(chunk * Nl, Nl, into); });
  }

  // A linear layer's forward and gradients, the norms' below (gpt_training_layers.cpp).
  void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int64_t rows, int64_t IC, int64_t OC, cpu::WeightLayout layout);
  void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int64_t rows, int64_t IC, int64_t OC,
                       cpu::WeightLayout layout, bool accumulate = false);
  void linear_backward_input(T* dinp, const T* dout, const T* weight, int64_t rows, int64_t IC, int64_t OC, cpu::WeightLayout layout,
                             bool accumulate = false);
  void linear_backward_weight(T* dweight, T* dbias, const T* dout, const T* inp, int64_t rows, int64_t IC, int64_t OC, cpu::WeightLayout layout);
  const T* param_or_null(int index) { return index >= 0 ? param(index) : nullptr; }
  T* grad_or_null(int index) { return index >= 0 ? grad(index) : nullptr; }
  void norm_forward(T* out, float* statistics, const T* in, int weight, int bias);
  void norm_backward(T* dinp, const T* dout, const T* in, const float* statistics, int weight, int bias);
  bool gpt2() const { return config.family == planner::ModelFamily::gpt2; }
  // Where q, k and v lie in a block's "qkv" buffer (the CPU model's
  // qkv_views): GPT-2's fused projection writes them side by side in each
  // token's row, Llama's three projections one after another.
  struct QkvViews {
    T *q, *k, *v;
    cpu::AttentionShape shape;
  };
  static cpu::AttentionShape attention_shape(const planner::ModelConfig& c, int64_t B, int64_t Tn) {
    const int64_t q = c.q_width(), kv = c.kv_width();
    const bool rows = c.family == planner::ModelFamily::gpt2;
    return {B, Tn, c.num_heads, c.num_kv_heads, c.head_dim, rows ? 3 * q : q, rows ? 3 * q : kv};
  }
  QkvViews qkv_views(T* qkv) const {
    const int64_t q = config.q_width(), kv = config.kv_width();
    if (gpt2()) return {qkv, qkv + q, qkv + 2 * q, attention_shape(config, B, Tn)};
    return {qkv, qkv + N * q, qkv + N * (q + kv), attention_shape(config, B, Tn)};
  }
  int64_t rotary_dim() const { return static_cast<int64_t>(static_cast<double>(config.head_dim) * config.rotary_pct); }
  void rope(T* x, int64_t heads, int64_t stride, bool inverse) {
    check(rope_rotate(x, B, Tn, heads, config.head_dim, stride, rotary_dim(), config.rope_theta, inverse, nullptr, split), "rope");
  }
  // The ring attention's buffers, the planner's ring_* terms (empty without context parallelism), as the CPU model's ring_buffers.
  RingBuffers<T> ring_buffers() {
    if (split.cp == 1) return {};
    return ring_buffers_from<T>(ring_block, [this](const char* name) { return outside(name); },
                                [this](const char* name) { return outside<float>(name); });
  }
  // Block l's attention core, over its whole sequences under context parallelism.
  void attention_forward(int l, const QkvViews& qkv, const char* what) {
    check(ring->forward(act(l, "attention_output"), stats(l, "attention_lse"), qkv.q, qkv.k, qkv.v, qkv.shape, ring_buffers()), what);
  }

  int64_t data_parallel_size() const { return group != nullptr ? group->size() : 1; }
  // The hooks around each layer and the gradient reductions (gpt_training_reductions.cpp).
  void start_buckets(size_t complete);
  bool buckets_overlap_backward() const;
  void before_layer_backward(int layer);
  void before_layer_forward(int layer);
  void after_layer_forward(int layer);
  void after_layer_backward(int layer, bool reduce);
  void reduce_sequence_parallel_gradients();
  void finish_reductions();
  void finish_started_after_failure();

  void allocate_model_states(const planner::Model& whole, const planner::Model& model, uint64_t seed, const planner::PluginOptions* zero_plugin);
  void allocate_gemini(const planner::Model& model, uint64_t seed, const GpuDataParallel& data_parallel);
  void allocate_fsdp(const planner::Model& model, uint64_t seed, const planner::PluginOptions& plugin);
  void block_forward(int l, const T* x, T* out);
  void recompute_block(int l, int index_in_chunk);
  void block_backward(int l);
  bool first_stage() const { return stage.first(); }
  bool last_stage() const { return stage.last(); }
  // Whether chunk `chunk` is the first virtual stage (embeds the tokens) or the last (holds the head and the loss).
  bool embeds(int64_t chunk) const { return first_stage() && chunk == 0; }
  bool has_head(int64_t chunk) const { return last_stage() && chunk + 1 == static_cast<int64_t>(chunks.size()); }
  int64_t boundary_numel() const { return Nl * C; }
  double forward(const int32_t* host_tokens, const int32_t* host_targets, double gradient_scale, const T* input = nullptr, T* output = nullptr,
                 int64_t chunk = 0);
  void backward(bool reduce, const T* output_grad = nullptr, T* input_grad = nullptr, int64_t chunk = 0);
  double run_pipeline(const int32_t* tokens, const int32_t* targets, int64_t micro_batches, double gradient_scale);
  void exchange(const PipelineTransfer& transfer);
  void sum_tied_embedding_gradients();
  double over_stages(double sum_of_squares);
  std::optional<double> optimizer_step();
};

}  // namespace tessera::engine::cuda
