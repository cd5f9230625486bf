// Gemini on the GPU step; see gemini_shards.h.
#include "gemini_shards.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "tessera/engine/adamw_step.h"
#include "tessera/engine/cuda/adamw.h"
#include "tessera/engine/cuda/sum_of_squares.h"
#include "tessera/engine/shard_values.h"

#include "cuda_errors.h"
#include "device_adamw_step.h"

namespace tessera::engine::cuda {
namespace {

size_t bytes(int64_t n, size_t element) { return static_cast<size_t>(n) * element; }

}  // namespace

// ---- CudaChunkCopies ------------------------------------------------------

CudaChunkCopies::CudaChunkCopies(comm::Communicator* group, PinnedHostAllocator& host) : group_(group), host_(host) {
  made(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "making Gemini's copy stream");
  made(cudaEventCreateWithFlags(&ordered_, cudaEventDisableTiming), "making Gemini's copy event");
}

CudaChunkCopies::~CudaChunkCopies() {
  if (copy_ != nullptr) cudaStreamSynchronize(copy_);
  if (ordered_ != nullptr) cudaEventDestroy(ordered_);
  if (copy_ != nullptr) cudaStreamDestroy(copy_);
}

Status CudaChunkCopies::copy(bf16* device_to, const bf16* device_from, int64_t n) {
  return succeeded(cudaMemcpyAsync(device_to, device_from, bytes(n, sizeof(bf16)), cudaMemcpyDeviceToDevice, nullptr), "copying a chunk's shard");
}

Status CudaChunkCopies::zero(bf16* device, int64_t n) {
  if (n == 0) return Status::success();
  return succeeded(cudaMemsetAsync(device, 0, bytes(n, sizeof(bf16)), nullptr), "zeroing a chunk");
}

Status CudaChunkCopies::copy_stream_after_compute() {
  if (Status s = succeeded(cudaEventRecord(ordered_, nullptr), "recording the compute stream's event"); !s) return s;
  return succeeded(cudaStreamWaitEvent(copy_, ordered_, 0), "ordering the copy stream after the compute stream");
}

// Up on the copy stream, after what the compute stream has queued (the
// chunk block may have just been freed there), and the compute stream's next
// work after it.
Status CudaChunkCopies::upload(bf16* device, const bf16* pinned, int64_t n) {
  if (Status s = copy_stream_after_compute(); !s) return s;
  if (Status s = succeeded(copy_to_device_async(device, pinned, bytes(n, sizeof(bf16)), copy_, host_), "copying a chunk's shard up"); !s) return s;
  if (Status s = succeeded(cudaEventRecord(ordered_, copy_), "recording the copy stream's event"); !s) return s;
  return succeeded(cudaStreamWaitEvent(nullptr, ordered_, 0), "ordering the compute stream after the upload");
}

Status CudaChunkCopies::download(bf16* pinned, const bf16* device, int64_t n) {
  if (Status s = copy_stream_after_compute(); !s) return s;
  return succeeded(copy_to_host_async(pinned, device, bytes(n, sizeof(bf16)), copy_, host_), "copying a gradient shard down");
}

Status CudaChunkCopies::wait_for_copies() { return succeeded(cudaStreamSynchronize(copy_), "waiting for Gemini's copies"); }

Status CudaChunkCopies::all_gather(bf16* chunk, int64_t shard) {
  if (group_ == nullptr) return Status::success();  // one rank: its slot is the chunk
  return group_->all_gather(chunk + group_->rank() * shard, chunk, static_cast<size_t>(shard), comm::DataType::bf16);
}

Status CudaChunkCopies::reduce_scatter(const bf16* chunk, bf16* shard, int64_t n) {
  if (group_ == nullptr) return shard == chunk ? Status::success() : copy(shard, chunk, n);
  return group_->reduce_scatter(chunk, shard, static_cast<size_t>(n), comm::DataType::bf16, comm::ReduceOp::sum);
}

// ---- GeminiShards ----------------------------------------------------------

GeminiShards::GeminiShards(CachingAllocator& allocator, MemoryLedger& ledger, comm::Communicator* group, const planner::Model& model,
                           const planner::PluginOptions& plugin, std::optional<int64_t> host_chunks, std::vector<bool> decay, const OptimizerOptions& options,
                           std::vector<bf16*>& parameter_of, std::vector<bf16*>& gradient_of)
    : group_(group),
      layout_(planner::optimizer_layout(model, plugin, group != nullptr ? group->size() : 1, group != nullptr ? group->rank() : 0)),
      plan_(gemini_chunk_plan(model, plugin.gemini, group != nullptr ? group->size() : 1, host_chunks)),
      order_(planner::flat_parameter_order(model.inventory)),
      decay_(std::move(decay)),
      options_(options),
      host_(pinned_, events_, ledger),
      copies_(group, host_) {
  if (plugin.gemini.placement_policy == planner::GeminiPlacement::auto_placement) {
    throw std::invalid_argument("Gemini's auto placement runs as the static placement the planner solved for the GPU (resolve it first)");
  }
  for (const GeminiChunk& c : plan_.chunks) {
    // The placements put a chunk's shards on the host only with its states (gemini_static_placement.h).
    if (c.on_host && !c.optimizer_on_host) throw std::logic_error("Gemini: a chunk's 16-bit shards on the host and its states on the device");
  }
  const int rank = group != nullptr ? group->rank() : 0, ranks = group != nullptr ? group->size() : 1;
  chunks_ = std::make_unique<GeminiDeviceChunks>(plan_, rank, ranks, allocator, host_, ledger, copies_, parameter_of, gradient_of);
  host_slots_ = plan_.host_optimizer_elements();
  if (host_slots_ > 0) {
    std::vector<planner::ShardPiece> host_pieces;  // the pieces of the leading slots (a piece lies in one chunk's slot)
    for (const planner::ShardPiece& piece : layout_.pieces) {
      if (piece.offset_in_shard < host_slots_) host_pieces.push_back(piece);
    }
    host_optimizer_.emplace(ledger, nullptr, host_slots_, std::move(host_pieces), decay_, options_, MemorySpace::host);
  }
  const int64_t on_device = layout_.shard_numel - host_slots_;
  if (on_device > 0) {
    master_ = DeviceBlock(allocator, static_cast<int64_t>(bytes(on_device, sizeof(float))), MemoryCategory::master_weights);
    exp_avg_ = DeviceBlock(allocator, static_cast<int64_t>(bytes(on_device, sizeof(float))), MemoryCategory::optimizer_states);
    exp_avg_sq_ = DeviceBlock(allocator, static_cast<int64_t>(bytes(on_device, sizeof(float))), MemoryCategory::optimizer_states);
  }
}

GeminiShards::~GeminiShards() = default;

Status GeminiShards::start_from(const std::vector<float>& weights) {
  std::vector<float> values[3];
  values[0].assign(static_cast<size_t>(layout_.shard_numel), 0.0f);  // the padding stays 0
  flat_values_to_shard(layout_.pieces, order_, weights.data(), values[0].data());
  values[1].assign(values[0].size(), 0.0f);
  values[2].assign(values[0].size(), 0.0f);
  return write_states(values, 0);
}

Status GeminiShards::read_states(std::vector<float> (&values)[3]) {
  const int64_t n = layout_.shard_numel, on_device = n - host_slots_;
  const DeviceBlock* blocks[3] = {&master_, &exp_avg_, &exp_avg_sq_};
  for (int k = 0; k < 3; ++k) {
    values[k].resize(static_cast<size_t>(n));
    if (host_optimizer_) {
      const float* host = k == 0 ? host_optimizer_->weights() : host_optimizer_->state(k - 1);
      std::copy(host, host + host_slots_, values[k].begin());
    }
    if (on_device == 0) continue;
    if (Status s = succeeded(cudaMemcpy(values[k].data() + host_slots_, blocks[k]->as<float>(), bytes(on_device, sizeof(float)), cudaMemcpyDeviceToHost),
                             "copying the optimizer's slots");
        !s) {
      return s;
    }
  }
  return Status::success();
}

Status GeminiShards::write_states(const std::vector<float> (&values)[3], int64_t steps) {
  const int64_t on_device = layout_.shard_numel - host_slots_;
  DeviceBlock* blocks[3] = {&master_, &exp_avg_, &exp_avg_sq_};
  for (int k = 0; k < 3; ++k) {
    if (host_optimizer_) {
      float* host = k == 0 ? host_optimizer_->weights() : host_optimizer_->state(k - 1);
      std::copy(values[k].begin(), values[k].begin() + host_slots_, host);
    }
    if (on_device == 0) continue;
    if (Status s = succeeded(cudaMemcpy(blocks[k]->as<float>(), values[k].data() + host_slots_, bytes(on_device, sizeof(float)), cudaMemcpyHostToDevice),
                             "copying the optimizer's slots");
        !s) {
      return s;
    }
  }
  if (host_optimizer_) host_optimizer_->set_steps_taken(steps);
  steps_ = steps;
  return round_into_shards(values[0].data());
}

Status GeminiShards::round_into_shards(const float* master) {
  if (Status s = copies_.wait_for_copies(); !s) return s;  // no copy may still use a pinned shard
  for (size_t c = 0; c < plan_.chunks.size(); ++c) {
    const GeminiChunk& chunk = plan_.chunks[c];
    std::vector<bf16> rounded(static_cast<size_t>(chunk.shard));
    for (int64_t i = 0; i < chunk.shard; ++i) rounded[static_cast<size_t>(i)] = narrow<bf16>(master[chunk.shard_offset + i]);
    if (chunk.on_host) {
      std::copy(rounded.begin(), rounded.end(), chunks_->weight_shard(c));
    } else if (Status s = succeeded(cudaMemcpy(chunks_->weight_shard(c), rounded.data(), bytes(chunk.shard, sizeof(bf16)), cudaMemcpyHostToDevice),
                                    "copying a weight shard");
               !s) {
      return s;
    }
  }
  return Status::success();
}

Status GeminiShards::all_reduce_sum(double& sum, double* device_sum) {
  if (group_ == nullptr) return Status::success();
  // NCCL's buffers are device memory.
  if (Status s = succeeded(cudaMemcpy(device_sum, &sum, sizeof sum, cudaMemcpyHostToDevice), "copying the sum of squares"); !s) return s;
  if (Status s = group_->all_reduce(device_sum, device_sum, 1, comm::DataType::f64, comm::ReduceOp::sum); !s) return s;
  return succeeded(cudaMemcpy(&sum, device_sum, sizeof sum, cudaMemcpyDeviceToHost), "copying the sum of squares");
}

Result<double> GeminiShards::squared_gradients(void* sum_workspace, double* device_sum) {
  double sum = 0;
  for (size_t c = 0; c < plan_.chunks.size(); ++c) {
    const GeminiChunk& chunk = plan_.chunks[c];
    if (chunk.optimizer_on_host) {  // its gradients came down with release_all; the step waited for them
      sum += Optimizer<bf16>::sum_of_squares(chunks_->host_gradients(c), chunk.shard, 1.0);
      continue;
    }
    if (Status s = succeeded(sum_of_squares(device_sum, reinterpret_cast<int32_t*>(device_sum + 1), chunks_->gradient_shard(c), chunk.shard, 1.0,
                                                  sum_workspace, nullptr),
                             "a gradient shard's sum of squares");
        !s) {
      return s.error();
    }
    double chunk_sum = 0;
    if (Status s = succeeded(cudaMemcpy(&chunk_sum, device_sum, sizeof chunk_sum, cudaMemcpyDeviceToHost), "copying the sum of squares"); !s) return s.error();
    sum += chunk_sum;
  }
  if (Status s = all_reduce_sum(sum, device_sum); !s) return s.error();
  return sum;
}

Status GeminiShards::device_update(const AdamWScalars& scalars) {
  for (const planner::ShardPiece& piece : layout_.pieces) {
    if (piece.offset_in_shard < host_slots_) continue;
    const size_t c = plan_.chunk_holding(piece.offset_in_shard);
    const int64_t at = piece.offset_in_shard - host_slots_, in_slot = piece.offset_in_shard - plan_.chunks[c].shard_offset;
    const float wd = decay_[static_cast<size_t>(piece.parameter)] ? static_cast<float>(options_.weight_decay) : 0.0f;
    if (Status s = succeeded(adamw(chunks_->weight_shard(c) + in_slot, master_.as<float>() + at, exp_avg_.as<float>() + at, exp_avg_sq_.as<float>() + at,
                                   chunks_->gradient_shard(c) + in_slot, piece.numel, wd, scalars, nullptr),
                             "adamw");
        !s) {
      return s;
    }
  }
  return Status::success();
}

Result<std::optional<double>> GeminiShards::step(void* sum_workspace, double* device_sum) {
  if (host_optimizer_) {
    if (Status s = copies_.wait_for_copies(); !s) return s.error();  // the host gradients are down
  }
  const Result<double> sum = squared_gradients(sum_workspace, device_sum);
  if (!sum.ok()) return sum.error();
  const std::optional<DeviceAdamWStep> begun = begin_adamw_step(sum.value(), steps_, options_);
  if (!begun) return std::optional<double>();
  if (Status s = device_update(begun->scalars); !s) return s.error();
  if (host_optimizer_) {
    // The CPU engine's update (Gemini::step) of the host's slots, its weights rounded into their host shards and the exchanged ones sent up.
    const auto gradients_of_piece = [this](const planner::ShardPiece& piece) {
      const size_t chunk = plan_.chunk_holding(piece.offset_in_shard);
      return chunks_->host_gradients(chunk) + (piece.offset_in_shard - plan_.chunks[chunk].shard_offset);
    };
    host_optimizer_->apply_by_piece(gradients_of_piece, sum.value(), 1.0);
    const float* master = host_optimizer_->weights();
    for (size_t c = 0; c < plan_.chunks.size() && plan_.chunks[c].optimizer_on_host; ++c) {
      const GeminiChunk& chunk = plan_.chunks[c];
      bf16* weights = chunks_->host_weights(c);
      for (int64_t i = 0; i < chunk.shard; ++i) weights[i] = narrow<bf16>(master[chunk.shard_offset + i]);
    }
    if (Status s = chunks_->weights_up(); !s) return s.error();
  }
  return std::optional<double>(begun->norm);
}

Status GeminiShards::save(FlatAdamWState& state) {
  const int64_t n = layout_.shard_numel;
  const bool whole = state.numel() != n;  // one GPU: the whole model in flat order
  std::vector<float> values[3];
  if (Status s = read_states(values); !s) return s;
  float* targets[3] = {state.weights(), state.state(0), state.state(1)};
  for (int k = 0; k < 3; ++k) {
    if (whole) {
      shard_values_to_flat(layout_.pieces, order_, values[k].data(), targets[k]);
    } else {
      std::copy(values[k].begin(), values[k].end(), targets[k]);
    }
  }
  state.set_steps_taken(steps_);
  return Status::success();
}

Status GeminiShards::restore(FlatAdamWState& state) {
  const int64_t n = layout_.shard_numel;
  const bool whole = state.numel() != n;
  std::vector<float> values[3];
  float* sources[3] = {state.weights(), state.state(0), state.state(1)};
  for (int k = 0; k < 3; ++k) {
    if (whole) {
      values[k].assign(static_cast<size_t>(n), 0.0f);
      flat_values_to_shard(layout_.pieces, order_, sources[k], values[k].data());
    } else {
      values[k].assign(sources[k], sources[k] + n);
    }
  }
  return write_states(values, state.steps_taken());
}

Status GeminiShards::copy_shards(std::vector<bf16>& weights, std::vector<bf16>& gradients) {
  weights.assign(static_cast<size_t>(layout_.shard_numel), bf16{});
  gradients.assign(static_cast<size_t>(layout_.shard_numel), bf16{});
  if (Status s = copies_.wait_for_copies(); !s) return s;
  for (size_t c = 0; c < plan_.chunks.size(); ++c) {
    const GeminiChunk& chunk = plan_.chunks[c];
    const cudaMemcpyKind kind = chunk.on_host ? cudaMemcpyHostToHost : cudaMemcpyDeviceToHost;
    if (Status s = succeeded(cudaMemcpy(weights.data() + chunk.shard_offset, chunks_->weight_shard(c), bytes(chunk.shard, sizeof(bf16)), kind), "copying a weight shard");
        !s) {
      return s;
    }
    if (Status s = succeeded(cudaMemcpy(gradients.data() + chunk.shard_offset, chunks_->gradient_shard(c), bytes(chunk.shard, sizeof(bf16)), kind),
                             "copying a gradient shard");
        !s) {
      return s;
    }
  }
  return Status::success();
}

}  // namespace tessera::engine::cuda
