#include "tessera/engine/device/gemini_device_chunks.h"

#include <algorithm>

#include "tessera/planner/pinned_host_blocks.h"

namespace tessera::engine {
namespace {

constexpr auto kBf16Bytes = static_cast<int64_t>(sizeof(bf16));

// What the caching allocator books for a block of `bytes` (its 512-byte rounding).
int64_t booked(int64_t bytes) { return (bytes + CachingAllocator::kBlockAlign - 1) / CachingAllocator::kBlockAlign * CachingAllocator::kBlockAlign; }

}  // namespace

GeminiDeviceChunks::GeminiDeviceChunks(const GeminiChunkPlan& plan, int rank, int ranks, CachingAllocator& device, PinnedHostAllocator& host,
                                       MemoryLedger& ledger, ChunkCopies& copies, std::vector<bf16*>& parameter_of, std::vector<bf16*>& gradient_of)
    : plan_(plan),
      rank_(rank),
      ranks_(ranks),
      device_(device),
      host_(host),
      ledger_(ledger),
      copies_(copies),
      parameter_of_(parameter_of),
      gradient_of_(gradient_of),
      gathering_(plan.layout.chunk_capacity, plan.chunks_of_layer, plan.kept_gathered_elements),
      chunks_(plan.chunks.size()) {
  const auto pinned = [&host](const planner::PinnedHostBlock& block) { return static_cast<bf16*>(host.allocate(block.bytes, block.category)); };
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const GeminiChunk& p = plan.chunks[c];
    // The planner counts these very blocks on the host (planner/pinned_host_blocks.h).
    const planner::GeminiChunkHostBlocks on_host = planner::gemini_chunk_host_blocks(p.shard, p.on_host, p.optimizer_on_host, kBf16Bytes, kBf16Bytes);
    if (p.on_host) {
      chunks_[c].weights = pinned(on_host.weights);
      chunks_[c].gradients = pinned(on_host.gradients);
      std::fill_n(chunks_[c].weights, p.shard, bf16{});
      std::fill_n(chunks_[c].gradients, p.shard, bf16{});
    } else {
      chunks_[c].weights = new_shard(static_cast<int>(c), MemoryCategory::parameters);
      chunks_[c].gradients = new_shard(static_cast<int>(c), MemoryCategory::gradients);
      run(copies_.zero(chunks_[c].weights, p.shard));
      run(copies_.zero(chunks_[c].gradients, p.shard));
    }
    if (on_host.exchange.bytes > 0) chunks_[c].exchanged = pinned(on_host.exchange);
  }
}

GeminiDeviceChunks::~GeminiDeviceChunks() {
  // Gathered chunks give their slots' bytes back to chunk_buffers before their blocks go.
  copies_.wait_for_copies();  // no copy may still use a pinned shard
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const int chunk = static_cast<int>(c);
    if (chunks_[c].weights != nullptr) {
      free_shard(chunk, chunks_[c].weights);
    } else {
      ledger_.moved(MemoryCategory::parameters, MemoryCategory::chunk_buffers, MemorySpace::device, slot_bytes(chunk));
    }
    if (chunks_[c].gradients != nullptr) {
      free_shard(chunk, chunks_[c].gradients);
    } else {
      ledger_.moved(MemoryCategory::gradients, MemoryCategory::chunk_buffers, MemorySpace::device, slot_bytes(chunk));
    }
    if (chunks_[c].exchanged != nullptr) host_.free(chunks_[c].exchanged);
  }
}

int64_t GeminiDeviceChunks::slot_bytes(int chunk) const {
  return booked(plan_.chunks[static_cast<size_t>(chunk)].shard * static_cast<int64_t>(sizeof(bf16)));
}

bf16* GeminiDeviceChunks::new_shard(int chunk, MemoryCategory category) {
  return static_cast<bf16*>(device_.allocate(plan_.chunks[static_cast<size_t>(chunk)].shard * kBf16Bytes, category));
}

void GeminiDeviceChunks::free_shard(int chunk, bf16* shard) {
  if (plan_.chunks[static_cast<size_t>(chunk)].on_host) {
    host_.free(shard);
  } else {
    device_.free(shard);
  }
}

bool GeminiDeviceChunks::run(const Status& status) {
  if (error_.ok() && !status.ok()) error_ = status;
  return error_.ok();
}

Status GeminiDeviceChunks::zero_gradients() {
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const int64_t n = plan_.chunks[c].shard;
    if (plan_.chunks[c].on_host) {
      if (!run(copies_.wait_for_copies())) break;  // no download may still be writing it
      std::fill_n(chunks_[c].gradients, n, bf16{});
    } else {
      run(copies_.zero(chunks_[c].gradients, n));
    }
  }
  return error_;
}

Status GeminiDeviceChunks::release_all() {
  apply_gemini_moves(gathering_.release_all(), *this);
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (!plan_.chunks[c].exchanges_through_host()) continue;
    run(copies_.download(chunks_[c].exchanged, chunks_[c].gradients, plan_.chunks[c].shard));
    ++moves_;
  }
  return error_;
}

Status GeminiDeviceChunks::weights_up() {
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (!plan_.chunks[c].exchanges_through_host()) continue;
    run(copies_.upload(chunks_[c].weights, chunks_[c].exchanged, plan_.chunks[c].shard));
    ++moves_;
  }
  return error_;
}

DeviceBlock GeminiDeviceChunks::grow(int chunk, bf16*& shard, MemoryCategory category) {
  const GeminiChunk& p = plan_.chunks[static_cast<size_t>(chunk)];
  DeviceBlock whole(device_, p.shard * ranks_ * static_cast<int64_t>(sizeof(bf16)), MemoryCategory::chunk_buffers);
  bf16* slot = whole.as<bf16>() + rank_ * p.shard;
  if (p.on_host) {
    run(copies_.upload(slot, shard, p.shard));
    ++moves_;
  } else {
    run(copies_.copy(slot, shard, p.shard));
    device_.free(shard);  // stream-ordered: the copy above has read it before anything reuses the block
    shard = nullptr;
    ledger_.moved(MemoryCategory::chunk_buffers, category, MemorySpace::device, slot_bytes(chunk));
  }
  return whole;
}

void GeminiDeviceChunks::gather(int chunk) {
  Chunk& c = chunks_[static_cast<size_t>(chunk)];
  c.gathered = grow(chunk, c.weights, MemoryCategory::parameters);
  run(copies_.all_gather(c.gathered.as<bf16>(), plan_.chunks[static_cast<size_t>(chunk)].shard));
}

void GeminiDeviceChunks::open_gradients(int chunk) {
  Chunk& c = chunks_[static_cast<size_t>(chunk)];
  const int64_t shard = plan_.chunks[static_cast<size_t>(chunk)].shard;
  c.gathered_gradients = grow(chunk, c.gradients, MemoryCategory::gradients);
  bf16* whole = c.gathered_gradients.as<bf16>();
  run(copies_.zero(whole, rank_ * shard));
  run(copies_.zero(whole + (rank_ + 1) * shard, (ranks_ - rank_ - 1) * shard));
}

void GeminiDeviceChunks::reduce(int chunk) {
  Chunk& c = chunks_[static_cast<size_t>(chunk)];
  const GeminiChunk& p = plan_.chunks[static_cast<size_t>(chunk)];
  bf16* whole = c.gathered_gradients.as<bf16>();
  if (p.on_host) {
    // In place, then this rank's slot down into the pinned shard; the block waits for that copy.
    bf16* slot = whole + rank_ * p.shard;
    run(copies_.reduce_scatter(whole, slot, p.shard));
    run(copies_.download(c.gradients, slot, p.shard));
    device_.record_stream(whole, copies_.copy_stream());
    ++moves_;
  } else {
    ledger_.moved(MemoryCategory::gradients, MemoryCategory::chunk_buffers, MemorySpace::device, slot_bytes(chunk));
    c.gradients = new_shard(chunk, MemoryCategory::gradients);
    run(copies_.reduce_scatter(whole, c.gradients, p.shard));
  }
  c.gathered_gradients = DeviceBlock();
}

void GeminiDeviceChunks::release(int chunk) {
  Chunk& c = chunks_[static_cast<size_t>(chunk)];
  const GeminiChunk& p = plan_.chunks[static_cast<size_t>(chunk)];
  if (!p.on_host) {  // the weights are unchanged: a host shard needs nothing back
    ledger_.moved(MemoryCategory::parameters, MemoryCategory::chunk_buffers, MemorySpace::device, slot_bytes(chunk));
    c.weights = new_shard(chunk, MemoryCategory::parameters);
    run(copies_.copy(c.weights, c.gathered.as<bf16>() + rank_ * p.shard, p.shard));
  }
  c.gathered = DeviceBlock();
  for (const int parameter : p.parameters) parameter_of_[static_cast<size_t>(parameter)] = nullptr;
}

void GeminiDeviceChunks::bind(int chunk) {
  const Chunk& c = chunks_[static_cast<size_t>(chunk)];
  const GeminiChunk& p = plan_.chunks[static_cast<size_t>(chunk)];
  bf16* gradients = gathering_.holds_gradients(chunk) ? c.gathered_gradients.as<bf16>() : nullptr;
  for (size_t j = 0; j < p.parameters.size(); ++j) {
    const auto parameter = static_cast<size_t>(p.parameters[j]);
    parameter_of_[parameter] = c.gathered.as<bf16>() + p.offsets[j];
    gradient_of_[parameter] = gradients != nullptr ? gradients + p.offsets[j] : nullptr;
  }
}

}  // namespace tessera::engine
