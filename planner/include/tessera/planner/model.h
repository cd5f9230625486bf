// A model as the planner sees it: the config, its tensor inventory, and
// per-layer parameter totals derived from that inventory (never counted twice).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/model_config.h"
#include "tessera/planner/tensor_inventory.h"

namespace tessera::planner {

// Parameters of a group of tensors, split the way tensor parallelism splits them.
struct ParamTotals {
  int64_t replicated = 0;   // numel every tp rank holds in full
  int64_t split = 0;        // numel divided evenly over the tp ranks
  int64_t vocab_width = 0;  // sum of the widths of vocab-parallel tensors (rows = vocab)
  int64_t vocab_rows = 0;
  int64_t matmul_weights = 0;  // numel of the weights that enter a GEMM (FLOPs), in full
  // Of those, the ones tp divides: split numel, and vocab-parallel widths (an untied head).
  int64_t matmul_split = 0;
  int64_t matmul_vocab_width = 0;

  // Elements one tp rank holds. Vocab-parallel rows are padded up to a multiple of tp
  // (Megatron-LM pads the vocabulary so that it divides the tp size).
  int64_t per_tp_rank(int64_t tp) const { return replicated + split / tp + padded_vocab_rows(tp) * vocab_width; }
  int64_t full() const { return per_tp_rank(1); }
  // Elements one tp rank holds that no GEMM's weight gradient produces: norms,
  // biases, embedding lookups.
  int64_t non_matmul_per_tp_rank(int64_t tp) const {
    const int64_t matmul_replicated = matmul_weights - matmul_split - vocab_rows * matmul_vocab_width;
    return per_tp_rank(tp) - (matmul_replicated + matmul_split / tp + padded_vocab_rows(tp) * matmul_vocab_width);
  }
  int64_t padded_vocab_rows(int64_t tp) const { return (vocab_rows + tp - 1) / tp; }
  void add(const TensorInfo& tensor);
  ParamTotals& operator+=(const ParamTotals& other);
};

struct Model {
  ModelConfig config;
  TensorInventory inventory;
  int64_t parameter_count = 0;      // unique parameters
  ParamTotals embedding;            // tensors before the first block
  std::vector<ParamTotals> blocks;  // one per transformer block
  ParamTotals head;                 // final norm, projection and head, without a tied alias
  ParamTotals tied_head;            // the head's size when it is tied to the embedding (else empty)
  int64_t largest_block_numel = 0;  // the largest block, in full (FSDP's largest wrapped unit)
};

Model make_model(ModelConfig config);
// The model of `inventory` (one tensor-parallel rank's, say) with the totals counted from it.
Model make_model(ModelConfig config, TensorInventory inventory);

}  // namespace tessera::planner
