// Which Hugging Face transformers release runs the model under the hf
// profiles (--transformers-version), and what that release's modules keep
// that the measured tables (activations_hf.cpp, measured on 5.17.0) depend
// on. Read from transformers' own source at each release named in
// transformers_version.cpp; other releases are refused.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/planner/model_config.h"

namespace tessera::planner {

struct TransformersVersion {
  int major = 5;
  int minor = 17;
  auto operator<=>(const TransformersVersion&) const = default;
};

// The release the hf profiles were measured on (data/measurements/
// 2026-11-24-nvidia-h100-80gb-hbm3-saved-tensors.json): the default.
inline constexpr TransformersVersion kMeasuredTransformers{5, 17};

// "X.Y" or "X.Y.Z" (the patch level is accepted and dropped: the rules are per minor release).
std::optional<TransformersVersion> parse_transformers_version(std::string_view text);
std::string to_string(TransformersVersion v);

// What a release's CausalLM forward, loss and decoder model keep, for one family.
struct TransformersBehaviour {
  // The model returns fp32 logits (LlamaForCausalLM.forward's `logits.float()`),
  // which a training loop that keeps the output holds through backward.
  bool returns_fp32_logits = false;
  // The cross-entropy runs on fp32 logits (false: on the 16-bit ones, as
  // GPT2LMHeadModel's CrossEntropyLoss did before the loss moved to ForCausalLMLoss).
  bool loss_in_fp32 = true;
  // The loss shifts the logits, `logits[..., :-1, :].contiguous()` (a copy),
  // where later releases shift the labels instead.
  bool shifts_logits = false;
  // The decoder builds a [b, 1, s, s] additive attention mask in the
  // embeddings' dtype and hands it to every layer; full recompute keeps it
  // (one tensor per micro-batch, shared by the layers).
  bool builds_causal_mask = false;
};

// Every minor release some family is modelled on, oldest first (the GUI's choices).
std::vector<TransformersVersion> modelled_transformers_releases();

// Empty when `v` is a release whose source was read for `family`; else the
// one-line reason, naming the supported releases.
std::optional<std::string> unsupported_transformers_version(TransformersVersion v, ModelFamily family);

// `eager_attention`: attn_implementation="eager" (hf_eager); otherwise SDPA,
// or before the family had SDPA a fused attention patched in (ColossalAI's
// Llama 2 example replaces LlamaAttention.forward with xformers').
TransformersBehaviour transformers_behaviour(TransformersVersion v, ModelFamily family, bool eager_attention);

}  // namespace tessera::planner
