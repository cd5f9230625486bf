// The Hugging Face activation profiles against what autograd saved on an H100
// (data/measurements/2026-11-24-nvidia-h100-80gb-hbm3-saved-tensors.json,
// tools/pytorch_saved_tensors.py): for GPT-2 and a Llama-layout model with
// 16-bit weights, SDPA and eager attention, two sequence lengths, one block's
// terms equal the bytes saved inside a block, and the embedding's, last
// stage's and loss's saved terms the bytes saved outside the blocks — byte
// for byte (the SDPA kernel's two int64 Philox scalars aside).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/planner/activations.h"
#include "tessera/planner/model_config.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using nlohmann::json;

// The two models the probe built (its configs() function), as config.json.
ModelConfig probe_config(const std::string& family) {
  const std::string text =
      family == "gpt2"
          ? R"({"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 2, "n_head": 12,
               "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0})"
          : R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 2,
               "num_attention_heads": 8, "num_key_value_heads": 4, "max_position_embeddings": 1024, "rms_norm_eps": 1e-5,
               "tie_word_embeddings": false})";
  return parse_model_config(text, family).value();
}

struct Saved {
  int64_t in_block = 0, outside_blocks = 0;
};

// Bytes saved by block 0 and outside every block, without parameters and scalars.
Saved saved_bytes(const json& row, const std::string& block_prefix, const std::string& blocks_prefix) {
  Saved s;
  for (const json& t : row["saved"]) {
    if (!t["parameter"].is_null() || t["shape"].empty()) continue;
    const std::string module = t["module"].get<std::string>() + ".";
    const int64_t bytes = t["bytes"].get<int64_t>();
    if (module.rfind(block_prefix, 0) == 0) s.in_block += bytes;
    if (module.rfind(blocks_prefix, 0) != 0) s.outside_blocks += bytes;
  }
  return s;
}

int64_t bytes_of(const std::vector<ActivationTerm>& terms, std::string_view name, const ActivationShape& shape) {
  for (const ActivationTerm& term : terms) {
    if (term.name == name) return term_bytes(term, shape);
  }
  ADD_FAILURE() << "no term " << name;
  return 0;
}

json read_measurement(const std::string& file) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/data/measurements/" + file);
  EXPECT_TRUE(in.good()) << file;
  return json::parse(in);
}

// The loss's peak, early in backward: in every row of the memory probe (GPT-2
// of 6 and 12 blocks, micro-batches 2 and 8, SDPA and eager, bf16 autocast and
// fp32) the peak above what forward kept is nll_loss's and log_softmax's fp32
// gradients, less the shifted labels freed by then — to the byte.
TEST(HfActivationProfile, LossPeakEqualsTheMeasuredOne) {
  const json measured = read_measurement("2026-11-24-nvidia-h100-80gb-hbm3-pytorch-memory.json");
  const ActivationTable table = activation_table(probe_config("gpt2"), ActivationProfile::hf, Precision::bf16);
  ASSERT_EQ(measured["rows"].size(), 16u);
  for (const json& row : measured["rows"]) {
    const ActivationShape shape{row["micro_batch"].get<int64_t>(), row["seq"].get<int64_t>()};
    const int64_t above_kept = row["peak_above_states_bytes"].get<int64_t>() - row["kept_by_forward_bytes"].get<int64_t>();
    const int64_t labels = 8 * shape.micro_batch_size * shape.seq_len;
    EXPECT_EQ(bytes_of(table.logits, "nll_loss_gradient", shape) + bytes_of(table.logits, "log_softmax_gradient", shape) - labels, above_kept)
        << row.dump();
  }
}

TEST(HfActivationProfile, EqualsWhatAutogradSavedOnAnH100) {
  const json measured = read_measurement("2026-11-24-nvidia-h100-80gb-hbm3-saved-tensors.json");
  int rows = 0;
  for (const auto& [family, blocks, block] : {std::tuple<std::string, std::string, std::string>{"gpt2", "transformer.h.", "transformer.h.0."},
                                              {"llama", "model.layers.", "model.layers.0."}}) {
    const ModelConfig config = probe_config(family);
    for (const json& row : measured["models"][family]) {
      const bool eager = row["attention"] == "eager", autocast = row["precision"] == "bf16";
      // 16-bit weights with either attention; autocast (fp32 weights) with SDPA.
      if (row["layers"] != 2 || (row["precision"] != "bf16-weights" && !(autocast && !eager))) continue;
      ASSERT_EQ(row["attention_used"], row["attention"]);
      const ActivationProfile profile = autocast ? ActivationProfile::hf_autocast : eager ? ActivationProfile::hf_eager : ActivationProfile::hf;
      const ActivationTable table = activation_table(config, profile, Precision::bf16);
      const ActivationShape shape{row["micro_batch"].get<int64_t>(), row["seq"].get<int64_t>()};
      const Saved saved = saved_bytes(row, block, blocks);
      const std::string what = family + (autocast ? " autocast" : "") + (eager ? " eager" : " sdpa") + " seq " + std::to_string(shape.seq_len);
      EXPECT_EQ(terms_bytes(table.block, shape), saved.in_block) << what;
      // Outside the blocks: the ids, the final norm, the head's input, and of
      // the loss what it saves: log_softmax's output, and the shifted labels
      // (int64, freed before the peak, so not a profile term).
      const int64_t labels = 8 * shape.micro_batch_size * shape.seq_len;
      EXPECT_EQ(terms_bytes(table.first_stage, shape) + terms_bytes(table.last_stage, shape) + bytes_of(table.logits, "log_softmax_output", shape) + labels,
                saved.outside_blocks)
          << what;
      ++rows;
    }
  }
  EXPECT_EQ(rows, 12);  // 2 families × (2 attentions with 16-bit weights + SDPA under autocast) × 2 lengths
}

// Whole runs under autocast, the Hugging Face Trainer's way (fp32 weights,
// bf16 autocast, SDPA, fused AdamW), measured on the H100: what forward kept
// for GPT-2 of 6 and 12 blocks at micro-batches 2 and 8 (the memory probe),
// and the peak of the largest micro-batches that fit (GPT-2 124M at 48, 350M
// at 24; tools/pytorch_gpu_baseline.py) above the weights and AdamW's moments,
// against the profile's activations and logits. Within 1%: the caching
// allocator rounds every block up and the profile names every tensor but a
// few small ones (measured: 0.1% to 0.4%).
TEST(HfActivationProfile, AutocastRunsOnAnH100MatchWithinOnePercent) {
  const ModelConfig gpt2 = probe_config("gpt2");
  const auto kept = [](const ModelConfig& c, int64_t layers, const ActivationShape& shape) {
    const ActivationTable t = activation_table(c, ActivationProfile::hf_autocast, Precision::bf16);
    const int64_t labels = 8 * shape.micro_batch_size * shape.seq_len;
    return layers * terms_bytes(t.block, shape) + terms_bytes(t.first_stage, shape) + terms_bytes(t.last_stage, shape) +
           bytes_of(t.logits, "log_softmax_output", shape) + labels;
  };
  int rows = 0;
  const json probe = read_measurement("2026-11-24-nvidia-h100-80gb-hbm3-pytorch-memory.json");
  for (const json& row : probe["rows"]) {
    if (row["precision"] != "bf16" || row["attention"] != "sdpa") continue;
    const ActivationShape shape{row["micro_batch"].get<int64_t>(), row["seq"].get<int64_t>()};
    const double predicted = static_cast<double>(kept(gpt2, row["layers"].get<int64_t>(), shape));
    const double measured = static_cast<double>(row["kept_by_forward_bytes"].get<int64_t>());
    std::printf("GPT-2 %lld blocks, micro-batch %lld: kept by forward %.0f MiB measured, %.0f predicted (%+.2f%%)\n",
                static_cast<long long>(row["layers"].get<int64_t>()), static_cast<long long>(shape.micro_batch_size), measured / 1048576.0,
                predicted / 1048576.0, 100 * (predicted / measured - 1));
    EXPECT_NEAR(predicted / measured, 1.0, 0.01) << row.dump();
    ++rows;
  }
  EXPECT_EQ(rows, 4);
  const json baseline = read_measurement("2026-11-24-nvidia-h100-80gb-hbm3.json")["pytorch"]["models"];
  for (const auto& [name, model_name] : {std::pair<std::string, std::string>{"gpt2-124m", "gpt2"}, {"gpt2-350m", "gpt2-medium"}}) {
    const json& run = baseline[name];
    const ModelConfig c = testing::shipped_model(model_name).config;
    const ActivationShape shape{run["eager"]["micro_batch"].get<int64_t>(), run["sequence"].get<int64_t>()};
    const ActivationTable t = activation_table(c, ActivationProfile::hf_autocast, Precision::bf16);
    // At the peak, early in backward: every block's activations, the last stage's, the loss's peak.
    const double predicted = static_cast<double>(c.num_layers * terms_bytes(t.block, shape) + terms_bytes(t.first_stage, shape) +
                                                 terms_bytes(t.last_stage, shape) + terms_bytes(t.logits, shape));
    const double measured = static_cast<double>(run["eager"]["peak_allocated_bytes"].get<int64_t>() - run["model_state_bytes"].get<int64_t>());
    std::printf("%s, micro-batch %lld: peak above the model states %.2f GiB measured, %.2f predicted (%+.2f%%)\n", model_name.c_str(),
                static_cast<long long>(shape.micro_batch_size), measured / 1073741824.0, predicted / 1073741824.0, 100 * (predicted / measured - 1));
    EXPECT_NEAR(predicted / measured, 1.0, 0.01) << name;
  }
}

// Full recompute (torch.utils.checkpoint around each decoder layer) keeps the
// layer's input as it arrives: a Llama layer with 16-bit weights keeps 2·h
// bytes per token, not the 4·h of the fp32 copy its RMSNorm makes; under
// autocast the residual stream is fp32 and the input is that copy, 4·h.
TEST(HfActivationProfile, FullRecomputeKeepsTheLayerInputInItsDtype) {
  const ModelConfig llama = probe_config("llama");
  const ActivationShape shape{2, 1024, 1, false};
  const int64_t tokens = 2 * 1024, h = llama.hidden_size;
  const auto stash = [&](ActivationProfile profile) {
    return block_activation_bytes(activation_table(llama, profile, Precision::bf16), shape, RecomputeMode::full).stash;
  };
  EXPECT_EQ(stash(ActivationProfile::hf), tokens * h * 2);
  EXPECT_EQ(stash(ActivationProfile::hf_autocast), tokens * h * 4);
  const ModelConfig gpt2 = probe_config("gpt2");
  EXPECT_EQ(block_activation_bytes(activation_table(gpt2, ActivationProfile::hf, Precision::bf16), shape, RecomputeMode::full).stash,
            tokens * gpt2.hidden_size * 2);
}

}  // namespace
}  // namespace tessera::planner
