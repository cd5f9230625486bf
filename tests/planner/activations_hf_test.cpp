// The Hugging Face activation profiles against what autograd saved on an H100
// (data/measurements/2026-11-24-nvidia-h100-80gb-hbm3-saved-tensors.json,
// tools/pytorch_saved_tensors.py): for GPT-2 and a Llama-layout model with
// 16-bit weights, SDPA and eager attention, two sequence lengths, one block's
// terms equal the bytes saved inside a block, and the embedding's, last
// stage's and loss's saved terms the bytes saved outside the blocks — byte
// for byte (the SDPA kernel's two int64 Philox scalars aside).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/planner/activations.h"
#include "tessera/planner/model_config.h"

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
      if (row["precision"] != "bf16-weights" || row["layers"] != 2) continue;
      const bool eager = row["attention"] == "eager";
      ASSERT_EQ(row["attention_used"], row["attention"]);
      const ActivationTable table = activation_table(config, eager ? ActivationProfile::hf_eager : ActivationProfile::hf, Precision::bf16);
      const ActivationShape shape{row["micro_batch"].get<int64_t>(), row["seq"].get<int64_t>()};
      const Saved saved = saved_bytes(row, block, blocks);
      const std::string what = family + (eager ? " eager" : " sdpa") + " seq " + std::to_string(shape.seq_len);
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
  EXPECT_EQ(rows, 8);  // 2 families × 2 attentions × 2 lengths
}

}  // namespace
}  // namespace tessera::planner
