#include "tessera/planner/model.h"

#include <algorithm>

namespace tessera::planner {

void ParamTotals::add(const TensorInfo& tensor) {
  if (tensor.is_matmul_weight) {
    matmul_weights += tensor.numel();
    if (tensor.tp_split == TpSplit::split) matmul_split += tensor.numel();
    if (tensor.tp_split == TpSplit::vocab) matmul_vocab_width += tensor.shape[1];
  }
  switch (tensor.tp_split) {
    case TpSplit::replicated: replicated += tensor.numel(); break;
    case TpSplit::split: split += tensor.numel(); break;
    case TpSplit::vocab:
      vocab_rows = tensor.shape[0];
      vocab_width += tensor.shape[1];
      break;
  }
}

ParamTotals& ParamTotals::operator+=(const ParamTotals& other) {
  replicated += other.replicated;
  split += other.split;
  vocab_width += other.vocab_width;
  vocab_rows = std::max(vocab_rows, other.vocab_rows);
  matmul_weights += other.matmul_weights;
  matmul_split += other.matmul_split;
  matmul_vocab_width += other.matmul_vocab_width;
  return *this;
}

Model make_model(ModelConfig config) {
  TensorInventory inventory = build_tensor_inventory(config);
  return make_model(std::move(config), std::move(inventory));
}

Model make_model(ModelConfig config, TensorInventory inventory) {
  Model model;
  model.inventory = std::move(inventory);
  model.config = std::move(config);
  const int L = static_cast<int>(model.config.num_layers);
  model.blocks.resize(static_cast<size_t>(L));
  for (const TensorInfo& t : model.inventory.tensors) {
    if (t.tied_to >= 0) {
      model.tied_head.add(t);
    } else if (t.layer == kEmbeddingLayer) {
      model.embedding.add(t);
    } else if (t.layer >= L) {
      model.head.add(t);
    } else {
      model.blocks[static_cast<size_t>(t.layer)].add(t);
    }
  }
  model.parameter_count = model.inventory.parameter_count();
  for (const ParamTotals& b : model.blocks) model.largest_block_numel = std::max(model.largest_block_numel, b.full());
  return model;
}

}  // namespace tessera::planner
