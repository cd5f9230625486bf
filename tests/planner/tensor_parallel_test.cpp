// One tp rank's part of each parameter (tensor_parallel.h): its size is what
// the memory model counts, the ranks' parts cover each tensor exactly once,
// and GPT-2's fused c_attn gives each rank its heads of q, k and v.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/planner/registry.h"
#include "tessera/planner/tensor_parallel.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using testing::shipped_model;

TEST(TensorParallel, EveryRanksPartIsWhatTheMemoryModelCounts) {
  for (const std::string& name : shipped_model_names()) {
    const Model model = shipped_model(name);
    const ParamTotals totals = testing::whole_model_totals(model);
    for (int64_t tp : {1, 2, 4, 8}) {
      if (!tp_divides_model(model.config, tp)) continue;
      EXPECT_EQ(tp_rank_inventory(model.inventory, tp).parameter_count(), totals.per_tp_rank(tp)) << name << " at tp " << tp;
    }
  }
}

TEST(TensorParallel, TheRanksPartsCoverEveryElementOnce) {
  for (const char* name : {"tiny-gpt2", "tiny-llama"}) {
    const Model model = shipped_model(name);
    for (int64_t tp : {2, 4}) {
      for (const TensorInfo& tensor : model.inventory.tensors) {
        std::vector<int> seen(static_cast<size_t>(tensor.numel()), 0);
        int64_t padding = 0;
        for (int64_t rank = 0; rank < tp; ++rank) {
          for_each_tp_element(tensor, tp, rank, [&](int64_t, int64_t full) {
            if (full < 0) ++padding;
            else ++seen[static_cast<size_t>(full)];
          });
        }
        const int copies = tensor.tp_split == TpSplit::replicated ? static_cast<int>(tp) : 1;
        for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], copies) << name << " " << tensor.name << " element " << i << " at tp " << tp;
        const int64_t rows = tensor.shape[0], padded_rows = (rows + tp - 1) / tp * tp;
        EXPECT_EQ(padding, tensor.tp_split == TpSplit::vocab ? (padded_rows - rows) * tensor.shape[1] : 0) << tensor.name;
      }
    }
  }
}

const TensorInfo& named(const Model& model, const std::string& name) {
  for (const TensorInfo& tensor : model.inventory.tensors) {
    if (tensor.name == name) return tensor;
  }
  throw std::runtime_error("no tensor " + name);
}

TEST(TensorParallel, GptTwoFusedQkvGivesEachRankItsHeadsOfAllThree) {
  const Model model = shipped_model("tiny-gpt2");
  const int64_t C = model.config.hidden_size;
  const TensorInfo& c_attn = named(model, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(tp_local_shape(c_attn, 2), (std::vector<int64_t>{C, 3 * C / 2}));
  std::vector<int64_t> first_row;
  for_each_tp_element(c_attn, 2, 1, [&](int64_t local, int64_t full) {
    if (local < 3 * C / 2) first_row.push_back(full);
  });
  // Rank 1: the second half of the queries, then of the keys, then of the values.
  EXPECT_EQ(first_row[0], C / 2);
  EXPECT_EQ(first_row[static_cast<size_t>(C / 2)], C + C / 2);
  EXPECT_EQ(first_row[static_cast<size_t>(C)], 2 * C + C / 2);
  const TensorInfo& c_proj = named(model, "transformer.h.0.attn.c_proj.weight");  // row-parallel: input rows split
  EXPECT_EQ(tp_local_shape(c_proj, 2), (std::vector<int64_t>{C / 2, C}));
}

}  // namespace
}  // namespace tessera::planner
