#include "tessera/engine/device/fsdp_device_units.h"

namespace tessera::engine {
namespace {

constexpr int64_t kFp32 = 4, kBf16 = 2;

}  // namespace

FsdpDeviceUnits::FsdpDeviceUnits(const planner::Model& model, planner::FsdpStrategy strategy, int rank, int ranks, CachingAllocator& allocator,
                                 FsdpUnitOps& ops, std::vector<bf16*>& parameter_of, std::vector<bf16*>& gradient_of, const FsdpHostShards* host)
    : rank_(rank),
      ranks_(ranks),
      allocator_(allocator),
      ops_(ops),
      parameter_of_(parameter_of),
      gradient_of_(gradient_of),
      order_(planner::flat_parameter_order(model.inventory)),
      layout_(planner::fsdp_layout(model.inventory, order_, ranks)),
      schedule_(strategy, static_cast<int>(layout_.units.size()) - 1),
      host_(host != nullptr ? *host : FsdpHostShards{}),
      gathered_(layout_.units.size()),
      unit_gradients_(layout_.units.size()) {
  for (const planner::ShardedUnit& u : layout_.units) {
    std::vector<int64_t>& offsets = offsets_.emplace_back();
    int64_t offset = 0;
    for (const int p : u.parameters) {
      offsets.push_back(offset);
      offset += order_[static_cast<size_t>(p)].numel;
    }
  }
  if (offloaded()) return;
  const int64_t bytes = layout_.shard_numel * kFp32;
  weights_ = DeviceBlock(allocator, bytes, MemoryCategory::parameters);
  gradients_ = DeviceBlock(allocator, bytes, MemoryCategory::gradients);
  exp_avg_ = DeviceBlock(allocator, bytes, MemoryCategory::optimizer_states);
  exp_avg_sq_ = DeviceBlock(allocator, bytes, MemoryCategory::optimizer_states);
  for (const DeviceBlock* block : {&weights_, &gradients_, &exp_avg_, &exp_avg_sq_}) run(ops_.zero(block->as<void>(), bytes));
}

// Started calls still own their buffers on the communicator's stream: finished before the buffers go.
FsdpDeviceUnits::~FsdpDeviceUnits() {
  while (!in_flight_.empty()) {
    (void)ops_.finish_oldest();
    in_flight_.pop_front();
  }
}

bool FsdpDeviceUnits::run(const Status& status) {
  if (error_.ok() && !status.ok()) error_ = status;
  return error_.ok();
}

// Offloaded, each unit's reduction writes its host gradient shard whole.
Status FsdpDeviceUnits::zero_gradients() {
  if (!offloaded()) run(ops_.zero(gradients_.as<void>(), layout_.shard_numel * kFp32));
  return error_;
}

Status FsdpDeviceUnits::finish_reductions() {
  finish_through([](const StartedCall&) { return true; });
  return error_;
}

// The oldest started call waited for; a reduction's reduced slot added into
// the gradient shard and its buffer freed.
void FsdpDeviceUnits::finish_oldest() {
  StartedCall& oldest = in_flight_.front();
  const planner::ShardedUnit& u = unit(oldest.unit);
  if (run(ops_.finish_oldest()) && oldest.reduction) add_reduced(oldest.unit, oldest.gradient.as<bf16>() + rank_ * u.shard);
  in_flight_.pop_front();  // stream-ordered: the addition above has read it before anything reuses the block
}

void FsdpDeviceUnits::add_reduced(int u, const bf16* reduced) {
  const planner::ShardedUnit& p = unit(u);
  if (!offloaded()) {
    run(ops_.add_into_shard(gradients() + p.offset_in_shard, reduced, p.shard));
    return;
  }
  const DeviceBlock down(allocator_, p.shard * kFp32, MemoryCategory::gradients);  // freed stream-ordered, after the copy
  if (run(ops_.zero(down.as<void>(), p.shard * kFp32)) && run(ops_.add_into_shard(down.as<float>(), reduced, p.shard))) {
    run(ops_.copy_down(host_.gradients + p.offset_in_shard, down.as<void>(), p.shard * kFp32));
  }
}

template <typename Until>
void FsdpDeviceUnits::finish_through(Until until) {
  size_t calls = 0;
  for (size_t i = 0; i < in_flight_.size(); ++i) {
    if (until(in_flight_[i])) calls = i + 1;
  }
  for (; calls > 0 && error_.ok(); --calls) finish_oldest();
}

void FsdpDeviceUnits::gather(int u) {
  const planner::ShardedUnit& p = unit(u);
  DeviceBlock& whole = gathered_[static_cast<size_t>(u + 1)];
  whole = DeviceBlock(allocator_, p.padded * kBf16, MemoryCategory::chunk_buffers);
  const float* shard = weights() + p.offset_in_shard;
  DeviceBlock up;  // offloaded: the shard's copy on the device, freed stream-ordered after the cast
  if (offloaded()) {
    up = DeviceBlock(allocator_, p.shard * kFp32, MemoryCategory::parameters);
    if (!run(ops_.copy_up(up.as<void>(), shard, p.shard * kFp32))) return;
    shard = up.as<float>();
  }
  if (!run(ops_.cast_shard(whole.as<bf16>() + rank_ * p.shard, shard, p.shard)) || ranks_ == 1) return;
  if (run(ops_.start_all_gather(whole.as<bf16>(), p.shard))) in_flight_.push_back({u, false, DeviceBlock()});
}

void FsdpDeviceUnits::bind(int u) {
  finish_through([u](const StartedCall& call) { return !call.reduction && call.unit == u; });  // the unit's gather
  const planner::ShardedUnit& p = unit(u);
  bf16* weights = gathered_[static_cast<size_t>(u + 1)].as<bf16>();
  bf16* gradients = unit_gradients_[static_cast<size_t>(u + 1)].as<bf16>();
  const std::vector<int64_t>& offsets = offsets_[static_cast<size_t>(u + 1)];
  for (size_t j = 0; j < p.parameters.size(); ++j) {
    const auto parameter = static_cast<size_t>(p.parameters[j]);
    parameter_of_[parameter] = weights + offsets[j];
    gradient_of_[parameter] = gradients != nullptr ? gradients + offsets[j] : nullptr;
  }
}

void FsdpDeviceUnits::release(int u) {
  gathered_[static_cast<size_t>(u + 1)] = DeviceBlock();
  for (const int parameter : unit(u).parameters) {
    parameter_of_[static_cast<size_t>(parameter)] = nullptr;
    gradient_of_[static_cast<size_t>(parameter)] = nullptr;
  }
}

Status FsdpDeviceUnits::apply(const std::vector<FsdpMove>& moves) {
  for (const FsdpMove& move : moves) {
    if (!error_.ok()) break;
    const auto at = static_cast<size_t>(move.unit + 1);
    const planner::ShardedUnit& p = unit(move.unit);
    switch (move.kind) {
      case FsdpMoveKind::gather: gather(move.unit); break;
      case FsdpMoveKind::bind: bind(move.unit); break;
      case FsdpMoveKind::open_gradient:
        finish_through([](const StartedCall& call) { return call.reduction; });  // the root's and one block's buffers at most
        unit_gradients_[at] = DeviceBlock(allocator_, p.padded * kBf16, MemoryCategory::comm_buffers);
        run(ops_.zero(unit_gradients_[at].as<void>(), p.padded * kBf16));
        break;
      case FsdpMoveKind::reduce:
        if (ranks_ == 1) {  // its slot is the sum
          add_reduced(move.unit, unit_gradients_[at].as<bf16>());
          unit_gradients_[at] = DeviceBlock();
        } else if (run(ops_.start_reduce_scatter(unit_gradients_[at].as<bf16>(), p.shard))) {
          in_flight_.push_back({move.unit, true, std::move(unit_gradients_[at])});
        }
        break;
      case FsdpMoveKind::release: release(move.unit); break;
    }
  }
  return error_;
}

}  // namespace tessera::engine
