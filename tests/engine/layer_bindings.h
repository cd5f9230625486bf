// What the tests of the GPU step's sharded memories (device/gemini_device_chunks.h,
// device/fsdp_device_units.h) check before each layer runs: the model's
// weights, small integers exact in bf16, and each parameter the layer uses
// bound to them, its gradient too in backward, where each rank adds rank + 1
// into every element (so that the reduced sums are known).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tessera/engine/half.h"
#include "tessera/planner/sharding.h"

namespace tessera::engine::testing {

// The model's weight at flat element i: a small integer, exact in bf16, never 0.
inline float weight_at(int64_t i) { return static_cast<float>(i % 29 + 1); }

// `uses[layer + 1]`: the flat parameters `layer` uses (planner::parameters_by_layer).
inline void check_layer_bound(const std::vector<std::vector<int>>& uses, const std::vector<planner::FlatParameter>& order, const std::vector<bf16*>& parameter_of,
                              const std::vector<bf16*>& gradient_of, int layer, bool backward, int rank) {
  for (const int p : uses[static_cast<size_t>(layer + 1)]) {
    const planner::FlatParameter& f = order[static_cast<size_t>(p)];
    const bf16* w = parameter_of[static_cast<size_t>(p)];
    if (w == nullptr) {
      ADD_FAILURE() << "parameter " << p << " not bound at layer " << layer;
      continue;
    }
    int64_t wrong = 0;
    for (int64_t k = 0; k < f.numel; ++k) wrong += widen(w[k]) != weight_at(f.offset + k) ? 1 : 0;
    EXPECT_EQ(wrong, 0) << "weights of parameter " << p << " at layer " << layer;
    if (!backward) continue;
    bf16* g = gradient_of[static_cast<size_t>(p)];
    if (g == nullptr) {
      ADD_FAILURE() << "no gradient of " << p << " at layer " << layer;
      continue;
    }
    for (int64_t k = 0; k < f.numel; ++k) g[k] = narrow<bf16>(widen(g[k]) + static_cast<float>(rank + 1));
  }
}

}  // namespace tessera::engine::testing
