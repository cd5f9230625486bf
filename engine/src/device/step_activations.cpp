// The GPU step's activation buffers; see device/step_activations.h.
#include "tessera/engine/device/step_activations.h"

#include <stdexcept>

namespace tessera::engine {

namespace {

using Named = std::vector<std::pair<std::string, DeviceBlock>>;

void allocate(CachingAllocator& allocator, const std::vector<ActivationBuffer>& buffers, Named& into) {
  for (const ActivationBuffer& b : buffers) {
    if (b.bytes > 0) into.emplace_back(std::string(b.name), DeviceBlock(allocator, b.bytes, b.category));  // none for an absent term (sequence_gathered)
  }
}

}  // namespace

StepActivations::StepActivations(CachingAllocator& allocator, ActivationBuffers layout, int64_t num_layers)
    : StepActivations(allocator, std::move(layout), num_layers, {planner::StageLayers{0, static_cast<int>(num_layers)}}, true, true) {
  begin_pass(0, 0);
}

// The planner books the working set on a stage with blocks, the scratch on
// every stage, and each chunk's pass (memory_model.cpp, fill_stage_activations).
StepActivations::StepActivations(CachingAllocator& allocator, ActivationBuffers layout, int64_t num_layers, std::vector<planner::StageLayers> chunks,
                                 bool first, bool last)
    : allocator_(&allocator), layout_(std::move(layout)), num_layers_(num_layers), chunks_(std::move(chunks)), first_(first), last_(last) {
  int blocks = 0;
  for (const planner::StageLayers& chunk : chunks_) blocks += chunk.num_layers;
  if (blocks > 0) allocate(allocator, layout_.working, working_);
  allocate(allocator, layout_.scratch, scratch_);
}

void StepActivations::begin_pass(int64_t chunk, int64_t micro) {
  const planner::StageLayers& layers = chunks_.at(static_cast<size_t>(chunk));
  Pass pass;
  pass.blocks.resize(static_cast<size_t>(num_layers_));
  for (int i = 0; i < layers.num_layers; ++i) allocate(*allocator_, layout_.kept_by(i), pass.blocks[static_cast<size_t>(layers.first_layer + i)]);
  if (first_ && chunk == 0) allocate(*allocator_, layout_.first_stage, pass.outside);
  if (last_ && chunk + 1 == static_cast<int64_t>(chunks_.size())) {
    allocate(*allocator_, layout_.last_stage, pass.outside);
    allocate(*allocator_, layout_.logits, pass.outside);
  }
  current_ = {chunk, micro};
  passes_.insert_or_assign(current_, std::move(pass));
}

void StepActivations::use_pass(int64_t chunk, int64_t micro) {
  if (!passes_.contains({chunk, micro})) {
    throw std::out_of_range("no pass of chunk " + std::to_string(chunk) + " over micro-batch " + std::to_string(micro) + " in flight");
  }
  current_ = {chunk, micro};
}

void StepActivations::end_pass(int64_t chunk, int64_t micro) { passes_.erase({chunk, micro}); }

const StepActivations::Pass& StepActivations::current() const {
  const auto it = passes_.find(current_);
  if (it == passes_.end()) throw std::out_of_range("no pass in flight");
  return it->second;
}

void* StepActivations::find(const Named& named, std::string_view name) {
  for (const auto& [key, block] : named) {
    if (key == name) return block.as<void>();
  }
  return nullptr;
}

bool StepActivations::keeps(int layer, std::string_view name) const { return find(current().blocks.at(static_cast<size_t>(layer)), name) != nullptr; }

void* StepActivations::block(int layer, std::string_view name) const {
  void* kept = find(current().blocks.at(static_cast<size_t>(layer)), name);
  void* found = kept != nullptr ? kept : find(working_, name);
  if (found == nullptr) throw std::out_of_range("no activation buffer named " + std::string(name));
  return found;
}

void* StepActivations::outside(std::string_view name) const {
  void* own = find(current().outside, name);
  void* found = own != nullptr ? own : find(scratch_, name);
  if (found == nullptr) throw std::out_of_range("no activation buffer named " + std::string(name));
  return found;
}

}  // namespace tessera::engine
