// The GPU step's activation buffers; see device/step_activations.h.
#include "tessera/engine/device/step_activations.h"

#include <stdexcept>

namespace tessera::engine {

StepActivations::StepActivations(CachingAllocator& allocator, ActivationBuffers layout, int64_t num_layers) : layout_(std::move(layout)) {
  const auto allocate = [&allocator](const std::vector<ActivationBuffer>& buffers, Named& into) {
    for (const ActivationBuffer& b : buffers) {
      if (b.bytes > 0) into.emplace_back(std::string(b.name), DeviceBlock(allocator, b.bytes, b.category));  // none for an absent term (sequence_gathered)
    }
  };
  blocks_.resize(static_cast<size_t>(num_layers));
  for (Named& block : blocks_) allocate(layout_.kept, block);
  allocate(layout_.working, working_);
  for (const auto* buffers : {&layout_.first_stage, &layout_.last_stage, &layout_.logits, &layout_.scratch}) allocate(*buffers, outside_);
}

void* StepActivations::find(const Named& named, std::string_view name) {
  for (const auto& [key, block] : named) {
    if (key == name) return block.as<void>();
  }
  return nullptr;
}

bool StepActivations::keeps(int layer, std::string_view name) const { return find(blocks_.at(static_cast<size_t>(layer)), name) != nullptr; }

void* StepActivations::block(int layer, std::string_view name) const {
  void* kept = find(blocks_.at(static_cast<size_t>(layer)), name);
  void* found = kept != nullptr ? kept : find(working_, name);
  if (found == nullptr) throw std::out_of_range("no activation buffer named " + std::string(name));
  return found;
}

void* StepActivations::outside(std::string_view name) const {
  void* found = find(outside_, name);
  if (found == nullptr) throw std::out_of_range("no activation buffer named " + std::string(name));
  return found;
}

}  // namespace tessera::engine
