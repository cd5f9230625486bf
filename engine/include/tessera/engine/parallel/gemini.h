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
// (recompute runs inside a block's backward and uses the same chunks), so at
// most the chunks of one layer are gathered at a time (the planner's
// peak_chunks_per_layer). In backward a gathered chunk also holds a full
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
// the host, the rest on the device, and the 16-bit shards as under `cuda`, or
// as under `cpu` with offload_param_frac 1; `auto` runs as the static
// placement the planner solved. Fractions of the parameters' chunks (sharded
// or offloaded) are not run. Chunk moves between the host and the device are counted.
#pragma once

#include <optional>
#include <vector>

#include "tessera/engine/parallel/strategy.h"
#include "tessera/engine/tensor.h"
#include "tessera/planner/chunks.h"

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
class Gemini final : public ParallelStrategy<T>, private UnitHooks {
 public:
  Gemini(comm::Communicator& group, const planner::PluginOptions& plugin, const planner::Model& model);

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
  // The `cpu` placement moves every gathered chunk to the device and every gradient chunk back.
  int64_t chunk_moves() const override { return moves_; }

 private:
  struct Chunk {
    std::vector<int> parameters;      // flat-order indices packed here, in packing order
    std::vector<int64_t> offsets;     // of each, in the chunk
    int64_t shard = 0;                // elements of the chunk per rank (its capacity / ranks)
    int64_t shard_offset = 0;         // where its slot starts in the optimizer's states
    ChunkShard<T> weights, gradients; // this rank's shards (grown while gathered, under `cuda`)
    Tensor<T> gathered_weights, gathered_gradients;  // `cpu`: the device copies while gathered
    bool holds_gradients = false;     // a gradient chunk is open (backward)
  };

  void before_forward(int layer) override { use_layer(layer, false); }
  void after_forward(int) override {}
  void before_backward(int layer) override { use_layer(layer, true); }
  void after_backward(int) override {}
  // Releases the gathered chunks `layer` does not use, then gathers its own.
  void use_layer(int layer, bool backward);
  void gather(int chunk, bool with_gradients);
  void release(int chunk);
  void reduce(int chunk);
  T* weights_of(int chunk);
  T* gradients_of(int chunk);
  // The 16-bit chunk shards from the fp32 master weights (after a step or a restore).
  void round_master_into_shards();
  bool failed() const { return !error_.ok(); }

  const planner::Model& model_description_;
  planner::PluginOptions plugin_;
  planner::ChunkLayout layout_;
  std::vector<planner::FlatParameter> order_;
  std::vector<std::vector<int>> chunks_of_layer_;  // index layer + 1
  bool placement_host_ = false;              // the 16-bit chunk shards live on the host (cpu, static with offload_param_frac 1)
  int64_t optimizer_chunks_on_host_ = 0;     // the leading chunks whose fp32 states live on the host
  MemoryLedger* ledger_ = nullptr;
  Transformer<T>* model_ = nullptr;
  std::vector<Chunk> chunks_;
  std::vector<int> gathered_;                      // chunk indices, in gathering order
  std::optional<Optimizer<T>> optimizer_;
  int64_t moves_ = 0;
  Status error_ = Status::success();
};

}  // namespace tessera::engine
