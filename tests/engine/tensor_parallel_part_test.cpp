// What the GPU step holds as one tensor-parallel rank (device/tensor_parallel_part.h),
// checked on the CPU against the planner's sharding rule and the CPU model's
// rank of the same group (a dry-run group: it only says which rank it is):
// GPT-2 over 3 ranks (a 97-token vocabulary: 33 rows each, 2 of them padding
// on the last) and the Llama layout over 2 (6 heads on 2 key-value heads, an MLP of 136).
#include "tessera/engine/device/tensor_parallel_part.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "awkward_models.h"
#include "tessera/engine/comm/dry_run.h"
#include "tessera/engine/model/parameter_slots.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/planner/sharding.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::engine {
namespace {

planner::Model model_of(const char* json) { return testing::awkward_model(json); }
const char* kGpt2 = testing::kAwkwardGpt2;
const char* kLlama = testing::kAwkwardLlama;
const std::pair<const char*, int64_t> kCases[] = {{kGpt2, 3}, {kLlama, 2}};

// Elements of flat parameter `index` (a slot) of `part`.
int64_t numel_of(const planner::Model& part, int index) {
  return planner::flat_parameter_order(part.inventory)[static_cast<size_t>(index)].numel;
}

// The widths the step computes with are the shapes the planner gives the rank's part.
TEST(TensorParallelPart, WidthsAreThePartsShapes) {
  for (const auto& [json, tp] : kCases) {
    const planner::Model whole = model_of(json), part = planner::tp_rank_model(whole, tp);
    const planner::ModelConfig w = tp_rank_widths(whole.config, tp);
    const int64_t C = whole.config.hidden_size;
    const ParameterSlots slots = parameter_slots(part.inventory, static_cast<int>(whole.config.num_layers));
    const BlockParameters& b = slots.blocks.front();
    const std::string what = whole.config.model_type + " tp " + std::to_string(tp);
    EXPECT_EQ(w.num_heads * tp, whole.config.num_heads) << what;
    EXPECT_EQ(numel_of(part, slots.wte), w.vocab_size * C) << what;
    EXPECT_EQ(w.vocab_size, (whole.config.vocab_size + tp - 1) / tp) << what;
    if (whole.config.family == planner::ModelFamily::gpt2) {
      EXPECT_EQ(numel_of(part, b.qkv_w), C * 3 * w.q_width()) << what;
      EXPECT_EQ(numel_of(part, b.o_w), w.q_width() * C) << what;
      EXPECT_EQ(numel_of(part, b.fc_w), C * w.intermediate_size) << what;
      EXPECT_EQ(numel_of(part, b.proj_b), C) << what << ": a row-parallel bias is whole";
    } else {
      EXPECT_EQ(numel_of(part, b.q_w), w.q_width() * C) << what;
      EXPECT_EQ(numel_of(part, b.k_w), w.kv_width() * C) << what;
      EXPECT_EQ(numel_of(part, b.gate_w), w.intermediate_size * C) << what;
      EXPECT_EQ(numel_of(part, b.down_w), w.intermediate_size * C) << what;
    }
  }
}

// Rank 0 counts its whole buffer, the others all but the replicated
// tensors; over the group each element of the model counts once (the
// vocabulary's padding rows too: their gradients are 0).
TEST(TensorParallelPart, GradientNormCountsEachParameterOnce) {
  for (const auto& [json, tp] : kCases) {
    const planner::Model whole = model_of(json), part = planner::tp_rank_model(whole, tp);
    const std::string what = whole.config.model_type + " tp " + std::to_string(tp);
    const int64_t numel = part.inventory.parameter_count();
    EXPECT_EQ(gradient_norm_runs(part, 0), (std::vector<std::pair<int64_t, int64_t>>{{0, numel}})) << what;
    EXPECT_EQ(gradient_norm_runs(planner::tp_rank_model(whole, 1), 0).size(), 1u) << what;
    int64_t replicated = 0, split = 0;
    for (const planner::FlatParameter& flat : planner::flat_parameter_order(part.inventory)) {
      const bool whole_on_every_rank = part.inventory.tensors[static_cast<size_t>(flat.tensor_index)].tp_split == planner::TpSplit::replicated;
      (whole_on_every_rank ? replicated : split) += flat.numel;
    }
    EXPECT_GT(replicated, 0) << what;
    int64_t counted_over_group = 0;
    for (int64_t rank = 0; rank < tp; ++rank) {
      int64_t counted = 0;
      for (const auto& [begin, end] : gradient_norm_runs(part, rank)) {
        EXPECT_LT(begin, end) << what;
        counted += end - begin;
      }
      EXPECT_EQ(counted, rank == 0 ? numel : split) << what << " rank " << rank;
      counted_over_group += counted;
    }
    EXPECT_EQ(counted_over_group, replicated + tp * split) << what;
  }
}

// Each rank's initial parameters are the CPU model's rank's, bit for bit,
// and ZeRO's padding after them is 0: a GPU tp run and a CPU tp run start
// from the same parameters.
TEST(TensorParallelPart, InitialParametersAreTheCpuRanks) {
  for (const auto& [json, tp] : kCases) {
    const planner::Model whole = model_of(json);
    const int64_t numel = planner::tp_rank_model(whole, tp).inventory.parameter_count();
    for (int64_t rank = 0; rank < tp; ++rank) {
      const std::string what = whole.config.model_type + " tp " + std::to_string(tp) + " rank " + std::to_string(rank);
      const auto group = comm::make_dry_run_communicator(static_cast<int>(rank), static_cast<int>(tp));
      MemoryLedger ledger;
      auto created = Transformer<bf16>::create(whole, ledger, 2, 5, 7, planner::RecomputeMode::none, FlatStorage{}, group.get());
      ASSERT_TRUE(created.ok()) << what << ": " << created.error().message;
      Transformer<bf16> cpu = std::move(created).value();
      ASSERT_EQ(cpu.flat_parameters().numel(), numel) << what;
      const std::vector<bf16> gpu = initial_part_parameters(whole, 7, tp, rank, numel + 3);
      EXPECT_EQ(std::memcmp(gpu.data(), cpu.flat_parameters().data(), static_cast<size_t>(numel) * sizeof(bf16)), 0) << what;
      for (int64_t i = numel; i < numel + 3; ++i) EXPECT_EQ(widen(gpu[static_cast<size_t>(i)]), 0.0f) << what;
    }
    const std::vector<bf16> first = initial_part_parameters(whole, 7, tp, 0, numel), second = initial_part_parameters(whole, 7, tp, 1, numel);
    EXPECT_NE(std::memcmp(first.data(), second.data(), first.size() * sizeof(bf16)), 0) << "the ranks' parts differ";
  }
}

}  // namespace
}  // namespace tessera::engine
