#include "tessera/planner/gemini_gathering.h"

#include <algorithm>


namespace tessera::planner {

GeminiGathering::GeminiGathering(const std::vector<int64_t>& chunk_capacity, const std::vector<std::vector<int>>& chunks_of_layer,
                                 double kept_gathered_elements)
    : chunk_capacity_(&chunk_capacity),
      chunks_of_layer_(&chunks_of_layer),
      kept_gathered_elements_(kept_gathered_elements),
      holds_gradients_(chunk_capacity.size(), false) {}

void GeminiGathering::release(int chunk) {
  (holds_gradients_[static_cast<size_t>(chunk)] ? moves_.reduced : moves_.released).push_back(chunk);
  holds_gradients_[static_cast<size_t>(chunk)] = false;
  gathered_.erase(std::find(gathered_.begin(), gathered_.end(), chunk));
}

void GeminiGathering::clear_moves() {
  moves_.reduced.clear();
  moves_.released.clear();
  moves_.gathered.clear();
  moves_.gradients_opened.clear();
}

const GeminiGathering::Moves& GeminiGathering::use_layer(int layer, bool backward) {
  const std::vector<int>& needed = (*chunks_of_layer_)[static_cast<size_t>(layer + 1)];
  const auto is_needed = [&](int chunk) { return std::find(needed.begin(), needed.end(), chunk) != needed.end(); };
  const auto capacity = [&](int chunk) { return static_cast<double>((*chunk_capacity_)[static_cast<size_t>(chunk)]); };
  clear_moves();
  // Chunks whose gradients are complete: reduced and released.
  before_.assign(gathered_.begin(), gathered_.end());
  movable_.clear();
  for (const int chunk : before_) {
    if (is_needed(chunk)) continue;
    if (holds_gradients_[static_cast<size_t>(chunk)]) {
      release(chunk);
    } else {
      movable_.push_back(chunk);
    }
  }
  // The others: released from the front (packing order) while those left are above the budget.
  std::sort(movable_.begin(), movable_.end());
  double left = 0;
  for (const int chunk : movable_) left += capacity(chunk);
  for (const int chunk : movable_) {
    if (left <= kept_gathered_elements_) break;
    release(chunk);
    left -= capacity(chunk);
  }
  for (const int chunk : needed) {
    if (std::find(gathered_.begin(), gathered_.end(), chunk) == gathered_.end()) {
      gathered_.push_back(chunk);
      moves_.gathered.push_back(chunk);
    }
    if (backward && !holds_gradients_[static_cast<size_t>(chunk)]) {
      holds_gradients_[static_cast<size_t>(chunk)] = true;
      moves_.gradients_opened.push_back(chunk);
    }
  }
  return moves_;
}

const GeminiGathering::Moves& GeminiGathering::release_all() {
  clear_moves();
  before_.assign(gathered_.begin(), gathered_.end());
  for (const int chunk : before_) release(chunk);
  return moves_;
}

namespace {

// What a gathered chunk's buffer adds to its shard: on the device the shard
// grows into the whole chunk; a shard on the host leaves a whole new buffer.
int64_t buffer_elements(const GeminiChunkSet& chunks, int64_t dp, int chunk) {
  const int64_t capacity = chunks.chunk_capacity[static_cast<size_t>(chunk)];
  return chunks.parameter_on_host[static_cast<size_t>(chunk)] ? capacity : capacity - capacity / dp;
}

struct PassTraffic {
  int64_t forward_gathered = 0, backward_gathered = 0, reduced = 0;
  int64_t up_bytes = 0, down_bytes = 0;  // host chunks' shards over PCIe
};

}  // namespace

GeminiStepReplay replay_gemini_step(const GeminiChunkSet& chunks, int64_t dp, int64_t parameter_bytes, int64_t gradient_bytes,
                                    int64_t micro_batches) {
  GeminiGathering gathering(chunks.chunk_capacity, chunks.chunks_of_layer, chunks.kept_gathered_elements);
  GeminiStepReplay out;
  const auto capacity = [&](int chunk) { return chunks.chunk_capacity[static_cast<size_t>(chunk)]; };
  const auto host_shard = [&](int chunk) { return chunks.parameter_on_host[static_cast<size_t>(chunk)] ? capacity(chunk) / dp : 0; };
  const auto account = [&](const GeminiGathering::Moves& moves, int64_t& gathered, int64_t& reduced, PassTraffic& pcie) {
    for (const int chunk : moves.reduced) {
      reduced += capacity(chunk);
      pcie.down_bytes += host_shard(chunk) * gradient_bytes;
    }
    for (const int chunk : moves.gathered) {
      gathered += capacity(chunk);
      pcie.up_bytes += host_shard(chunk) * parameter_bytes;
    }
    for (const int chunk : moves.gradients_opened) pcie.up_bytes += host_shard(chunk) * gradient_bytes;
    int64_t bytes = 0;
    for (const int chunk : gathering.gathered()) {
      const int64_t elements = buffer_elements(chunks, dp, chunk);
      bytes += elements * parameter_bytes + (gathering.holds_gradients(chunk) ? elements * gradient_bytes : 0);
    }
    out.peak_buffer_bytes = std::max(out.peak_buffer_bytes, bytes);
  };
  // The second micro-batch starts from what the first left gathered (the
  // embedding's chunks) and every later one from the same, so two replays
  // give the step: the first, and k - 1 times the second.
  const int head = static_cast<int>(chunks.chunks_of_layer.size()) - 2;  // layer slots run from the embedding to the head
  std::vector<PassTraffic> passes;
  for (int64_t micro = 0; micro < std::min<int64_t>(micro_batches, 2); ++micro) {
    PassTraffic t;
    for (int layer = kEmbeddingLayer; layer <= head; ++layer) account(gathering.use_layer(layer, false), t.forward_gathered, t.reduced, t);
    for (int layer = head; layer >= kEmbeddingLayer; --layer) account(gathering.use_layer(layer, true), t.backward_gathered, t.reduced, t);
    passes.push_back(t);
  }
  int64_t unused = 0;
  PassTraffic last;
  account(gathering.release_all(), unused, out.reduced_elements, last);
  out.host_up_bytes = last.up_bytes;
  out.host_down_bytes = last.down_bytes;
  const PassTraffic& steady = passes.back();
  const int64_t repeats = micro_batches - static_cast<int64_t>(passes.size());
  for (const PassTraffic& t : passes) {
    out.gathered_elements += t.forward_gathered + t.backward_gathered;
    out.reduced_elements += t.reduced;
    out.host_up_bytes += t.up_bytes;
    out.host_down_bytes += t.down_bytes;
  }
  out.host_up_bytes += repeats * steady.up_bytes;
  out.host_down_bytes += repeats * steady.down_bytes;
  out.gathered_elements += repeats * (steady.forward_gathered + steady.backward_gathered);
  out.reduced_elements += repeats * steady.reduced;
  out.forward_gathered_elements = steady.forward_gathered;
  out.backward_gathered_elements = steady.backward_gathered;
  return out;
}

std::vector<bool> gathered_after_forward(const GeminiChunkSet& chunks) {
  GeminiGathering gathering(chunks.chunk_capacity, chunks.chunks_of_layer, chunks.kept_gathered_elements);
  const int head = static_cast<int>(chunks.chunks_of_layer.size()) - 2;
  for (int layer = kEmbeddingLayer; layer <= head; ++layer) gathering.use_layer(layer, false);
  std::vector<bool> out(chunks.chunk_capacity.size(), false);
  for (const int chunk : gathering.gathered()) out[static_cast<size_t>(chunk)] = true;
  return out;
}

}  // namespace tessera::planner
