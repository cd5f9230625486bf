// The order torch's model.parameters() yields a Hugging Face model's
// parameters: the order their modules register them in __init__, which is not
// always the order they run in (LlamaDecoderLayer registers its norms after
// its MLP; OPTDecoder registers the final norm before the layers). ColossalAI's
// Gemini packs chunks in this order when it has no memory statistics
// (GeminiDDP builds its OrderedParamGenerator from module.parameters(),
// colossalai/zero/gemini/gemini_ddp.py at v0.5.0, d322ff8c), so the chunk
// search and packing (chunks.h) follow it.
#pragma once

#include <vector>

#include "tessera/planner/model_config.h"
#include "tessera/planner/tensor_inventory.h"

namespace tessera::planner {

// Indices into inventory.tensors of the unique (untied) tensors, in
// registration order. Families whose registration order is their execution
// order (GPT-2, BLOOM, GPT-NeoX) keep the inventory's order.
std::vector<int> module_parameter_order(const ModelConfig& config, const TensorInventory& inventory);

}  // namespace tessera::planner
