// gemini on the engine: ColossalAI's chunk-based ZeRO-3 (Fang et al. 2022,
// "Parallel Training of Pre-trained Models via Chunk-based Dynamic Memory
// Management"). The parameters are packed in execution order into chunks of
// the plan's size (planner::pack_chunks, the planner's own packing); every
// chunk is sharded evenly over the ranks, and a rank keeps its shard of each
// chunk's 16-bit parameters and gradients, and the fp32 master weights and
// optimizer states of all its shards.
//
// A chunk is gathered just before the first layer that uses it and released
// when a layer that does not use it comes next, in forward and in backward
// (recompute runs inside a block's backward and uses the same chunks); under
// a shard_param_frac below 1 the latest of them stay gathered within
// ColossalAI's budget. planner::GeminiGathering decides, and the planner
// replays the same decisions for its peak and traffic. In backward a gathered chunk also holds a full
// gradient chunk: this rank's slot starts from its accumulated gradient shard,
// the others' from zero; backward adds into it, and on release it is
// reduce-scattered in place, so this rank's slot becomes its shard plus every
// rank's new contribution. A chunk used twice in one backward (a tied
// embedding's, at the head and at the embeddings) is reduced each time and
// the sums still add up exactly once. Gradient accumulation therefore works.
//
// Placement: `cuda` (all on the device): a shard grows in place into the
// whole chunk while gathered and shrinks back after, so the device holds the
// shard plus the other ranks' part; `cpu`: shards, master weights and states
// live in the host space, and a gathered chunk is a device buffer of its own.
// `static`: the fp32 master weights and optimizer states of as many chunks as
// ColossalAI's StaticPlacementPolicy sends (gemini_static_placement.h) live on
// the host, the rest on the device, and each chunk's 16-bit shards as under
// `cuda`, or as under `cpu` for the chunks offload_param_frac sends
// (parameter_chunks_on_host). A chunk whose shards are on the device and
// whose states are on the host trades through a host copy of its shard
// (`gradients` on the host): each step its reduced gradients go down into
// it for the optimizer, and the updated weights come back up from it.
// `auto` runs as the static placement the planner solved when that puts all
// or none of the parameter chunks on the host.
// Chunk moves between the host and the device are counted.
#pragma once

#include <optional>
#include <vector>

#include "tessera/engine/parallel/gemini_chunks.h"
#include "tessera/engine/parallel/strategy.h"
#include "tessera/engine/tensor.h"

namespace tessera::engine {

// A rank's shard of one chunk's 16-bit values, booked in the ledger, that can
// grow into the whole chunk (this rank's values at its slot) and shrink back.
template <typename T>
class ChunkShard {
 public:
  ChunkShard() = default;
  ChunkShard(MemoryLedger& ledger, MemoryCategory category, MemorySpace space, int64_t shard);
  ChunkShard(ChunkShard&& other) noexcept;
  ChunkShard& operator=(ChunkShard&& other) noexcept;
  ~ChunkShard();

  // The whole chunk of `ranks` slots, this shard at slot `rank`, the others
  // zero; the growth is booked as chunk_buffers.
  void grow(int rank, int ranks);
  // Back to this rank's slot alone.
  void shrink(int rank);
  T* data() { return data_; }
  bool grown() const { return grown_; }

 private:
  void release();
  MemoryLedger* ledger_ = nullptr;
  MemoryCategory category_ = MemoryCategory::parameters;
  MemorySpace space_ = MemorySpace::device;
  int64_t shard_ = 0, grown_by_ = 0;
  bool grown_ = false;
  T* data_ = nullptr;
};

template <typename T>
class Gemini final : public ParallelStrategy<T>, private UnitHooks, private GeminiChunkMoves {
 public:
  // host_chunks: the leading chunks whose 16-bit shards live on the host, where
  // the plan solved it (`auto`); unset: planner::parameter_chunks_on_host.
  Gemini(comm::Communicator& group, const planner::PluginOptions& plugin, const planner::Model& model, std::optional<int64_t> host_chunks);

  FlatStorage storage() const override { return FlatStorage{0, MemoryCategory::gradients, false}; }
  Status attach(MemoryLedger& ledger, Transformer<T>& model, std::vector<bool> decay, const OptimizerOptions& options) override;
  void initialize(const planner::Model& model, uint64_t seed) override;
  void zero_gradients() override;
  Status reduce_gradients() override;
  Result<std::optional<double>> step(double loss_scale) override;
  OptimizerShard& optimizer() override { return *optimizer_; }
  bool sharded() const override { return this->group_.size() > 1; }
  Status weights_restored() override {
    round_master_into_shards();
    return Status::success();
  }
  // Host chunks gathered to the device and their gradient chunks back; a
  // chunk that exchanges through the host, its gradients down and weights up once a step.
  int64_t chunk_moves() const override { return moves_; }

 private:
  // Beside each of the plan's chunks: this rank's shards.
  struct Chunk {
    ChunkShard<T> weights, gradients; // this rank's shards (grown while gathered, on the device)
    Tensor<T> gathered_weights, gathered_gradients;  // shards on the host: the device copies while gathered
    Tensor<T> exchanged;  // the host copy of a chunk that exchanges_through_host (gemini_chunks.h)
  };

  void before_forward(int layer) override { use_layer(layer, false); }
  void after_forward(int) override {}
  void before_backward(int layer) override { use_layer(layer, true); }
  void after_backward(int) override {}
  // Carries out the gathering's moves for `layer`, then binds its parameters (gemini_chunks.h).
  void use_layer(int layer, bool backward) { use_gemini_layer(gathering_, layer, backward, *this); }
  void gather(int chunk) override;
  void open_gradients(int chunk) override;
  void bind(int chunk) override;
  void release(int chunk) override;
  void reduce(int chunk) override;
  const GeminiChunk& planned(int chunk) const { return plan_.chunks[static_cast<size_t>(chunk)]; }
  T* weights_of(int chunk);
  T* gradients_of(int chunk);
  // The 16-bit chunk shards from the fp32 master weights (after a step or a restore).
  void round_master_into_shards();
  bool failed() const { return !error_.ok(); }

  const planner::Model& model_description_;
  planner::PluginOptions plugin_;
  GeminiChunkPlan plan_;                     // the chunks, their contents and placement
  std::vector<planner::FlatParameter> order_;
  planner::GeminiGathering gathering_;       // which chunks are gathered, and holding gradients (over plan_)
  MemoryLedger* ledger_ = nullptr;
  Transformer<T>* model_ = nullptr;
  std::vector<Chunk> chunks_;
  std::optional<Optimizer<T>> optimizer_;
  int64_t moves_ = 0;
  Status error_ = Status::success();
};

}  // namespace tessera::engine
