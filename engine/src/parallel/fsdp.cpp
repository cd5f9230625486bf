#include "tessera/engine/parallel/fsdp.h"

#include <algorithm>
#include <type_traits>

#include "tessera/engine/model/initialization.h"

namespace tessera::engine {
template <typename T>
FullyShardedDataParallel<T>::FullyShardedDataParallel(comm::Communicator& group, const planner::PluginOptions& plugin, const planner::Model& model)
    : ParallelStrategy<T>(group),
      model_description_(model),
      offload_(plugin.cpu_offload),
      order_(planner::flat_parameter_order(model.inventory)),
      layout_(planner::fsdp_layout(model.inventory, order_, group.size())),
      schedule_(plugin.fsdp_strategy, static_cast<int>(layout_.units.size()) - 1),
      gathered_(layout_.units.size()),
      unit_gradients_(layout_.units.size()) {}

template <typename T>
Status FullyShardedDataParallel<T>::attach(MemoryLedger& ledger, Transformer<T>& model, std::vector<bool> decay, const OptimizerOptions& options) {
  ledger_ = &ledger;
  model_ = &model;
  const MemorySpace space = offload_ ? MemorySpace::host : MemorySpace::device;
  parameter_shard_ = Tensor<float>(ledger, MemoryCategory::parameters, layout_.shard_numel, space);
  gradient_shard_ = Tensor<float>(ledger, MemoryCategory::gradients, layout_.shard_numel, space);
  optimizer_.emplace(ledger, parameter_shard_.data(), layout_.shard_numel, planner::fsdp_pieces(layout_, order_, this->group_.rank()),
                     std::move(decay), options, space);
  if constexpr (std::is_same_v<T, float>) {
    if (this->group_.size() == 1 && !offload_) {
      // One fp32 rank: each unit's shard is the whole unit; the model computes on it in place.
      for (const planner::ShardedUnit& unit : layout_.units) {
        bind(unit.unit, parameter_shard_.data() + unit.offset_in_shard, gradient_shard_.data() + unit.offset_in_shard);
      }
      return Status::success();
    }
  }
  model.set_unit_hooks(this);
  return Status::success();
}

template <typename T>
void FullyShardedDataParallel<T>::initialize(const planner::Model& model, uint64_t seed) {
  // Where each parameter starts in its unit's flat buffer.
  std::vector<int> unit_index(order_.size());
  std::vector<int64_t> offset_in_unit(order_.size());
  for (size_t u = 0; u < layout_.units.size(); ++u) {
    int64_t offset = 0;
    for (int p : layout_.units[u].parameters) {
      unit_index[static_cast<size_t>(p)] = static_cast<int>(u);
      offset_in_unit[static_cast<size_t>(p)] = offset;
      offset += order_[static_cast<size_t>(p)].numel;
    }
  }
  const int64_t rank = this->group_.rank();
  float* shard = parameter_shard_.data();
  if (shard == nullptr) return;  // a dry run holds no data
  size_t p = 0;
  for_each_initial_value(model, seed, [&](int64_t flat_index, double value) {
    while (flat_index >= order_[p].offset + order_[p].numel) ++p;
    const planner::ShardedUnit& unit = layout_.units[static_cast<size_t>(unit_index[p])];
    const int64_t in_unit = offset_in_unit[p] + flat_index - order_[p].offset;
    if (in_unit / unit.shard == rank) shard[unit.offset_in_shard + in_unit - rank * unit.shard] = static_cast<float>(value);
  });
}

template <typename T>
void FullyShardedDataParallel<T>::bind(int unit, T* params, T* grads) {
  int64_t offset = 0;
  for (int p : unit_of(unit).parameters) {
    model_->bind_parameter(p, params != nullptr ? params + offset : nullptr, grads != nullptr ? grads + offset : nullptr);
    offset += order_[static_cast<size_t>(p)].numel;
  }
}

template <typename T>
void FullyShardedDataParallel<T>::gather(int unit) {
  Tensor<T>& gathered = gathered_[static_cast<size_t>(unit + 1)];
  if (failed()) return;
  const planner::ShardedUnit& u = unit_of(unit);
  gathered = Tensor<T>(*ledger_, MemoryCategory::chunk_buffers, u.padded);
  Tensor<float> copied_up;  // offloaded: the host shard's copy on the device, cast from there
  if (offload_) copied_up = Tensor<float>(*ledger_, MemoryCategory::parameters, u.shard);
  if (ledger_->is_dry_run()) return;
  // This rank's piece, cast to the compute type in its place, then the others' around it.
  T* own = gathered.data() + this->group_.rank() * u.shard;
  const float* shard = parameter_shard_.data() + u.offset_in_shard;
  if (offload_) {
    std::copy_n(shard, u.shard, copied_up.data());
    shard = copied_up.data();
  }
  for (int64_t i = 0; i < u.shard; ++i) own[i] = narrow<T>(shard[i]);
  error_ = this->group_.all_gather(own, gathered.data(), static_cast<size_t>(u.shard), comm::data_type_of<T>());
}

template <typename T>
void FullyShardedDataParallel<T>::release(int unit) {
  gathered_[static_cast<size_t>(unit + 1)] = Tensor<T>();
  bind(unit, nullptr, nullptr);
}

// The schedule's moves (parallel/fsdp_schedule.h), on host tensors.
template <typename T>
void FullyShardedDataParallel<T>::apply(const std::vector<FsdpMove>& moves) {
  for (const FsdpMove& move : moves) {
    const auto at = static_cast<size_t>(move.unit + 1);
    switch (move.kind) {
      case FsdpMoveKind::gather: gather(move.unit); break;
      case FsdpMoveKind::bind: bind(move.unit, gathered_[at].data(), unit_gradients_[at].data()); break;
      case FsdpMoveKind::open_gradient: unit_gradients_[at] = Tensor<T>(*ledger_, MemoryCategory::comm_buffers, unit_of(move.unit).padded); break;
      case FsdpMoveKind::reduce:
        reduce_unit_gradients(move.unit);
        unit_gradients_[at] = Tensor<T>();
        break;
      case FsdpMoveKind::release: release(move.unit); break;
    }
  }
}

template <typename T>
void FullyShardedDataParallel<T>::before_forward(int layer) {
  apply(schedule_.before_forward(layer));
}

template <typename T>
void FullyShardedDataParallel<T>::after_forward(int layer) {
  apply(schedule_.after_forward(layer));
}

template <typename T>
void FullyShardedDataParallel<T>::before_backward(int layer) {
  apply(schedule_.before_backward(layer));
}

template <typename T>
void FullyShardedDataParallel<T>::after_backward(int layer) {
  apply(schedule_.after_backward(layer));
}

// The unit's gradient is reduce-scattered in place; this rank's reduced piece
// is added to its gradient shard (micro-batches accumulate there), offloaded
// through a device fp32 copy on its way to the host.
template <typename T>
void FullyShardedDataParallel<T>::reduce_unit_gradients(int unit) {
  if (failed()) return;
  const planner::ShardedUnit& u = unit_of(unit);
  Tensor<float> copied_down;
  if (offload_) copied_down = Tensor<float>(*ledger_, MemoryCategory::gradients, u.shard);
  if (ledger_->is_dry_run()) return;
  T* gradient = unit_gradients_[static_cast<size_t>(unit + 1)].data();
  T* own = gradient + this->group_.rank() * u.shard;
  error_ = this->group_.reduce_scatter(gradient, own, static_cast<size_t>(u.shard), comm::data_type_of<T>(), comm::ReduceOp::sum);
  if (failed()) return;
  float* shard = gradient_shard_.data() + u.offset_in_shard;
  if (offload_) {
    float* down = copied_down.data();
    for (int64_t i = 0; i < u.shard; ++i) down[i] = widen(own[i]);
    for (int64_t i = 0; i < u.shard; ++i) shard[i] += down[i];
  } else {
    for (int64_t i = 0; i < u.shard; ++i) shard[i] += widen(own[i]);
  }
}

template <typename T>
Result<std::optional<double>> FullyShardedDataParallel<T>::step(double loss_scale) {
  if (failed()) return error_.error();
  auto sum_of_squares = this->global_sum_of_squares(*optimizer_, gradient_shard_.data(), loss_scale, sharded());
  if (!sum_of_squares) return sum_of_squares.error();
  return optimizer_->apply(gradient_shard_.data(), sum_of_squares.value(), loss_scale);
}

template class FullyShardedDataParallel<float>;
template class FullyShardedDataParallel<bf16>;
template class FullyShardedDataParallel<fp16>;

}  // namespace tessera::engine
