// The model's parameter tensors: name (Hugging Face naming), shape, owning
// layer, tensor-parallel split, in execution order. One inventory serves the
// planner's memory model, the chunk search and the engine's parameter
// allocation, so the planner and the engine count the same parameters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/planner/model_config.h"

namespace tessera::planner {

// How tensor parallelism (Megatron-LM, Shoeybi et al. 2019 §3) splits a tensor.
enum class TpSplit {
  replicated,  // norms, position tables, row-parallel biases: every tp rank holds all of it
  split,       // column- or row-parallel matrices and column biases: numel / tp per rank
  vocab,       // vocab-parallel embedding / head: rows padded up to a multiple of tp, then split
};

// Where a tensor lives relative to the transformer blocks.
constexpr int kEmbeddingLayer = -1;  // token/position embeddings (first pipeline stage)
// Blocks are 0..num_layers-1; the final norm and the head use layer == num_layers.

struct TensorInfo {
  std::string name;             // e.g. "transformer.h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;   // as stored by Hugging Face (GPT-2's Conv1D is (in, out))
  int layer = 0;                // kEmbeddingLayer, a block index, or num_layers
  TpSplit tp_split = TpSplit::replicated;
  bool is_matmul_weight = false;  // enters a GEMM: counts for FLOPs
  int tied_to = -1;             // index of the tensor this one shares storage with, or -1
  // Where tensor parallelism cuts a split or vocab tensor (tensor_parallel.h):
  // the dimension divided over the tp ranks (a column-parallel layer's output
  // features, a row-parallel one's input features, the vocabulary's rows), and
  // how many equal parts along it are divided separately (3 for GPT-2's fused
  // q | k | v, so that each rank holds its heads of all three).
  int tp_dim = 0;
  int tp_parts = 1;
  // A pipeline's last-stage copy of a tied embedding (pipeline_stage_model.h):
  // a parameter of its own there, kept equal to the first stage's.
  bool tied_copy = false;

  int64_t numel() const;
};

struct TensorInventory {
  std::vector<TensorInfo> tensors;  // execution order; a tied tensor appears at each use
  // The unique tensors (indices into tensors) in torch's model.parameters()
  // order (module_order.h); empty for a hand-made inventory, which means
  // execution order.
  std::vector<int> module_order;

  // Unique parameters: a tied tensor is counted once.
  int64_t parameter_count() const;
  // Largest single unique tensor (the chunk size lower bound).
  int64_t largest_tensor_numel() const;
};

TensorInventory build_tensor_inventory(const ModelConfig& config);

}  // namespace tessera::planner
