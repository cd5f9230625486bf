// The models a runtime's own model code builds. Megatron-LM and torchtitan build
// their own transformer classes, not a config.json's. A model Megatron-Core
// cannot build is not a --runtime megatron plan: estimate and plan refuse it
// (validate_runtime.cpp). --runtime torchtitan counts FSDP2 as torchtitan
// applies it, which holds for any model, so only --to torchtitan refuses a
// model its llama3 does not build. ColossalAI and DeepSpeed run the Hugging Face model itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tessera/planner/model_config.h"

namespace tessera::planner {

// What of the model Megatron-Core's GPT model (megatron/core/models/gpt) does
// not build, as "a LayerNorm after the embedding (...)", or nothing: pre-norm
// blocks of LayerNorm or RMSNorm, learned or rotary positions, a GELU or SwiGLU
// MLP, biases on every linear layer or none (with --add-qkv-bias, the q/k/v
// ones only), a final norm, tied or untied output weights.
std::optional<std::string> megatron_cannot_build(const ModelConfig& config, int64_t seq_len);

// What of the model torchtitan's llama3 model (torchtitan/models/llama3) does
// not build, or nothing: Llama's block (is_torchtitan_llama_block) with RMSNorm,
// SiLU, no biases, an untied head and RoPE over the whole head.
std::optional<std::string> torchtitan_cannot_build(const ModelConfig& config);

}  // namespace tessera::planner
