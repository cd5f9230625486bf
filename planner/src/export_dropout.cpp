// Dropout the exports must reconcile with the plan's activation estimate.
//
// The activation profiles differ on dropout (activations.h): `megatron` keeps a
// one-byte mask per dropped element where the config has dropout and `flash`
// does the same outside attention (a fused kernel redraws its attention mask
// from a saved seed), so both count the config's dropout as it trains. `hf` and
// `hf_eager` were measured with every dropout probability at 0
// (tools/pytorch_saved_tensors.py builds its GPT-2 with attn_pdrop, resid_pdrop
// and embd_pdrop 0.0), and `tessera` is the engine, which has no dropout: they
// count none, so a run matching them trains without dropout.
#include "export_internal.h"

#include "tessera/planner/registry.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner::export_detail {
namespace {

bool profile_counts_dropout(ActivationProfile profile) {
  return profile == ActivationProfile::megatron || profile == ActivationProfile::flash;
}

// Each family's config.json keys for the probabilities ModelConfig holds, as
// transformers' config classes name them (GPT2Config, LlamaConfig, MistralConfig,
// Qwen2Config, OPTConfig, BloomConfig, GPTNeoXConfig; model_config.cpp reads the same keys).
std::vector<DropoutField> config_dropout(const ModelConfig& c) {
  std::vector<DropoutField> fields;
  switch (c.family) {
    case ModelFamily::gpt2:
      fields = {{"attn_pdrop", c.attention_dropout}, {"resid_pdrop", c.hidden_dropout}, {"embd_pdrop", c.embedding_dropout}};
      break;
    case ModelFamily::llama:
    case ModelFamily::mistral:
    case ModelFamily::qwen2: fields = {{"attention_dropout", c.attention_dropout}}; break;
    case ModelFamily::opt: fields = {{"dropout", c.hidden_dropout}, {"attention_dropout", c.attention_dropout}}; break;
    case ModelFamily::bloom:
    case ModelFamily::gpt_neox: fields = {{"hidden_dropout", c.hidden_dropout}, {"attention_dropout", c.attention_dropout}}; break;
  }
  std::erase_if(fields, [](const DropoutField& f) { return !(f.probability > 0); });
  return fields;
}

}  // namespace

Result<std::vector<DropoutField>> uncounted_dropout(const PlanFile& file, const EstimateRequest& request) {
  if (profile_counts_dropout(request.training.activation_profile)) return std::vector<DropoutField>{};
  auto model = load_model(file.model_source, "model.source");
  if (!model) return model.error();
  return config_dropout(model->config);
}

std::string describe_dropout(const std::vector<DropoutField>& fields) {
  std::string out;
  for (const DropoutField& f : fields) out += (out.empty() ? "" : ", ") + f.name + " " + format_number(f.probability);
  return out;
}

}  // namespace tessera::planner::export_detail
