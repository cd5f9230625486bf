// Whether the engine computes the model a config.json describes.
//
// A Hugging Face config.json carries fields that change the arithmetic without
// changing any tensor's shape (the activation, RoPE scaling, a sliding attention
// window, GPT-2's attention scale). A run that ignored one would train another
// model than the checkpoint's config.json says, and transformers would load it
// without a warning, so the engine refuses each value it does not compute.
#pragma once

#include <cstdint>

#include "tessera/planner/model_config.h"
#include "tessera/planner/status.h"

namespace tessera::engine {

// Success, or an error of one line naming the field (or --seq) and the fix.
Status check_engine_computes(const planner::ModelConfig& config, int64_t seq_len);

}  // namespace tessera::engine
