// The `hf` and `hf_eager` activation profiles (activations.h), for the
// families whose Hugging Face modules were measured.
#pragma once

#include "tessera/planner/activations.h"

namespace tessera::planner {

// Whether the Hugging Face profiles describe this family: GPT-2 and the
// Llama layout (Llama, Mistral, Qwen2), the modules measured.
bool hf_profile_measured(ModelFamily family);

// `dt`: the weights' bytes (2 for bf16/fp16 weights, as measured; 4 counts
// the same tensors in fp32). `eager_attention`: attn_implementation="eager".
ActivationTable hf_table(const ModelConfig& c, int64_t dt, bool eager_attention);

}  // namespace tessera::planner
