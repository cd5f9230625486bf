// The transformers releases the hf profiles model, each rule read from that
// release's source (the PyPI wheels of huggingface/transformers, tag vX.Y.Z):
//
// The logits (what the training loop holds at the loss's peak):
//  - models/llama/modeling_llama.py, LlamaForCausalLM.forward: `logits =
//    logits.float()` before the loss at v4.31.0, v4.32.1, v4.33.3, v4.35.0,
//    v4.36.0 and v4.38.0; at v4.45.0 `self.lm_head(...).float()` with a
//    "TODO: remove the float() operation in v4.46"; from v4.46.0 the model
//    returns the head's own dtype and the upcast is inside the loss
//    (loss/loss_utils.py ForCausalLMLoss, `logits = logits.float()`, a copy
//    freed with the loss's forward), the same at v5.0.0 and v5.17.0.
//  - models/gpt2/modeling_gpt2.py, GPT2LMHeadModel.forward: never upcasts;
//    through v4.46.0 its CrossEntropyLoss runs on the 16-bit lm_logits (so
//    log_softmax and its gradients are 16-bit); at v5.0.0 and v5.17.0 it
//    calls self.loss_function (ForCausalLMLoss, fp32).
//  Both shift the logits for the loss through v4.33.3 (`logits[..., :-1,
//  :].contiguous()`, a copy); v5.0.0's and v5.17.0's ForCausalLMLoss pads and
//  shifts the labels instead.
//  Under torch.autocast (hf_autocast) the loss is fp32 either way (log_softmax
//  and nll_loss are on autocast's fp32 list) and the Hugging Face Trainer keeps
//  only the loss, so these rules change nothing there.
//
// The [b, 1, s, s] attention mask:
//  - v4.31.0 to v4.33.3, LlamaModel.forward: a 2D mask of ones is made when
//    none is passed, and _prepare_decoder_attention_mask (_expand_mask plus
//    _make_causal_mask) materialises a [b, 1, s, s] mask in inputs_embeds'
//    dtype, whatever the attention; torch.utils.checkpoint.checkpoint(layer,
//    hidden_states, attention_mask, position_ids) saves it as an input of
//    every layer (the same tensor). GPT2Attention takes its causal mask from
//    its `bias` buffer (a view, no new tensor).
//  - v5.0.0 and v5.17.0, masking_utils.py create_causal_mask: SDPA without
//    padding returns None (_ignore_causal_mask_sdpa; is_causal instead);
//    eager_mask turns sdpa_mask's expanded boolean mask into a [b, 1, s, s]
//    tensor in inputs_embeds' dtype (torch.where), for Llama and GPT-2 alike;
//    modeling_layers.py GradientCheckpointingLayer checkpoints
//    partial(layer, **kwargs), whose kwargs (Llama's attention_mask) or
//    arguments (GPT-2's causal_mask) hold it until the layer's backward.
//  - In between the mask depends on whether the loop passes a 2D mask
//    (v4.35.0's to_causal_4d expands an [s, s] one; v4.46.0's
//    _prepare_4d_causal_attention_mask_with_cache_position clones it to b
//    copies only when one is passed) and v4.38.0 sizes it by
//    max_position_embeddings: those releases are not modelled.
//
// Mistral and Qwen2 are modelled at v5.0-v5.17 only, where their CausalLM
// forward calls the same loss and their decoder the same create_causal_mask
// (a sliding-window config's mask, create_sliding_window_causal_mask, is not modelled).
#include "tessera/planner/transformers_version.h"

#include <charconv>

namespace tessera::planner {
namespace {

struct Release {
  TransformersVersion first, last;
};

// The decoder-mask releases, as ColossalAI's 2023 examples ran them (Llama 2 needs v4.31).
constexpr Release kDecoderMaskReleases{{4, 31}, {4, 33}};
// create_causal_mask's releases, up to the one the profiles were measured on.
constexpr Release kMaskingUtilsReleases{{5, 0}, kMeasuredTransformers};

bool within(TransformersVersion v, Release r) { return r.first <= v && v <= r.last; }

bool llama_layout(ModelFamily f) { return f == ModelFamily::llama || f == ModelFamily::mistral || f == ModelFamily::qwen2; }

std::string range(Release r) { return to_string(r.first) + "-" + to_string(r.last); }

}  // namespace

std::optional<TransformersVersion> parse_transformers_version(std::string_view text) {
  // Reads the number at `p` into `out` and moves `p` past it; false where there is none.
  const char* p = text.data();
  const char* const end = text.data() + text.size();
  const auto number = [&](int& out) {
    const auto read = std::from_chars(p, end, out);
    p = read.ptr;
    return read.ec == std::errc();
  };
  TransformersVersion v;
  int patch = 0;
  if (!number(v.major) || p == end || *p++ != '.' || !number(v.minor)) return std::nullopt;
  if (p != end && (*p++ != '.' || !number(patch) || p != end)) return std::nullopt;
  return v;
}

std::string to_string(TransformersVersion v) { return std::to_string(v.major) + "." + std::to_string(v.minor); }

std::vector<TransformersVersion> modelled_transformers_releases() {
  std::vector<TransformersVersion> releases;
  for (Release r : {kDecoderMaskReleases, kMaskingUtilsReleases}) {
    for (int minor = r.first.minor; minor <= r.last.minor; ++minor) releases.push_back({r.first.major, minor});
  }
  return releases;
}

std::optional<std::string> unsupported_transformers_version(TransformersVersion v, ModelFamily family) {
  const bool decoder_mask_family = family == ModelFamily::llama || family == ModelFamily::gpt2;
  if (within(v, kMaskingUtilsReleases) || (decoder_mask_family && within(v, kDecoderMaskReleases))) return std::nullopt;
  const std::string supported = decoder_mask_family ? range(kDecoderMaskReleases) + " or " + range(kMaskingUtilsReleases) : range(kMaskingUtilsReleases);
  return "--transformers-version " + to_string(v) + ": the hf profiles model " + std::string(to_string(family)) + " on transformers " + supported +
         " (read from its source); use one of those";
}

TransformersBehaviour transformers_behaviour(TransformersVersion v, ModelFamily family, bool eager_attention) {
  if (within(v, kDecoderMaskReleases)) {
    const bool llama = llama_layout(family);
    return {.returns_fp32_logits = llama, .loss_in_fp32 = llama, .shifts_logits = true, .builds_causal_mask = llama};
  }
  return {.returns_fp32_logits = false, .loss_in_fp32 = true, .shifts_logits = false, .builds_causal_mask = eager_attention};
}

}  // namespace tessera::planner
