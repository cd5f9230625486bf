// The GPU step's activation and logits buffers (model/activation_buffers.h,
// from the `tessera_gpu` table), carved from the caching allocator and found by name: a
// block's term is the block's own buffer where the recompute mode keeps it,
// else the working set's that every block shares. Host code, so that the CPU
// tests allocate the step's buffers from a fake device and read the ledger
// (tests/engine/step_activations_test.cpp); the GPU step
// (cuda/gpt_training.h) allocates them from the device.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/engine/device/caching_allocator.h"
#include "tessera/engine/device/device_block.h"
#include "tessera/engine/model/activation_buffers.h"

namespace tessera::engine {

class StepActivations {
 public:
  StepActivations() = default;
  StepActivations(CachingAllocator& allocator, ActivationBuffers layout, int64_t num_layers);

  // Block `layer`'s buffer of the term `name`, its own or the working set's.
  void* block(int layer, std::string_view name) const;
  // A buffer outside the blocks: the tokens, the final norm's and head's
  // inputs, the targets, the logits and losses, backward's scratch.
  void* outside(std::string_view name) const;
  // Whether block `layer`'s term `name` is kept (not recomputed).
  bool keeps(int layer, std::string_view name) const;
  const ActivationBuffers& layout() const { return layout_; }

 private:
  using Named = std::vector<std::pair<std::string, DeviceBlock>>;
  static void* find(const Named& named, std::string_view name);
  ActivationBuffers layout_;
  std::vector<Named> blocks_;  // by layer
  Named working_, outside_;
};

}  // namespace tessera::engine
