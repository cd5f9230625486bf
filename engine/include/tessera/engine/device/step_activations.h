// The GPU step's activation and logits buffers (model/activation_buffers.h,
// from the `tessera_gpu` table), carved from the caching allocator and found by name: a
// block's term is the block's own buffer where the recompute mode keeps it,
// else the working set's that every block shares. Host code, so that the CPU
// tests allocate the step's buffers from a fake device and read the ledger
// (tests/engine/step_activations_test.cpp); the GPU step
// (cuda/gpt_training.h) allocates them from the device.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/engine/device/caching_allocator.h"
#include "tessera/engine/device/device_block.h"
#include "tessera/engine/model/activation_buffers.h"
#include "tessera/planner/pipeline_stages.h"

namespace tessera::engine {

class StepActivations {
 public:
  StepActivations() = default;
  // The whole model: every buffer now, one pass for good.
  StepActivations(CachingAllocator& allocator, ActivationBuffers layout, int64_t num_layers);
  // A pipeline stage holding the blocks of its model `chunks` (of
  // `num_layers`; one chunk but under the interleaved schedule), the embedding
  // if `first` (in chunk 0), the head if `last` (in its last chunk): the
  // working set and scratch now, each pass's own from begin_pass.
  StepActivations(CachingAllocator& allocator, ActivationBuffers layout, int64_t num_layers, std::vector<planner::StageLayers> chunks, bool first,
                  bool last);

  // Allocates the pass of chunk `chunk` over micro-batch `micro` (what that
  // chunk's blocks keep, and the embedding's or head's terms where it holds
  // them) and makes it the current one; use_pass makes it current again; end_pass gives it back.
  void begin_pass(int64_t chunk, int64_t micro);
  void use_pass(int64_t chunk, int64_t micro);
  void end_pass(int64_t chunk, int64_t micro);
  size_t passes_in_flight() const { return passes_.size(); }

  // Block `layer`'s buffer of the term `name`, its own or the working set's.
  void* block(int layer, std::string_view name) const;
  // A buffer outside the blocks: the tokens, the final norm's and head's
  // inputs, the targets, the logits and losses (the current pass's), backward's scratch.
  void* outside(std::string_view name) const;
  // Whether block `layer`'s term `name` is kept (not recomputed).
  bool keeps(int layer, std::string_view name) const;
  const ActivationBuffers& layout() const { return layout_; }

 private:
  using Named = std::vector<std::pair<std::string, DeviceBlock>>;
  struct Pass {
    std::vector<Named> blocks;  // by layer, empty outside the stage
    Named outside;              // the tokens, the last stage's terms, the logits
  };
  static void* find(const Named& named, std::string_view name);
  const Pass& current() const;
  CachingAllocator* allocator_ = nullptr;
  ActivationBuffers layout_;
  int64_t num_layers_ = 0;
  std::vector<planner::StageLayers> chunks_;
  bool first_ = true, last_ = true;
  using PassKey = std::pair<int64_t, int64_t>;  // chunk, micro-batch
  std::map<PassKey, Pass> passes_;
  PassKey current_;
  Named working_, scratch_;
};

}  // namespace tessera::engine
