// The model's initial weights, element by element in the flat order
// (planner/sharding.h), from one seed: GPT-2's initialisation (Radford et al.
// 2019 §2.3): N(0, 0.02), residual projections scaled by 1/sqrt(2L); norms
// start at 1, biases at 0. A rank that keeps only a shard walks the same
// sequence and keeps its part, so every layout starts from the same weights.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tessera/planner/model.h"
#include "tessera/planner/pipeline_stage_model.h"
#include "tessera/planner/sharding.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::engine {

// Calls set(flat_index, value) for every parameter element, in flat order.
template <typename Set>
void for_each_initial_value(const planner::Model& model, uint64_t seed, Set&& set) {
  std::mt19937_64 rng(seed);
  const double std_dev = 0.02, residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(model.config.num_layers));
  for (const planner::FlatParameter& flat : planner::flat_parameter_order(model.inventory)) {
    const planner::TensorInfo& info = model.inventory.tensors[static_cast<size_t>(flat.tensor_index)];
    // 1-D tensors are norm weights (start at 1) and biases (start at 0); the rest are matrices.
    const bool vector = info.shape.size() == 1;
    const bool bias = info.name.ends_with(".bias");
    const bool residual = info.name.find("c_proj.weight") != std::string::npos || info.name.find("o_proj.weight") != std::string::npos ||
                          info.name.find("down_proj.weight") != std::string::npos;
    std::normal_distribution<double> normal(0.0, residual ? residual_std : std_dev);
    for (int64_t j = 0; j < flat.numel; ++j) set(flat.offset + j, vector ? (bias ? 0.0 : 1.0) : normal(rng));
  }
}

// The initial weights of tensor-parallel rank `rank` of `tp`
// (planner/tensor_parallel.h): each element of its part takes the value of the
// whole model's element, so that every tp size starts from the same model;
// padding rows of the vocabulary start at 0. Calls set(local_index, value) in
// the flat order of the rank's own inventory (planner::tp_rank_inventory).
template <typename Set>
void for_each_initial_value_of_tp_rank(const planner::Model& model, uint64_t seed, int64_t tp, int64_t rank, Set&& set) {
  if (tp == 1) return for_each_initial_value(model, seed, set);
  std::vector<double> whole(static_cast<size_t>(model.inventory.parameter_count()));
  for_each_initial_value(model, seed, [&whole](int64_t i, double value) { whole[static_cast<size_t>(i)] = value; });
  const std::vector<planner::FlatParameter> full_order = planner::flat_parameter_order(model.inventory);
  const std::vector<planner::FlatParameter> local_order = planner::flat_parameter_order(planner::tp_rank_inventory(model.inventory, tp));
  for (size_t k = 0; k < full_order.size(); ++k) {
    const planner::TensorInfo& tensor = model.inventory.tensors[static_cast<size_t>(full_order[k].tensor_index)];
    planner::for_each_tp_element(tensor, tp, rank, [&](int64_t local, int64_t full) {
      set(local_order[k].offset + local, full < 0 ? 0.0 : whole[static_cast<size_t>(full_order[k].offset + full)]);
    });
  }
}

// The initial weights of one pipeline stage's tensor-parallel part, in the
// flat order of its inventory (tp_rank_inventory of stage_inventory): each
// tensor takes the values of the tensor of the same name in the tp rank's
// whole model, so a last stage's copy of a tied embedding starts equal to it.
template <typename Set>
void for_each_initial_value_of_part(const planner::Model& model, uint64_t seed, int64_t tp, int64_t rank, const planner::PipelinePlacement& stage,
                                    Set&& set) {
  if (stage.pp == 1) return for_each_initial_value_of_tp_rank(model, seed, tp, rank, set);
  const planner::TensorInventory whole = planner::tp_rank_inventory(model.inventory, tp);
  std::vector<double> values(static_cast<size_t>(whole.parameter_count()));
  for_each_initial_value_of_tp_rank(model, seed, tp, rank, [&values](int64_t i, double value) { values[static_cast<size_t>(i)] = value; });
  std::map<std::string, int64_t> offset_of;
  for (const planner::FlatParameter& flat : planner::flat_parameter_order(whole)) offset_of[whole.tensors[static_cast<size_t>(flat.tensor_index)].name] = flat.offset;
  const planner::TensorInventory part = planner::tp_rank_inventory(planner::stage_inventory(model.inventory, model.config.num_layers, stage), tp);
  for (const planner::FlatParameter& flat : planner::flat_parameter_order(part)) {
    const int64_t from = offset_of.at(part.tensors[static_cast<size_t>(flat.tensor_index)].name);
    for (int64_t j = 0; j < flat.numel; ++j) set(flat.offset + j, values[static_cast<size_t>(from + j)]);
  }
}

}  // namespace tessera::engine
