#include "tessera/engine/parallel/gemini.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "tessera/engine/model/initialization.h"
#include "tessera/planner/gemini_static_placement.h"
#include "tessera/planner/optimizer_layout.h"

namespace tessera::engine {

// ---- ChunkShard ----------------------------------------------------------

template <typename T>
ChunkShard<T>::ChunkShard(MemoryLedger& ledger, MemoryCategory category, MemorySpace space, int64_t shard)
    : ledger_(&ledger), category_(category), space_(space), shard_(shard) {
  const auto bytes = static_cast<size_t>(shard) * sizeof(T);
  ledger.allocated(category, space, static_cast<int64_t>(bytes));  // first: it throws past the space's capacity
  if (!ledger.is_dry_run() && shard > 0) {
    data_ = static_cast<T*>(std::calloc(static_cast<size_t>(shard), sizeof(T)));
    if (data_ == nullptr) {
      ledger.freed(category, space, static_cast<int64_t>(bytes));
      throw AllocationFailure(category, static_cast<int64_t>(bytes));
    }
  }
}

template <typename T>
ChunkShard<T>::ChunkShard(ChunkShard&& other) noexcept {
  *this = std::move(other);
}

template <typename T>
ChunkShard<T>& ChunkShard<T>::operator=(ChunkShard&& other) noexcept {
  if (this != &other) {
    release();
    ledger_ = std::exchange(other.ledger_, nullptr);
    category_ = other.category_;
    space_ = other.space_;
    shard_ = std::exchange(other.shard_, 0);
    grown_by_ = std::exchange(other.grown_by_, 0);
    grown_ = std::exchange(other.grown_, false);
    data_ = std::exchange(other.data_, nullptr);
  }
  return *this;
}

template <typename T>
ChunkShard<T>::~ChunkShard() {
  release();
}

template <typename T>
void ChunkShard<T>::release() {
  if (ledger_ == nullptr) return;
  ledger_->freed(category_, space_, shard_ * static_cast<int64_t>(sizeof(T)));
  if (grown_) ledger_->freed(MemoryCategory::chunk_buffers, space_, grown_by_ * static_cast<int64_t>(sizeof(T)));
  std::free(data_);
  data_ = nullptr;
  ledger_ = nullptr;
}

template <typename T>
void ChunkShard<T>::grow(int rank, int ranks) {
  const int64_t chunk = shard_ * ranks;
  ledger_->allocated(MemoryCategory::chunk_buffers, space_, (chunk - shard_) * static_cast<int64_t>(sizeof(T)));  // first: it may throw
  if (data_ != nullptr) {
    auto* grown = static_cast<T*>(std::realloc(data_, static_cast<size_t>(chunk) * sizeof(T)));
    if (grown == nullptr) {
      ledger_->freed(MemoryCategory::chunk_buffers, space_, (chunk - shard_) * static_cast<int64_t>(sizeof(T)));
      throw AllocationFailure(MemoryCategory::chunk_buffers, (chunk - shard_) * static_cast<int64_t>(sizeof(T)));
    }
    data_ = grown;
    T* slot = data_ + static_cast<int64_t>(rank) * shard_;
    std::memmove(slot, data_, static_cast<size_t>(shard_) * sizeof(T));
    std::fill(data_, slot, T{});
    std::fill(slot + shard_, data_ + chunk, T{});
  }
  grown_by_ = chunk - shard_;
  grown_ = true;
}

template <typename T>
void ChunkShard<T>::shrink(int rank) {
  if (data_ != nullptr) {
    std::memmove(data_, data_ + static_cast<int64_t>(rank) * shard_, static_cast<size_t>(shard_) * sizeof(T));
    // Shrinking keeps the block where it is (realloc never fails to shrink in
    // glibc); a null result would leave the old block valid, so keep it then.
    if (auto* shrunk = static_cast<T*>(std::realloc(data_, static_cast<size_t>(shard_) * sizeof(T)))) data_ = shrunk;
  }
  ledger_->freed(MemoryCategory::chunk_buffers, space_, grown_by_ * static_cast<int64_t>(sizeof(T)));
  grown_by_ = 0;
  grown_ = false;
}

// ---- Gemini ----------------------------------------------------------------

template <typename T>
Gemini<T>::Gemini(comm::Communicator& group, const planner::PluginOptions& plugin, const planner::Model& model, std::optional<int64_t> host_chunks)
    : ParallelStrategy<T>(group),
      model_description_(model),
      plugin_(plugin),
      plan_(gemini_chunk_plan(model, plugin.gemini, group.size(), host_chunks)),
      order_(planner::flat_parameter_order(model.inventory)),
      gathering_(plan_.layout.chunk_capacity, plan_.chunks_of_layer, plan_.kept_gathered_elements),
      chunks_(plan_.chunks.size()) {}

template <typename T>
Status Gemini<T>::attach(MemoryLedger& ledger, Transformer<T>& model, std::vector<bool> decay, const OptimizerOptions& options) {
  ledger_ = &ledger;
  model_ = &model;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    const GeminiChunk& planned = plan_.chunks[i];
    const MemorySpace space = planned.on_host ? MemorySpace::host : MemorySpace::device;
    chunks_[i].weights = ChunkShard<T>(ledger, MemoryCategory::parameters, space, planned.shard);
    chunks_[i].gradients = ChunkShard<T>(ledger, MemoryCategory::gradients, space, planned.shard);
    if (planned.exchanges_through_host()) chunks_[i].exchanged = Tensor<T>(ledger, MemoryCategory::gradients, planned.shard, MemorySpace::host);
  }
  // The parameters live in the chunks: the optimizer updates its fp32 master
  // weights and step() rounds them into the chunk shards.
  // Its fp32 states of the plan's leading host chunks (their slots lead the shard) live on the host.
  planner::OptimizerLayout layout = planner::optimizer_layout(model_description_, plugin_, this->group_.size(), this->group_.rank());
  optimizer_.emplace(ledger, nullptr, layout.shard_numel, std::move(layout.pieces), std::move(decay), options, HostPrefix{plan_.host_optimizer_elements()});
  model.set_unit_hooks(this);
  return Status::success();
}

template <typename T>
void Gemini<T>::initialize(const planner::Model& model, uint64_t seed) {
  float* master = optimizer_->weights();
  if (master == nullptr) return;  // a dry run holds no data
  // Where each flat parameter sits: its chunk and offset there.
  std::vector<std::pair<int, int64_t>> place(order_.size());
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const GeminiChunk& p = plan_.chunks[c];
    for (size_t j = 0; j < p.parameters.size(); ++j) place[static_cast<size_t>(p.parameters[j])] = {static_cast<int>(c), p.offsets[j]};
  }
  size_t p = 0;
  for_each_initial_value(model, seed, [&](int64_t flat_index, double value) {
    while (flat_index >= order_[p].offset + order_[p].numel) ++p;
    const auto [chunk, offset] = place[p];
    const GeminiChunk& c = planned(chunk);
    const int64_t begin = this->group_.rank() * c.shard;
    const int64_t in_chunk = offset + flat_index - order_[p].offset;
    if (in_chunk < begin || in_chunk >= begin + c.shard) return;
    master[c.shard_offset + in_chunk - begin] = static_cast<float>(value);
    chunks_[static_cast<size_t>(chunk)].weights.data()[in_chunk - begin] = narrow<T>(static_cast<float>(value));
  });
}

template <typename T>
void Gemini<T>::zero_gradients() {
  for (size_t i = 0; i < chunks_.size(); ++i) {
    T* gradients = chunks_[i].gradients.data();
    if (gradients != nullptr) std::fill(gradients, gradients + plan_.chunks[i].shard, T{});
  }
}

template <typename T>
T* Gemini<T>::weights_of(int chunk) {
  Chunk& c = chunks_[static_cast<size_t>(chunk)];
  return planned(chunk).on_host ? c.gathered_weights.data() : c.weights.data();
}

template <typename T>
T* Gemini<T>::gradients_of(int chunk) {
  Chunk& c = chunks_[static_cast<size_t>(chunk)];
  return planned(chunk).on_host ? c.gathered_gradients.data() : c.gradients.data();
}

template <typename T>
void Gemini<T>::gather(int chunk) {
  Chunk& c = chunks_[static_cast<size_t>(chunk)];
  const GeminiChunk& p = planned(chunk);
  const int rank = this->group_.rank(), ranks = this->group_.size();
  const int64_t shard = p.shard, whole = shard * ranks;
  const bool dry = ledger_->is_dry_run();
  if (p.on_host) {
    c.gathered_weights = Tensor<T>(*ledger_, MemoryCategory::chunk_buffers, whole);
    if (!dry) std::copy_n(c.weights.data(), shard, c.gathered_weights.data() + rank * shard);
    ++moves_;
  } else {
    c.weights.grow(rank, ranks);
  }
  T* data = weights_of(chunk);
  if (!dry && !failed()) error_ = this->group_.all_gather(data + rank * shard, data, static_cast<size_t>(shard), comm::data_type_of<T>());
}

template <typename T>
void Gemini<T>::open_gradients(int chunk) {
  Chunk& c = chunks_[static_cast<size_t>(chunk)];
  const GeminiChunk& p = planned(chunk);
  const int rank = this->group_.rank(), ranks = this->group_.size();
  if (p.on_host) {
    c.gathered_gradients = Tensor<T>(*ledger_, MemoryCategory::chunk_buffers, p.shard * ranks);
    if (!ledger_->is_dry_run()) std::copy_n(c.gradients.data(), p.shard, c.gathered_gradients.data() + rank * p.shard);
    ++moves_;
  } else {
    c.gradients.grow(rank, ranks);
  }
}

template <typename T>
void Gemini<T>::bind(int chunk) {
  const GeminiChunk& p = planned(chunk);
  T* weights = weights_of(chunk);
  T* gradients = gathering_.holds_gradients(chunk) ? gradients_of(chunk) : nullptr;
  for (size_t j = 0; j < p.parameters.size(); ++j) {
    model_->bind_parameter(p.parameters[j], weights != nullptr ? weights + p.offsets[j] : nullptr,
                           gradients != nullptr ? gradients + p.offsets[j] : nullptr);
  }
}

// The chunk's gradient, reduce-scattered in place: this rank's slot becomes
// its accumulated shard plus every rank's new contribution.
template <typename T>
void Gemini<T>::reduce(int chunk) {
  Chunk& c = chunks_[static_cast<size_t>(chunk)];
  const GeminiChunk& p = planned(chunk);
  const int rank = this->group_.rank();
  T* gradient = gradients_of(chunk);
  if (!ledger_->is_dry_run() && !failed()) {
    error_ = this->group_.reduce_scatter(gradient, gradient + rank * p.shard, static_cast<size_t>(p.shard), comm::data_type_of<T>(), comm::ReduceOp::sum);
  }
  if (p.on_host) {
    if (gradient != nullptr) std::copy_n(gradient + rank * p.shard, p.shard, c.gradients.data());
    c.gathered_gradients = Tensor<T>();
    ++moves_;
  } else {
    c.gradients.shrink(rank);
  }
}

template <typename T>
void Gemini<T>::release(int chunk) {
  Chunk& c = chunks_[static_cast<size_t>(chunk)];
  const GeminiChunk& p = planned(chunk);
  if (p.on_host) {
    c.gathered_weights = Tensor<T>();  // forward and backward do not change the weights: nothing to copy back
  } else {
    c.weights.shrink(this->group_.rank());
  }
}

template <typename T>
Status Gemini<T>::reduce_gradients() {
  apply_gemini_moves(gathering_.release_all(), *this);
  return error_;
}

template <typename T>
Result<std::optional<double>> Gemini<T>::step(double loss_scale) {
  if (failed()) return error_.error();
  double sum = 0;
  for (size_t i = 0; i < chunks_.size(); ++i) sum += Optimizer<T>::sum_of_squares(chunks_[i].gradients.data(), plan_.chunks[i].shard, 1.0 / loss_scale);
  if (sharded()) {
    if (Status s = this->group_.all_reduce(&sum, &sum, 1, comm::DataType::f64, comm::ReduceOp::sum); !s) return s.error();
  }
  // Down: the reduced gradient shards of the chunks that exchange through the host, for the optimizer there.
  int64_t exchanging = 0;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    if (!plan_.chunks[i].exchanges_through_host()) continue;
    if (T* down = chunks_[i].exchanged.data()) std::copy_n(chunks_[i].gradients.data(), plan_.chunks[i].shard, down);
    ++exchanging;
  }
  moves_ += exchanging;
  const auto gradients_of_piece = [this](const planner::ShardPiece& piece) {
    const size_t chunk = plan_.chunk_holding(piece.offset_in_shard);
    Chunk& c = chunks_[chunk];
    const T* gradients = plan_.chunks[chunk].exchanges_through_host() ? c.exchanged.data() : c.gradients.data();
    return gradients + (piece.offset_in_shard - plan_.chunks[chunk].shard_offset);
  };
  const std::optional<double> norm = optimizer_->apply_by_piece(gradients_of_piece, sum, loss_scale);
  if (norm) {
    round_master_into_shards();
    moves_ += exchanging;  // up: their updated weights
  }
  return norm;
}

template <typename T>
void Gemini<T>::round_master_into_shards() {
  const float* master = optimizer_->weights();
  if (master == nullptr) return;  // a dry run holds no data
  for (size_t c = 0; c < chunks_.size(); ++c) {
    T* weights = chunks_[c].weights.data();
    const GeminiChunk& p = plan_.chunks[c];
    for (int64_t i = 0; i < p.shard; ++i) weights[i] = narrow<T>(master[p.shard_offset + i]);
  }
}

template class ChunkShard<bf16>;
template class ChunkShard<fp16>;
template class ChunkShard<float>;
template class Gemini<float>;
template class Gemini<bf16>;
template class Gemini<fp16>;

}  // namespace tessera::engine
