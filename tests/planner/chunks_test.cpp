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

TEST(Chunks, PacksGreedilyInExecutionOrderWithoutSplittingTensors) {
  const TensorInventory inventory = inventory_of({6, 3, 5, 2, 7});
  const ChunkLayout layout = pack_chunks(inventory, 10);
  // [6 3] [5 2] [7]: 1 + 3 + 3 elements of padding.
  EXPECT_EQ(layout.chunk_used, (std::vector<int64_t>{9, 7, 7}));
  EXPECT_EQ(layout.tensor_chunk, (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_EQ(layout.waste_elements(), 7);
  EXPECT_EQ(chunk_waste_elements(inventory, 10), 7);
}

TEST(Chunks, TiedTensorsArePackedOnce) {
  TensorInventory inventory = inventory_of({4, 4, 4});
  inventory.tensors[2].tied_to = 0;
  const ChunkLayout layout = pack_chunks(inventory, 8);
  EXPECT_EQ(layout.num_chunks(), 1);
  EXPECT_EQ(layout.tensor_chunk[2], -1);
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
  for (int64_t size = 7; size <= 15; ++size) EXPECT_LE(chunk_waste_elements(inventory, best), chunk_waste_elements(inventory, size));
  EXPECT_EQ(search_chunk_size(inventory, options, 4), 12);  // 9 rounded up to a multiple of dp
}

TEST(Chunks, SearchIsNeverWorseThanTheMinimumSize) {
  for (const char* name : {"gpt2-medium", "llama-2-7b", "opt-1.3b"}) {
    const Model model = testing::shipped_model(name);
    GeminiOptions options;
    const int64_t chosen = search_chunk_size(model.inventory, options, 1);
    const int64_t minimum = (std::max<int64_t>(model.inventory.largest_tensor_numel(), 32 << 20) + 1023) / 1024 * 1024;
    EXPECT_LE(chunk_waste_elements(model.inventory, chosen), chunk_waste_elements(model.inventory, minimum)) << name;
  }
}

// Every size on the search grid, the slow way.
int64_t exhaustive_search(const TensorInventory& inventory, const GeminiOptions& options) {
  const int64_t start = (std::max<int64_t>(inventory.largest_tensor_numel(), std::llround(options.min_chunk_size_m * (1 << 20))) +
                         options.search_interval - 1) / options.search_interval * options.search_interval;
  int64_t best = start, best_waste = -1;
  for (int64_t size = start; size <= start + std::llround(options.search_range_m * (1 << 20)); size += options.search_interval) {
    const int64_t waste = chunk_waste_elements(inventory, size);
    if (best_waste < 0 || waste < best_waste) {
      best_waste = waste;
      best = size;
    }
  }
  return best;
}

TEST(Chunks, FastSearchEqualsExhaustiveSearch) {
  for (const char* name : {"gpt2-medium", "llama-2-7b", "gpt2", "qwen2-0.5b"}) {
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
                       TensorInfo{"c", {2}, 1, TpSplit::replicated, false, -1}, TensorInfo{"d", {8}, 2, TpSplit::replicated, false, -1}};
  const ChunkLayout layout = pack_chunks(inventory, 8);  // [a] [b c] [d]
  EXPECT_EQ(peak_chunks_per_layer(layout, inventory, 3), 2);  // layer 0 holds [a] and [b c]
}

}  // namespace
}  // namespace tessera::planner
