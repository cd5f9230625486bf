// Hugging Face config.json -> ModelConfig. Defaults follow each family's config
// class in transformers (src/transformers/models/<family>/configuration_<family>.py).
#include "tessera/planner/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tessera/planner/json_io.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner {
namespace {

using nlohmann::json;

// Upper bounds keep every later product (bytes of a 1M-token batch of a
// 1M-wide model) inside int64; no real model comes near them.
constexpr int64_t kMaxDimension = int64_t{1} << 22;    // hidden, heads, widths
constexpr int64_t kMaxLayers = 100000;
constexpr int64_t kMaxVocab = int64_t{1} << 26;
constexpr double kMaxParameters = 1e15;  // 500x the largest models trained so far

class FieldReader {
 public:
  FieldReader(const json& root, const std::string& source) : root_(root), source_(source) {}

  // The first alias present; an error if two aliases disagree.
  Result<std::optional<int64_t>> integer(std::initializer_list<const char*> aliases, int64_t max_value) const {
    std::optional<int64_t> found;
    const char* found_name = nullptr;
    for (const char* name : aliases) {
      auto it = root_.find(name);
      if (it == root_.end() || it->is_null()) continue;
      int64_t value = 0;
      if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return field_error(name, "must be a positive integer no larger than " + std::to_string(max_value) + ", got " + short_dump(*it));
      }
      if (it->is_number_integer()) {
        value = it->get<int64_t>();
      } else if (it->is_number_float() && std::fabs(it->get<double>()) < 9e18 &&  // cast only what int64 holds
                 it->get<double>() == static_cast<double>(static_cast<int64_t>(it->get<double>()))) {
        value = static_cast<int64_t>(it->get<double>());
      } else {
        return field_error(name, "must be a positive integer, got " + short_dump(*it));
      }
      if (value <= 0 || value > max_value) {
        return field_error(name, "must be a positive integer no larger than " + std::to_string(max_value) + ", got " + std::to_string(value));
      }
      if (found && *found != value) {
        return field_error(name, "is " + std::to_string(value) + " but its alias '" + found_name + "' is " +
                                     std::to_string(*found) + "; keep one of them");
      }
      found = value;
      found_name = name;
    }
    return found;
  }

  Result<int64_t> required_integer(std::initializer_list<const char*> aliases, int64_t max_value) const {
    auto value = integer(aliases, max_value);
    if (!value) return value.error();
    if (!value.value()) {
      std::string names;
      for (const char* name : aliases) names += std::string(names.empty() ? "'" : " or '") + name + "'";
      return make_error(ErrorCode::parse_error, source_ + ": missing field " + names + " (the model's size must be stated)");
    }
    return *value.value();
  }

  Result<double> number(const char* name, double fallback, double min_value, double max_value) const {
    auto it = root_.find(name);
    if (it == root_.end() || it->is_null()) return fallback;
    if (!it->is_number()) return field_error(name, "must be a number, got " + short_dump(*it));
    const double value = it->get<double>();
    if (!(value >= min_value && value <= max_value)) {
      return field_error(name, "must lie in [" + format_number(min_value) + ", " + format_number(max_value) + "], got " + format_number(value));
    }
    return value;
  }

  Result<bool> boolean(const char* name, bool fallback) const {
    auto it = root_.find(name);
    if (it == root_.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) return field_error(name, "must be true or false, got " + short_dump(*it));
    return it->get<bool>();
  }

  Result<std::string> string(const char* name, const std::string& fallback) const {
    auto it = root_.find(name);
    if (it == root_.end() || it->is_null()) return fallback;
    if (!it->is_string()) return field_error(name, "must be a string, got " + short_dump(*it));
    return it->get<std::string>();
  }

  bool has(const char* name) const { return root_.contains(name) && !root_[name].is_null(); }

  // An integer that may be null: `fallback` when absent, nullopt when null.
  Result<std::optional<int64_t>> nullable_integer(const char* name, int64_t fallback, int64_t max_value) const {
    if (!root_.contains(name)) return std::optional<int64_t>(fallback);
    return integer({name}, max_value);
  }

  // An object field, or nullptr when it is null or absent.
  Result<const json*> object(const char* name) const {
    auto it = root_.find(name);
    if (it == root_.end() || it->is_null()) return static_cast<const json*>(nullptr);
    if (!it->is_object()) return field_error(name, "must be an object or null, got " + short_dump(*it));
    return &*it;
  }

  Error field_error(const std::string& name, const std::string& what) const {
    return make_error(ErrorCode::parse_error, source_ + ": field '" + name + "' " + what);
  }

 private:
  static std::string short_dump(const json& value) {
    std::string text = value.dump(-1, ' ', true, json::error_handler_t::replace);
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return text;
  }

  const json& root_;
  const std::string& source_;
};

// Fills `out` or returns the first error; TRY keeps the field-by-field code flat.
#define TESSERA_TRY_ASSIGN(target, expression)      \
  do {                                              \
    auto tessera_result_ = (expression);            \
    if (!tessera_result_) return tessera_result_.error(); \
    target = std::move(tessera_result_).value();    \
  } while (0)

// RoPE's scaling and base as transformers reads them. 4.51.3 reads `rope_scaling`
// and a top-level `rope_theta` (modeling_rope_utils.py, _compute_default_rope_parameters
// and LlamaRotaryEmbedding's rope_type lookup); 5.x also reads `rope_parameters`,
// which `rope_scaling` replaces when both are set and whose `rope_theta` wins over
// the top-level one (5.23.0 modeling_rope_utils.py, convert_rope_params_to_dict).
// A rope_type of "default" is RoPE unscaled in both.
Status read_rope_fields(const FieldReader& read, ModelConfig& c) {
  const json* scaling = nullptr;
  const json* parameters = nullptr;
  TESSERA_TRY_ASSIGN(scaling, read.object("rope_scaling"));
  TESSERA_TRY_ASSIGN(parameters, read.object("rope_parameters"));
  const char* scaling_field = scaling != nullptr ? "rope_scaling" : "rope_parameters";
  const json* used = scaling != nullptr ? scaling : parameters;
  if (used != nullptr) {
    c.rope_scaling = "unnamed";  // transformers finds no RoPE function for it
    for (const char* key : {"rope_type", "type"}) {
      if (used->contains(key) && (*used)[key].is_string()) {
        c.rope_scaling = (*used)[key].get<std::string>();
        break;
      }
    }
    if (c.rope_scaling == "default") c.rope_scaling.clear();
    if (!c.rope_scaling.empty()) c.rope_scaling_field = scaling_field;
  }
  if (c.family == ModelFamily::gpt_neox) {
    TESSERA_TRY_ASSIGN(c.rope_theta, read.number("rotary_emb_base", 10000.0, 1.0, 1e12));
    return Status::success();
  }
  TESSERA_TRY_ASSIGN(c.rope_theta, read.number("rope_theta", 10000.0, 1.0, 1e12));
  if (parameters != nullptr && parameters->contains("rope_theta")) {
    const json& theta = (*parameters)["rope_theta"];
    if (!theta.is_number() || !(theta.get<double>() >= 1.0 && theta.get<double>() <= 1e12)) {
      return read.field_error("rope_parameters", "must give rope_theta as a number in [1, 1e12]");
    }
    const bool top_level = read.has("rope_theta");
    if (top_level && theta.get<double>() != c.rope_theta) {
      return read.field_error("rope_parameters", "sets rope_theta " + format_number(theta.get<double>()) + " but the top-level rope_theta is " +
                                                     format_number(c.rope_theta) + " (transformers 4.x reads that one, 5.x this one); keep one value");
    }
    c.rope_theta = theta.get<double>();
  }
  return Status::success();
}

// The fields that change the arithmetic but not the shapes (ModelConfig says
// which). Defaults are those of transformers' config classes: GPT2Config's
// activation_function "gelu_new" and scale_attn_weights True, the Llama-style
// configs' hidden_act "silu", MistralConfig's and Qwen2Config's sliding_window 4096.
Status read_arithmetic_fields(const FieldReader& read, ModelConfig& c) {
  const bool gpt2 = c.family == ModelFamily::gpt2;
  TESSERA_TRY_ASSIGN(c.activation, read.string(gpt2 ? "activation_function" : "hidden_act", gpt2 ? "gelu_new" : "silu"));
  if (Status s = read_rope_fields(read, c); !s) return s;
  // Mistral windows every layer's attention by sliding_window. Qwen2 does where
  // use_sliding_window holds (from max_window_layers on), but transformers 4.51.3
  // builds the causal mask of eager and SDPA attention from sliding_window whatever
  // use_sliding_window says (modeling_qwen2.py, Qwen2Model._prepare_4d_causal_attention_mask_
  // with_cache_position; Qwen2Config keeps the field either way), so for both
  // versions the window is sliding_window. A null window is none.
  if (c.family == ModelFamily::mistral || c.family == ModelFamily::qwen2) {
    std::optional<int64_t> window;
    TESSERA_TRY_ASSIGN(window, read.nullable_integer("sliding_window", 4096, int64_t{1} << 40));
    c.sliding_window = window.value_or(0);
  }
  if (gpt2) {
    bool scale = true, by_layer = false;
    TESSERA_TRY_ASSIGN(scale, read.boolean("scale_attn_weights", true));
    TESSERA_TRY_ASSIGN(by_layer, read.boolean("scale_attn_by_inverse_layer_idx", false));
    c.standard_attention_scale = scale && !by_layer;
  }
  return Status::success();
}


struct FamilyDefaults {
  ModelFamily family;
  NormKind norm;
  MlpKind mlp;
  bool tie_word_embeddings;
  bool qkv_bias;
  bool attn_out_bias;
  bool mlp_bias;
  bool learned_positions;
  double attention_dropout;
  double hidden_dropout;
  double embedding_dropout;
};

std::optional<FamilyDefaults> family_defaults(std::string_view model_type) {
  // Defaults of each transformers config class; tie_word_embeddings falls back to
  // PretrainedConfig's True unless the class overrides it.
  if (model_type == "gpt2") return FamilyDefaults{ModelFamily::gpt2, NormKind::layer_norm, MlpKind::gelu, true, true, true, true, true, 0.1, 0.1, 0.1};
  if (model_type == "llama") return FamilyDefaults{ModelFamily::llama, NormKind::rms_norm, MlpKind::swiglu, false, false, false, false, false, 0.0, 0.0, 0.0};
  if (model_type == "mistral") return FamilyDefaults{ModelFamily::mistral, NormKind::rms_norm, MlpKind::swiglu, false, false, false, false, false, 0.0, 0.0, 0.0};
  if (model_type == "qwen2") return FamilyDefaults{ModelFamily::qwen2, NormKind::rms_norm, MlpKind::swiglu, false, true, false, false, false, 0.0, 0.0, 0.0};
  if (model_type == "opt") return FamilyDefaults{ModelFamily::opt, NormKind::layer_norm, MlpKind::gelu, true, true, true, true, true, 0.0, 0.1, 0.1};
  if (model_type == "bloom") return FamilyDefaults{ModelFamily::bloom, NormKind::layer_norm, MlpKind::gelu, true, true, true, true, false, 0.0, 0.0, 0.0};
  if (model_type == "gpt_neox") return FamilyDefaults{ModelFamily::gpt_neox, NormKind::layer_norm, MlpKind::gelu, false, true, true, true, false, 0.0, 0.0, 0.0};
  return std::nullopt;
}

Result<ModelConfig> read_config(const json& root, const std::string& source) {
  if (!root.is_object()) return make_error(ErrorCode::parse_error, source + ": expected a JSON object (a Hugging Face config.json)");
  auto type_it = root.find("model_type");
  if (type_it == root.end()) return make_error(ErrorCode::parse_error, source + ": missing field 'model_type' (e.g. \"gpt2\" or \"llama\")");
  if (!type_it->is_string()) return make_error(ErrorCode::parse_error, source + ": field 'model_type' must be a string");
  const std::string model_type = type_it->get<std::string>();
  const auto defaults = family_defaults(model_type);
  if (!defaults) {
    return make_error(ErrorCode::unsupported, source + ": model_type '" + one_line(model_type, 40) +
                                                  "' is not supported; supported: gpt2, llama, mistral, qwen2, opt, bloom, gpt_neox");
  }

  const FieldReader read(root, source);
  ModelConfig c;
  c.model_type = model_type;
  c.family = defaults->family;
  c.norm = defaults->norm;
  c.mlp = defaults->mlp;

  TESSERA_TRY_ASSIGN(c.hidden_size, read.required_integer({"hidden_size", "n_embd", "n_embed", "d_model"}, kMaxDimension));
  TESSERA_TRY_ASSIGN(c.num_layers, read.required_integer({"num_hidden_layers", "n_layer", "num_layers"}, kMaxLayers));
  TESSERA_TRY_ASSIGN(c.num_heads, read.required_integer({"num_attention_heads", "n_head", "num_heads"}, kMaxDimension));
  TESSERA_TRY_ASSIGN(c.vocab_size, read.required_integer({"vocab_size"}, kMaxVocab));

  std::optional<int64_t> kv_heads, head_dim, intermediate, positions, proj_dim;
  TESSERA_TRY_ASSIGN(kv_heads, read.integer({"num_key_value_heads"}, kMaxDimension));
  TESSERA_TRY_ASSIGN(head_dim, read.integer({"head_dim"}, kMaxDimension));
  TESSERA_TRY_ASSIGN(intermediate, read.integer({"intermediate_size", "n_inner", "ffn_dim"}, kMaxDimension));
  TESSERA_TRY_ASSIGN(positions, read.integer({"max_position_embeddings", "n_positions", "n_ctx"}, kMaxDimension));
  TESSERA_TRY_ASSIGN(proj_dim, read.integer({"word_embed_proj_dim"}, kMaxDimension));

  if (!head_dim && c.hidden_size % c.num_heads != 0) {
    return read.field_error("num_attention_heads", "(" + std::to_string(c.num_heads) + ") must divide the hidden size " +
                                                       std::to_string(c.hidden_size) + " unless 'head_dim' is given");
  }
  c.head_dim = head_dim.value_or(c.hidden_size / c.num_heads);
  // GQA (Ainslie et al. 2023): only Llama-style families read num_key_value_heads.
  const bool has_gqa = c.family == ModelFamily::llama || c.family == ModelFamily::mistral || c.family == ModelFamily::qwen2;
  c.num_kv_heads = has_gqa ? kv_heads.value_or(c.num_heads) : c.num_heads;
  if (c.num_heads % c.num_kv_heads != 0) {
    return read.field_error("num_key_value_heads", "(" + std::to_string(c.num_kv_heads) + ") must divide num_attention_heads " +
                                                       std::to_string(c.num_heads));
  }
  c.max_positions = positions.value_or(2048);

  switch (c.family) {
    case ModelFamily::gpt2:
    case ModelFamily::bloom:
      c.intermediate_size = intermediate.value_or(4 * c.hidden_size);  // GPT2Config n_inner=None -> 4*n_embd
      break;
    case ModelFamily::opt:
      c.intermediate_size = intermediate.value_or(3072);               // OPTConfig ffn_dim default
      break;
    case ModelFamily::llama:
      c.intermediate_size = intermediate.value_or(11008);              // LlamaConfig default
      break;
    case ModelFamily::mistral:
      c.intermediate_size = intermediate.value_or(14336);              // MistralConfig default
      break;
    case ModelFamily::qwen2:
      c.intermediate_size = intermediate.value_or(22016);              // Qwen2Config default
      break;
    case ModelFamily::gpt_neox:
      c.intermediate_size = intermediate.value_or(24576);              // GPTNeoXConfig default
      break;
  }

  TESSERA_TRY_ASSIGN(c.tie_word_embeddings, read.boolean("tie_word_embeddings", defaults->tie_word_embeddings));
  c.qkv_bias = defaults->qkv_bias;
  c.attn_out_bias = defaults->attn_out_bias;
  c.mlp_bias = defaults->mlp_bias;
  c.learned_positions = defaults->learned_positions;
  c.attention_dropout = defaults->attention_dropout;
  c.hidden_dropout = defaults->hidden_dropout;
  c.embedding_dropout = defaults->embedding_dropout;

  switch (c.family) {
    case ModelFamily::gpt2:
      c.max_positions = positions.value_or(1024);
      TESSERA_TRY_ASSIGN(c.attention_dropout, read.number("attn_pdrop", 0.1, 0.0, 1.0));
      TESSERA_TRY_ASSIGN(c.hidden_dropout, read.number("resid_pdrop", 0.1, 0.0, 1.0));
      TESSERA_TRY_ASSIGN(c.embedding_dropout, read.number("embd_pdrop", 0.1, 0.0, 1.0));
      break;
    case ModelFamily::llama:
      TESSERA_TRY_ASSIGN(c.qkv_bias, read.boolean("attention_bias", false));
      c.attn_out_bias = c.qkv_bias;
      TESSERA_TRY_ASSIGN(c.mlp_bias, read.boolean("mlp_bias", false));
      TESSERA_TRY_ASSIGN(c.attention_dropout, read.number("attention_dropout", 0.0, 0.0, 1.0));
      c.rotary_pct = 1.0;
      break;
    case ModelFamily::mistral:
    case ModelFamily::qwen2:
      TESSERA_TRY_ASSIGN(c.attention_dropout, read.number("attention_dropout", 0.0, 0.0, 1.0));
      c.rotary_pct = 1.0;
      break;
    case ModelFamily::opt: {
      bool enable_bias = true, norm_before = true, remove_final_norm = false;
      TESSERA_TRY_ASSIGN(enable_bias, read.boolean("enable_bias", true));
      TESSERA_TRY_ASSIGN(norm_before, read.boolean("do_layer_norm_before", true));
      TESSERA_TRY_ASSIGN(remove_final_norm, read.boolean("_remove_final_layer_norm", false));
      c.qkv_bias = c.attn_out_bias = c.mlp_bias = enable_bias;
      c.final_norm = norm_before && !remove_final_norm;
      c.position_offset = 2;  // OPTLearnedPositionalEmbedding keeps 2 extra rows
      c.word_embed_proj_dim = proj_dim.value_or(c.hidden_size);
      TESSERA_TRY_ASSIGN(c.hidden_dropout, read.number("dropout", 0.1, 0.0, 1.0));
      TESSERA_TRY_ASSIGN(c.attention_dropout, read.number("attention_dropout", 0.0, 0.0, 1.0));
      c.embedding_dropout = c.hidden_dropout;
      break;
    }
    case ModelFamily::bloom:
      c.embedding_norm = true;
      TESSERA_TRY_ASSIGN(c.hidden_dropout, read.number("hidden_dropout", 0.0, 0.0, 1.0));
      TESSERA_TRY_ASSIGN(c.attention_dropout, read.number("attention_dropout", 0.0, 0.0, 1.0));
      break;
    case ModelFamily::gpt_neox:
      TESSERA_TRY_ASSIGN(c.parallel_residual, read.boolean("use_parallel_residual", true));
      TESSERA_TRY_ASSIGN(c.rotary_pct, read.number("rotary_pct", 0.25, 0.0, 1.0));
      TESSERA_TRY_ASSIGN(c.qkv_bias, read.boolean("attention_bias", true));
      c.attn_out_bias = c.qkv_bias;
      TESSERA_TRY_ASSIGN(c.hidden_dropout, read.number("hidden_dropout", 0.0, 0.0, 1.0));
      TESSERA_TRY_ASSIGN(c.attention_dropout, read.number("attention_dropout", 0.0, 0.0, 1.0));
      break;
  }
  if (c.word_embed_proj_dim == 0) c.word_embed_proj_dim = c.hidden_size;
  if (Status s = read_arithmetic_fields(read, c); !s) return s.error();
  // Norm epsilon and RoPE base under each family's key (LlamaConfig and Qwen2Config default rms_norm_eps 1e-6).
  const bool rms = c.norm == NormKind::rms_norm;
  const char* eps_key = rms ? "rms_norm_eps" : (c.family == ModelFamily::gpt_neox ? "layer_norm_eps" : "layer_norm_epsilon");
  TESSERA_TRY_ASSIGN(c.norm_eps, read.number(eps_key, rms ? 1e-6 : 1e-5, 0.0, 1.0));
  // Each size is bounded, but their products (heads x head_dim, layers x width^2)
  // are not: bound the whole shape so that every tensor and byte count fits int64.
  const double width = static_cast<double>(std::max({c.hidden_size, c.q_width(), c.kv_width(), c.intermediate_size, c.word_embed_proj_dim}));
  const double parameter_bound = static_cast<double>(c.num_layers) * (8 * width * width + 16 * width) +
                                 static_cast<double>(2 * c.vocab_size + c.max_positions + 4) * width + 2 * width * width;
  if (parameter_bound > kMaxParameters) {
    return make_error(ErrorCode::parse_error, source + ": the size fields (hidden_size " + std::to_string(c.hidden_size) + ", " +
                                                  std::to_string(c.num_layers) + " layers, " + std::to_string(c.num_heads) + " heads of " +
                                                  std::to_string(c.head_dim) + ", intermediate_size " + std::to_string(c.intermediate_size) +
                                                  ", vocab_size " + std::to_string(c.vocab_size) + ") describe over 1e15 parameters; check them");
  }
  return c;
}

#undef TESSERA_TRY_ASSIGN

}  // namespace

std::string_view to_string(ModelFamily family) {
  switch (family) {
    case ModelFamily::gpt2: return "gpt2";
    case ModelFamily::llama: return "llama";
    case ModelFamily::mistral: return "mistral";
    case ModelFamily::qwen2: return "qwen2";
    case ModelFamily::opt: return "opt";
    case ModelFamily::bloom: return "bloom";
    case ModelFamily::gpt_neox: return "gpt_neox";
  }
  return "unknown";
}

Result<ModelConfig> parse_model_config(std::string_view json_text, const std::string& source) {
  if (json_text.size() > kMaxJsonFileBytes) {
    return make_error(ErrorCode::parse_error, source + ": file is larger than 16 MiB; a config.json is a few KB");
  }
  auto root = parse_json(json_text, source);
  if (!root) return root.error();
  return read_config(root.value(), source);
}

Result<ModelConfig> load_model_config_file(const std::string& given_path, const std::string& field) {
  // A Hugging Face model directory (a snapshot) holds its config.json.
  std::error_code ec;
  const std::filesystem::path inside = std::filesystem::path(given_path) / "config.json";
  const std::string path = std::filesystem::is_directory(given_path, ec) && std::filesystem::exists(inside, ec) ? inside.string() : given_path;
  auto text = read_text_file(path, field, kMaxJsonFileBytes);
  if (!text) return text.error();
  auto config = parse_model_config(text.value(), path);
  if (!config) return make_error(config.error().code, field + ": " + config.error().message);
  ModelConfig c = std::move(config).value();
  c.name = std::filesystem::path(path).stem().string();
  if (c.name == "config") c.name = std::filesystem::path(path).parent_path().filename().string();
  if (c.name.empty()) c.name = "config";
  return c;
}

}  // namespace tessera::planner
