// ZeRO-Offload on the GPU step; see zero_offload.h.
#include "zero_offload.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "tessera/engine/device/offload_host_blocks.h"
#include "tessera/engine/device/offload_transfer.h"

#include "cuda_errors.h"
#include "global_sum_of_squares.h"

namespace tessera::engine::cuda {

OffloadedShard::OffloadedShard(MemoryLedger& ledger, const planner::OptimizerLayout& layout, std::vector<bool> decay, const OptimizerOptions& options,
                               std::vector<bool> counted)
    : shard_(layout.shard_numel), counted_(std::move(counted)), host_(pinned_, events_, ledger) {
  made(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "making the offload's copy stream");
  made(cudaEventCreateWithFlags(&ordered_, cudaEventDisableTiming), "making the offload's event");
  transfer_ = allocate_zero_offload_transfer(host_, shard_);
  std::fill(transfer_, transfer_ + shard_, 0.0f);  // the master weights start from it here; start_from sets them
  optimizer_.emplace(ledger, reinterpret_cast<bf16*>(transfer_), shard_, layout.pieces, std::move(decay), options, MemorySpace::host);
}

OffloadedShard::~OffloadedShard() {
  optimizer_.reset();
  if (copy_ != nullptr) cudaStreamSynchronize(copy_);
  if (transfer_ != nullptr) host_.free(transfer_);
  if (ordered_ != nullptr) cudaEventDestroy(ordered_);
  if (copy_ != nullptr) cudaStreamDestroy(copy_);
}

void OffloadedShard::start_from(const std::vector<float>& shard) { std::copy_n(shard.begin(), shard_, optimizer_->weights()); }

Status OffloadedShard::copy_stream_after_compute() {
  if (Status s = succeeded(cudaEventRecord(ordered_, nullptr), "recording the compute stream's event"); !s) return s;
  return succeeded(cudaStreamWaitEvent(copy_, ordered_, 0), "ordering the copy stream after the compute stream");
}

Status OffloadedShard::send_parameters(bf16* device_parameters) {
  if (Status s = succeeded(copy_to_device_async(device_parameters, transfer_, static_cast<size_t>(shard_) * sizeof(bf16), copy_, host_),
                           "copying the parameter shard to the device");
      !s) {
    return s;
  }
  if (Status s = succeeded(cudaEventRecord(ordered_, copy_), "recording the copy stream's event"); !s) return s;
  return succeeded(cudaStreamWaitEvent(nullptr, ordered_, 0), "ordering the compute stream after the copy");
}

Result<std::optional<double>> OffloadedShard::step(const bf16* device_gradients, bf16* device_parameters, std::initializer_list<comm::Communicator*> groups,
                                                   double* device_sum) {
  if (Status s = copy_stream_after_compute(); !s) return s.error();
  if (Status s = succeeded(copy_to_host_async(transfer_, device_gradients, static_cast<size_t>(shard_) * sizeof(bf16), copy_, host_),
                           "copying the gradient shard to the host");
      !s) {
    return s.error();
  }
  if (Status s = succeeded(cudaStreamSynchronize(copy_), "waiting for the gradient shard"); !s) return s.error();
  widen_bf16_in_place(transfer_, shard_);
  // The global norm's square: this shard's counted pieces, then summed over the groups.
  auto sum = sum_over_groups(optimizer_->counted_sum_of_squares(static_cast<const float*>(transfer_), counted_, 1.0), device_sum, groups);
  if (!sum) return sum.error();
  const std::optional<double> norm = optimizer_->apply(static_cast<const float*>(transfer_), sum.value(), 1.0);
  if (!norm) return norm;
  if (Status s = send_parameters(device_parameters); !s) return s.error();
  return norm;
}

Status OffloadedShard::save(FlatAdamWState& state) {
  if (state.numel() != shard_) return make_error(ErrorCode::invalid_argument, "a ZeRO checkpoint needs a host state of this rank's shard (optimizer_layout)");
  std::copy_n(optimizer_->weights(), shard_, state.weights());
  for (int s = 0; s < 2; ++s) std::copy_n(optimizer_->state(s), shard_, state.state(s));
  state.set_steps_taken(optimizer_->steps_taken());
  return Status::success();
}

Status OffloadedShard::restore(FlatAdamWState& state, bf16* device_parameters) {
  if (state.numel() != shard_) return make_error(ErrorCode::invalid_argument, "a ZeRO checkpoint needs a host state of this rank's shard (optimizer_layout)");
  std::copy_n(state.weights(), shard_, optimizer_->weights());
  for (int s = 0; s < 2; ++s) std::copy_n(state.state(s), shard_, optimizer_->state(s));
  optimizer_->set_steps_taken(state.steps_taken());
  // Nothing may be reading the transfer buffer: the last copies have run.
  if (Status s = succeeded(cudaStreamSynchronize(copy_), "waiting for the copy stream"); !s) return s;
  optimizer_->weights_restored();  // rounds into the transfer buffer
  return send_parameters(device_parameters);
}

}  // namespace tessera::engine::cuda
