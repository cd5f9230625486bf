// Chunk-by-chunk placement agrees with the fractions the memory model counts.
#include <gtest/gtest.h>

#include "tessera/planner/chunk_placement.h"

namespace tessera::planner {

TEST(ChunkPlacement, ChunksFollowTheSummarysPlacementAndGathering) {
  GeminiSummary g;
  g.chunk_size = 1000;
  g.chunk_used = {1000, 900, 800, 1000, 700, 1000, 1000, 600};
  g.chunk_capacity.assign(8, 1000);
  g.num_chunks = 8;
  g.chunks_of_layer = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};  // one chunk per layer slot
  g.kept_gathered_elements = 2000;                                  // two chunks besides the head's stay gathered
  g.set_parameters_on_host({false, false, false, false, false, true, true, true});
  g.optimizer_chunks_on_host = 2;
  const std::vector<ChunkPlacement> chunks = gemini_chunk_placement(g, 4);
  ASSERT_EQ(chunks.size(), 8u);
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].kept_gathered, i >= 5) << i;
    EXPECT_EQ(chunks[i].parameters == MemorySpace::host, i >= 5) << i;
    EXPECT_EQ(chunks[i].optimizer_states == MemorySpace::host, i < 2) << i;
    EXPECT_EQ(chunks[i].used_elements + chunks[i].padding_elements, 1000);
    EXPECT_EQ(chunks[i].shard_elements, 250);
  }
  EXPECT_DOUBLE_EQ(g.offload_param_frac, 3.0 / 8);
}

TEST(ChunkPlacement, ALargerTensorsOwnChunkShardsByItsCapacity) {
  GeminiSummary g;
  g.chunk_size = 64;
  g.chunk_used = {100, 10};
  g.chunk_capacity = {104, 64};  // a 100-element tensor's own chunk, rounded up to dp 4
  const std::vector<ChunkPlacement> chunks = gemini_chunk_placement(g, 4);
  EXPECT_EQ(chunks[0].padding_elements, 4);
  EXPECT_EQ(chunks[0].shard_elements, 26);
  EXPECT_EQ(chunks[1].shard_elements, 16);
}

TEST(ChunkPlacement, CudaPolicyKeepsEverythingOnTheDevice) {
  GeminiSummary g;
  g.chunk_size = 64;
  g.chunk_used = {64, 10};
  g.chunk_capacity = {64, 64};
  for (const ChunkPlacement& c : gemini_chunk_placement(g, 2)) {
    EXPECT_EQ(c.parameters, MemorySpace::device);
    EXPECT_EQ(c.optimizer_states, MemorySpace::device);
    EXPECT_FALSE(c.kept_gathered);
  }
}

}  // namespace tessera::planner
