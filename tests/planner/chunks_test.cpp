#include <gtest/gtest.h>

#include <cmath>

#include "tessera/planner/chunks.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

TensorInventory inventory_of(std::initializer_list<int64_t> sizes) {
  TensorInventory inventory;
  int layer = 0;
  for (int64_t n : sizes) inventory.tensors.push_back(TensorInfo{"t" + std::to_string(layer), {n}, layer++, TpSplit::replicated, false, -1});
  return inventory;
}

TEST(Chunks, PacksGreedilyInOrderWithoutSplittingTensors) {
  const TensorInventory inventory = inventory_of({6, 3, 5, 2, 7});
  const ChunkLayout layout = pack_chunks(inventory, 10, 1);
  // [6 3] [5 2] [7]: 1 + 3 + 3 elements of padding.
  EXPECT_EQ(layout.chunk_used, (std::vector<int64_t>{9, 7, 7}));
  EXPECT_EQ(layout.chunk_capacity, (std::vector<int64_t>{10, 10, 10}));
  EXPECT_EQ(layout.tensor_chunk, (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_EQ(layout.waste_elements(), 7);
  EXPECT_EQ(unused_elements({6, 3, 5, 2, 7}, 10), 7);
}

TEST(Chunks, TiedTensorsArePackedOnce) {
  TensorInventory inventory = inventory_of({4, 4, 4});
  inventory.tensors[2].tied_to = 0;
  const ChunkLayout layout = pack_chunks(inventory, 8, 1);
  EXPECT_EQ(layout.num_chunks(), 1);
  EXPECT_EQ(layout.tensor_chunk[2], -1);
}

// ChunkManager.register_tensor: a tensor over the chunk size opens a chunk of
// its numel rounded up to dp, and a later tensor that fits its tail joins it.
TEST(Chunks, ATensorLargerThanTheChunkGetsAChunkOfItsOwn) {
  const ChunkLayout layout = pack_chunks(inventory_of({3, 11, 1, 2}), 8, 4);
  EXPECT_EQ(layout.chunk_capacity, (std::vector<int64_t>{8, 12, 8}));
  EXPECT_EQ(layout.chunk_used, (std::vector<int64_t>{3, 12, 2}));
  EXPECT_EQ(layout.padded_elements(), 28);
  EXPECT_EQ(layout.waste_elements(), 28 - 17);
}

// _filter_exlarge_params: ten tensors of 1 and one of 1000 have mean 91.8 and
// standard deviation 287.2, so the limit is 953.5 and the 1000 drops out.
TEST(Chunks, SearchLeavesOutTensorsAboveMeanPlusThreeDeviations) {
  EXPECT_EQ(chunk_search_sizes(inventory_of({1, 1, 1, 1, 1, 1000, 1, 1, 1, 1, 1})), (std::vector<int64_t>(10, 1)));
  EXPECT_EQ(chunk_search_sizes(inventory_of({6, 3, 5, 2, 7})), (std::vector<int64_t>{6, 3, 5, 2, 7}));
}

TEST(Chunks, SearchPicksTheLeastWasteAndRoundsToTheDataParallelSize) {
  const TensorInventory inventory = inventory_of({6, 3, 5, 2, 7});
  GeminiOptions options;
  options.min_chunk_size_m = 0;
  options.search_range_m = 8.0 / (1 << 20);  // search 7 .. 15
  options.search_interval = 1;
  // Waste by size: 7:5  8:9  9:4  10:7  11:10  12:13  13:16  14:5  15:7. Size 9 packs [6 3][5 2][7].
  const int64_t best = search_chunk_size(inventory, options, 1);
  EXPECT_EQ(best, 9);
  const std::vector<int64_t> sizes{6, 3, 5, 2, 7};
  for (int64_t size = 7; size <= 15; ++size) EXPECT_LE(unused_elements(sizes, best), unused_elements(sizes, size));
  EXPECT_EQ(search_chunk_size(inventory, options, 4), 12);  // 9 rounded up to a multiple of dp
}

// The sizes ColossalAI 0.5.0's search_chunk_configuration returns with
// GeminiPlugin's defaults on 8 ranks (issue 12, run with the real library).
TEST(Chunks, SearchGivesColossalAIsChunkSizes) {
  EXPECT_EQ(search_chunk_size(testing::shipped_model("llama-2-7b").inventory, GeminiOptions{}, 8), 45101056);
  EXPECT_EQ(search_chunk_size(testing::shipped_model("gpt2-medium").inventory, GeminiOptions{}, 8), 51432448);
}

// llama-2-7b's embedding and head (131,072,000 each) are above the limit: each
// gets its own chunk; the last block's down_proj, norms and the final norm fill
// a chunk of exactly 45,101,056.
TEST(Chunks, Llama2PacksItsEmbeddingAndHeadInChunksOfTheirOwn) {
  const Model model = testing::shipped_model("llama-2-7b");
  const ChunkLayout layout = pack_chunks(model.inventory, 45101056, 8);
  EXPECT_EQ(layout.chunk_capacity.front(), 131072000);
  EXPECT_EQ(layout.chunk_capacity.back(), 131072000);
  EXPECT_EQ(layout.chunk_used[layout.chunk_used.size() - 2], 45101056);
  EXPECT_EQ(layout.num_chunks(), 2 + 32 * 5);  // per block: [q k] [v o] [gate] [up] [down norms]
}

TEST(Chunks, LlamaPacksInRegistrationOrder) {
  const Model model = testing::shipped_model("llama-2-7b");
  const std::vector<int>& order = model.inventory.module_order;
  ASSERT_EQ(order.size(), 291u);
  const auto name = [&](size_t i) { return model.inventory.tensors[static_cast<size_t>(order[i])].name; };
  EXPECT_EQ(name(0), "model.embed_tokens.weight");
  EXPECT_EQ(name(1), "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(name(8), "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(name(9), "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(name(289), "model.norm.weight");
  EXPECT_EQ(name(290), "lm_head.weight");
}

TEST(Chunks, OptRegistersItsFinalNormBeforeTheLayers) {
  const Model model = testing::shipped_model("opt-1.3b");
  const auto name = [&](size_t i) { return model.inventory.tensors[static_cast<size_t>(model.inventory.module_order[i])].name; };
  EXPECT_EQ(name(2), "model.decoder.final_layer_norm.weight");
  EXPECT_EQ(name(4), "model.decoder.layers.0.self_attn.k_proj.weight");
}

// Every size on the search grid, the slow way.
int64_t exhaustive_search(const TensorInventory& inventory, const GeminiOptions& options) {
  const std::vector<int64_t> sizes = chunk_search_sizes(inventory);
  int64_t largest = std::llround(options.min_chunk_size_m * (1 << 20));
  for (int64_t s : sizes) largest = std::max(largest, s);
  const int64_t start = (largest + options.search_interval - 1) / options.search_interval * options.search_interval;
  int64_t best = start, best_waste = -1;
  for (int64_t size = start; size <= start + std::llround(options.search_range_m * (1 << 20)); size += options.search_interval) {
    const int64_t waste = unused_elements(sizes, size);
    if (best_waste < 0 || waste < best_waste) {
      best_waste = waste;
      best = size;
    }
  }
  return best;
}

TEST(Chunks, FastSearchEqualsExhaustiveSearch) {
  for (const char* name : {"gpt2-medium", "llama-2-7b", "gpt2", "qwen2-0.5b", "opt-1.3b"}) {
    const Model model = testing::shipped_model(name);
    for (double min_chunk_m : {0.0, 32.0}) {
      GeminiOptions options;
      options.min_chunk_size_m = min_chunk_m;
      EXPECT_EQ(search_chunk_size(model.inventory, options, 1), exhaustive_search(model.inventory, options)) << name << " " << min_chunk_m;
    }
  }
}

TEST(Chunks, PeakCountsChunksHeldAcrossALayer) {
  // Layers 0..2 as slots 1..3; a chunk straddling layers 0 and 1 is held by both.
  TensorInventory inventory;
  inventory.tensors = {TensorInfo{"a", {6}, 0, TpSplit::replicated, false, -1}, TensorInfo{"b", {6}, 0, TpSplit::replicated, false, -1},
                       TensorInfo{"c", {2}, 1, TpSplit::replicated, false, -1}, TensorInfo{"d", {12}, 2, TpSplit::replicated, false, -1}};
  const ChunkLayout layout = pack_chunks(inventory, 8, 1);  // [a] [b c] [d], d in a chunk of 12
  EXPECT_EQ(peak_chunks_per_layer(layout, inventory, 3), 2);  // layer 0 holds [a] and [b c]
  const std::vector<std::vector<int>> by_layer = chunks_by_layer(layout, inventory, 3);
  ASSERT_EQ(by_layer.size(), 5u);  // the embedding slot, layers 0..2, the head slot
  EXPECT_EQ(by_layer[1], (std::vector<int>{0, 1}));
  EXPECT_EQ(by_layer[2], (std::vector<int>{1}));
  EXPECT_EQ(by_layer[3], (std::vector<int>{2}));
  EXPECT_TRUE(by_layer[0].empty());
}

}  // namespace
}  // namespace tessera::planner
