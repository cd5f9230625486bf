// The memory categories, named the same everywhere: planner, engine ledger,
// reports and GUI (see DESIGN.md, "Memory categories"). The engine's ledger
// includes this header, so a category cannot be renamed on one side only.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

enum class MemoryCategory {
  parameters,        // weights in the compute dtype (16-bit under mixed precision)
  master_weights,    // fp32 copies of 16-bit weights kept by the optimizer
  gradients,         // weight gradients
  optimizer_states,  // Adam moments / SGD momentum
  activations,       // tensors saved for backward and their recompute working set
  logits,            // output-layer logits and the loss buffers
  comm_buffers,      // gradient buckets, reduce buffers, pipeline send/recv buffers
  chunk_buffers,     // gathered parameters of ZeRO-3 / FSDP / Gemini
  workspace,         // cuBLAS and NCCL workspaces
  runtime,           // CUDA context and the allocator's fragmentation reserve
};

inline constexpr int kNumMemoryCategories = 10;

inline constexpr std::array<MemoryCategory, kNumMemoryCategories> kAllMemoryCategories = {
    MemoryCategory::parameters,   MemoryCategory::master_weights, MemoryCategory::gradients,
    MemoryCategory::optimizer_states, MemoryCategory::activations, MemoryCategory::logits,
    MemoryCategory::comm_buffers, MemoryCategory::chunk_buffers,  MemoryCategory::workspace,
    MemoryCategory::runtime,
};

constexpr std::string_view to_string(MemoryCategory category) {
  constexpr std::array<std::string_view, kNumMemoryCategories> names = {
      "parameters", "master_weights", "gradients", "optimizer_states", "activations",
      "logits", "comm_buffers", "chunk_buffers", "workspace", "runtime"};
  return names[static_cast<size_t>(category)];
}

inline std::optional<MemoryCategory> parse_memory_category(std::string_view name) {
  for (MemoryCategory category : kAllMemoryCategories) {
    if (to_string(category) == name) return category;
  }
  return std::nullopt;
}

// One colour per category for every chart (HTML report, GUI); a colour-blind-safe
// palette (Okabe & Ito 2008, extended with two greys).
constexpr std::string_view category_color(MemoryCategory category) {
  constexpr std::array<std::string_view, kNumMemoryCategories> colors = {
      "#0072B2", "#56B4E9", "#E69F00", "#D55E00", "#009E73",
      "#F0E442", "#CC79A7", "#882255", "#999999", "#555555"};
  return colors[static_cast<size_t>(category)];
}

enum class MemorySpace { device, host };

struct SpaceBytes {
  int64_t device = 0;
  int64_t host = 0;
};

// Bytes per category on the device and on the host.
class MemoryBreakdown {
 public:
  void add(MemoryCategory category, MemorySpace space, int64_t bytes) {
    SpaceBytes& slot = bytes_[static_cast<size_t>(category)];
    (space == MemorySpace::device ? slot.device : slot.host) += bytes;
  }
  const SpaceBytes& operator[](MemoryCategory category) const { return bytes_[static_cast<size_t>(category)]; }

  int64_t device_total() const {
    int64_t total = 0;
    for (const SpaceBytes& b : bytes_) total += b.device;
    return total;
  }
  int64_t host_total() const {
    int64_t total = 0;
    for (const SpaceBytes& b : bytes_) total += b.host;
    return total;
  }
  bool operator==(const MemoryBreakdown& other) const {
    for (size_t i = 0; i < bytes_.size(); ++i) {
      if (bytes_[i].device != other.bytes_[i].device || bytes_[i].host != other.bytes_[i].host) return false;
    }
    return true;
  }

 private:
  std::array<SpaceBytes, kNumMemoryCategories> bytes_{};
};

}  // namespace tessera
