// The `hf` and `hf_eager` activation profiles (activations.h), for the
// families whose Hugging Face modules were measured.
#pragma once

#include "tessera/planner/activations.h"

namespace tessera::planner {

// Whether the Hugging Face profiles describe this family: GPT-2 and the
// Llama layout (Llama, Mistral, Qwen2), the modules measured.
bool hf_profile_measured(ModelFamily family);

// How the model runs: 16-bit weights with SDPA (transformers' default) or
// attn_implementation="eager", or fp32 weights under torch.autocast with SDPA.
enum class HfRun { sdpa, eager_attention, autocast };

// `dt`: the 16-bit type's bytes (bf16/fp16, as measured; 4 counts the same
// tensors in fp32). `transformers`: the release that runs the model; the
// blocks are as measured on 5.17, the logits, the loss and the attention
// mask as that release keeps them (transformers_version.h).
ActivationTable hf_table(const ModelConfig& c, int64_t dt, HfRun run, TransformersVersion transformers);

}  // namespace tessera::planner
