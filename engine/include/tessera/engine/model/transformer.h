// A decoder-only transformer built from the planner's tensor inventory (same
// names, shapes and order), with explicit forward and backward on the CPU.
// Families: GPT-2 (learned positions, LayerNorm, GELU, tied head) and the
// Llama layout (Llama, Mistral, Qwen2: RoPE, RMSNorm, SwiGLU, grouped-query
// attention). What it keeps for backward is allocated from the planner's
// `tessera` activation table by the rule the GPU step shares
// (model/activation_buffers.h), so the planner and the engine count the same bytes.
//
// T is the storage type of parameters, gradients and activations: float for
// fp32 training, bf16 or fp16 for mixed precision (the optimizer keeps the fp32
// master weights), double for the gradient checks. Arithmetic runs in
// compute_t<T>; norm statistics, logits and losses are kept in it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/engine/half.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/engine/model/activation_buffers.h"
#include "tessera/engine/model/engine_computes.h"
#include "tessera/engine/model/parameter_slots.h"
#include "tessera/engine/model/ring_attention.h"
#include "tessera/engine/model/tensor_parallel.h"
#include "tessera/engine/ops/attention.h"
#include "tessera/engine/ops/workspace.h"
#include "tessera/engine/tensor.h"
#include "tessera/planner/activations.h"
#include "tessera/planner/model.h"
#include "tessera/planner/pipeline_stage_model.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/sharding.h"
#include "tessera/planner/training_config.h"
#include "tessera/planner/status.h"

namespace tessera::engine {

// Where the parameters and their gradients live: each in one flat buffer in the
// planner's flat order (planner/sharding.h), padded to `padded_numel` elements
// (0: exactly the parameters) so that data-parallel collectives run on equal
// pieces in place. Under ZeRO-2 the full gradient buffer is the reduce
// bucket, booked as comm_buffers; the sharded gradient lives with the optimizer.
// Without flat buffers (FSDP), parameters and gradients have no storage of the
// model's own: the unit hooks bind them to gathered buffers while a unit runs.
struct FlatStorage {
  int64_t padded_numel = 0;
  MemoryCategory gradient_category = MemoryCategory::gradients;
  bool flat_buffers = true;
  // false: flat parameters, but gradients with no storage of the model's own
  // (ZeRO-2 with a bucket smaller than the model binds them into its bucket).
  bool flat_gradients = true;
};

// Called around each layer's forward and backward, so that a sharded plugin
// can gather a layer's parameters before it runs and release them, and reduce
// its gradients, after. Layers as the inventory numbers them:
// planner::kEmbeddingLayer (-1), the blocks 0..L-1, and L (the final norm and
// the head, which uses a tied embedding's weight). Backward of a block
// includes its recompute.
class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(int unit) = 0;
  virtual void after_forward(int unit) = 0;
  virtual void before_backward(int unit) = 0;
  virtual void after_backward(int unit) = 0;
};

template <typename T>
class Transformer {
 public:
  using W = compute_t<T>;

  // Fails for families the engine does not train yet.
  // `recompute`: what backward recomputes instead of keeping (Korthikanti et al.
  // 2022 §5): selective re-runs the attention core (dropping its log-sum-exp), full keeps only
  // each block's input, or under --recompute-num-layers only the first blocks' of
  // each chunk (planner/recompute_blocks.h); one block's worth of recomputed tensors is shared.
  // `tensor_group`: the ranks that split every layer (model/tensor_parallel.h);
  // null or one rank: the whole model here. `sequence_parallel`: they also
  // split the tokens outside the split layers. `stage`: the pipeline stage
  // this rank runs (planner/pipeline_stage_model.h); its parameters only.
  // `context_group`: the ranks that share each sequence (model/ring_attention.h);
  // `seq_len` is then this rank's tokens of it, two chunks (planner/context_parallel.h).
  // `tp_communication`: overlapped runs sequence parallelism's calls under the GEMMs (--tp-comm-overlap).
  static Result<Transformer> create(const planner::Model& model, MemoryLedger& ledger, int64_t micro_batch, int64_t seq_len, uint64_t seed,
                                    planner::BlockRecompute recompute = planner::RecomputeMode::none, FlatStorage storage = {},
                                    comm::Communicator* tensor_group = nullptr, bool sequence_parallel = false,
                                    planner::PipelinePlacement stage = {}, comm::Communicator* context_group = nullptr,
                                    TpCommunication tp_communication = TpCommunication::collectives);

  // The whole model on one stage: runs the forward pass on tokens and
  // next-token targets, both (B, T); keeps what backward needs and returns the
  // mean loss over the B·T tokens.
  double forward(const int32_t* tokens, const int32_t* targets) { return forward_chunk(0, 0, tokens, targets, nullptr, nullptr); }
  // Backward of the last forward. Parameter gradients accumulate, scaled by
  // `loss_scale` (1/k for k accumulated micro-batches, times the fp16 loss scale).
  void backward(W loss_scale) { backward_chunk(0, 0, loss_scale, nullptr, nullptr); }

  // A pipeline stage runs its model chunks' passes one at a time, in its
  // schedule's order, each micro-batch's tensors kept from its forward to its
  // backward (pipeline_stages.h; parallel/pipeline.h drives them). Without a
  // pipeline one pass is kept from creation on and begin/end_pass do nothing.
  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  bool chunk_has_embedding(int chunk) const { return stage_.first() && chunk == 0; }
  bool chunk_has_head(int chunk) const { return stage_.last() && chunk == num_chunks() - 1; }
  // Elements of the activation (and of its gradient) one chunk passes to the
  // next: the residual stream of a micro-batch, this rank's rows of it under
  // sequence parallelism.
  int64_t boundary_numel() const { return tp_.local_rows(B_ * T_) * config_.hidden_size; }
  // Allocates (books) what a forward of `chunk` on micro-batch `micro` keeps; end_pass frees it after its backward.
  void begin_pass(int chunk, int64_t micro);
  void end_pass(int chunk, int64_t micro);
  // The forward of one chunk on micro-batch `micro` (begun): from the tokens
  // with the embedding, else from `input` (boundary_numel()); to the loss with
  // the head (returned; 0 otherwise), else into `output`.
  double forward_chunk(int chunk, int64_t micro, const int32_t* tokens, const int32_t* targets, const T* input, T* output);
  // Its backward: from the loss with the head, else from `output_grad`; the
  // gradient of the chunk's input goes into `input_grad` unless the chunk
  // holds the embedding.
  void backward_chunk(int chunk, int64_t micro, W loss_scale, const T* output_grad, T* input_grad);
  // The first failure of the tensor- or context-parallel group's
  // communication in forward or backward (success on one rank): check it after each pass.
  const Status& communication_status() const { return tp_.status().ok() ? cp_.status() : tp_.status(); }
  // After the step's last backward, under sequence parallelism: the norms'
  // gradients summed over the tensor-parallel group (model/tensor_parallel.h).
  void reduce_sequence_parallel_gradients();

  // One entry per unique parameter, in flat order (a tied tensor once): views
  // into the flat buffers; under tensor parallelism, this rank's parts.
  const std::vector<Slice<T>>& parameters() const { return params_; }
  const std::vector<Slice<T>>& gradients() const { return grads_; }
  Tensor<T>& flat_parameters() { return flat_params_; }
  Tensor<T>& flat_gradients() { return flat_grads_; }
  const std::vector<planner::FlatParameter>& flat_order() const { return flat_order_; }
  // Points parameter p (flat order) and its gradient at other storage (UnitHooks).
  void bind_parameter(int p, T* data, T* grad) {
    params_[static_cast<size_t>(p)] = Slice<T>(data, params_[static_cast<size_t>(p)].numel());
    grads_[static_cast<size_t>(p)] = Slice<T>(grad, grads_[static_cast<size_t>(p)].numel());
  }
  void set_unit_hooks(UnitHooks* hooks) { hooks_ = hooks; }
  // The unit hooks of one forward and backward, in their order, computing
  // nothing: what a dry run replays (its ledger holds no data).
  void hooks_only_pass();
  const std::vector<std::string>& parameter_names() const { return names_; }
  const std::vector<std::vector<int64_t>>& parameter_shapes() const { return shapes_; }
  void zero_gradients();
  // With a pipeline, the gradient of a tied embedding on the first stage and
  // of its copy on the last (numel 0 elsewhere, and without a pipeline):
  // summed over the two after backward, the two copies stay equal.
  Slice<T> tied_embedding_gradient();
  // The softmax probabilities of the last forward (one stage), (B·T, V); backward turns them into dlogits.
  const W* probabilities() { return find_logits(); }

 private:
  using Layer = BlockParameters;
  // This rank's share of the heads and widths (all of them on one rank).
  struct LocalWidths {
    int64_t heads, kv_heads, q, kv, mlp;
  };
  struct QkvViews {
    T *q, *k, *v;
    cpu::AttentionShape shape;
  };
  Transformer() = default;
  LocalWidths local_widths() const;
  planner::ActivationShape activation_shape() const;
  QkvViews qkv_views(T* qkv) const;
  const T* row_parallel_bias(int index);
  T* sequence_buffer();           // (N, h): the gathered rows of a norm's output, or a row-parallel layer's output
  T* sequence_gradient_buffer();  // (N, h): the same for gradients
  const T* whole_rows(const T* rows, T* buffer);
  void reduce_rows(T* whole, T* mine);
  // gemms(first_row, rows, input) over every row of `mine` (this rank's rows
  // under sequence parallelism), `input` pointing at row first_row of the
  // gathered `buffer`: once over all N rows after the all-gather, or under
  // --tp-comm-overlap over one rank's rows at a time as they arrive. Returns the whole rows.
  template <typename Gemms>
  const T* gathered_gemms(const T* mine, T* buffer, Gemms gemms);
  // gemms(first_row, rows, out) writes rows [first_row, + rows) of a split
  // layer's partial result to `out`; their sum over the group goes to `mine`
  // (reduce_rows from `whole`): all rows and then the reduction, or under
  // --tp-comm-overlap one rank's rows at a time, each sent as it is made.
  template <typename Gemms>
  void reduced_gemms(T* whole, T* mine, Gemms gemms);
  void build(const planner::Model& model, MemoryLedger& ledger, int64_t micro_batch, int64_t seq_len, uint64_t seed, FlatStorage storage);
  void recompute_block(int l, int index_in_chunk);
  RingBuffers<T> ring_buffers();
  void attention_forward(int l, const QkvViews& qkv);
  // Named buffers from the planner's activation table: those in the storage
  // type, and (in mixed precision) the fp32 ones.
  struct Buffers {
    std::vector<std::pair<std::string, Tensor<T>>> narrow;
    std::vector<std::pair<std::string, Tensor<W>>> wide;
  };
  // What one forward of a chunk keeps for its backward: its blocks' tensors
  // (indexed by layer; empty for other layers), with the head the final
  // norm's and the head's inputs and the logits, and the micro-batch's tokens.
  struct Pass {
    std::vector<Buffers> blocks;
    Buffers last_stage, logits;
    const int32_t* tokens = nullptr;
    const int32_t* targets = nullptr;
  };
  Buffers allocate(const std::vector<ActivationBuffer>& wanted);
  Pass allocate_pass(int chunk);
  Pass& pass_of(int chunk, int64_t micro);
  const planner::StageLayers& chunk_layers(int chunk) const { return chunks_[static_cast<size_t>(chunk)]; }
  T* act(int layer, const char* name);
  W* stats(int layer, const char* name);
  W* find_logits();
  T* param(int index) { return params_[static_cast<size_t>(index)].data(); }
  T* grad(int index) { return grads_[static_cast<size_t>(index)].data(); }
  void block_forward(int l, const T* input, T* output);
  void block_backward(int l);
  void head_forward();
  void head_backward(W loss_scale);

  planner::ModelConfig config_;
  planner::PipelinePlacement stage_;
  bool ties_embedding_ = false;  // the head is the embedding's transpose
  std::vector<planner::StageLayers> chunks_;  // this stage's blocks, one range per model chunk
  MemoryLedger* ledger_ = nullptr;
  ActivationBuffers buffers_;  // what the forward keeps and the recompute rebuilds (model/activation_buffers.h)
  TensorParallel tp_;
  ContextParallel cp_;
  planner::BlockRecompute recompute_;
  int64_t B_ = 0, T_ = 0;
  Tensor<T> flat_params_, flat_grads_;
  std::vector<Slice<T>> params_, grads_;
  std::vector<planner::FlatParameter> flat_order_;
  std::vector<std::string> names_;
  std::vector<std::vector<int64_t>> shapes_;
  UnitHooks* hooks_ = nullptr;
  std::vector<Layer> layers_;
  int wte_ = -1, wpe_ = -1, final_norm_w_ = -1, final_norm_b_ = -1, head_ = -1;
  // Activations by name, from the planner's activation table: the passes kept
  // for backward (one without a pipeline; per chunk and micro-batch in flight
  // with one), the one the current forward or backward works on, and what
  // every pass shares.
  Pass own_pass_;
  std::map<std::pair<int, int64_t>, Pass> passes_;
  Pass* current_ = nullptr;
  Buffers scratch_;
  Buffers working_;  // one block's recomputed tensors
  cpu::Workspace<W> workspace_;
};

}  // namespace tessera::engine
