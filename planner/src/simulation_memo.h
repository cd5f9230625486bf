// What the simulations of one plan search repeat from candidate to candidate,
// kept so that each is computed once: the GEMM times of a micro-batch's tokens
// on a tensor-parallel rank (every plugin, ZeRO stage and recompute mode of a
// layout and micro-batch runs the same GEMMs), each pipeline run (ZeRO
// stages 0 and 1 of a pipeline, for one, run the same passes), the stages'
// blocks and parameters of a pipeline layout, and the activation table of a
// profile and precision. Results are
// those of the computation they stand for, bit for bit. Valid for one model,
// cluster and SimulationSettings: one memo per search (search.cpp).
#pragma once

#include <bit>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "tessera/planner/activations.h"
#include "tessera/planner/gemm_model.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/simulate.h"

namespace tessera::planner {

class SimulationMemo {
 public:
  // matmul_seconds_by_layer for `tokens` on a rank of `tp`, computed by `compute` the first time.
  template <typename Compute>
  const std::vector<PassSeconds>& matmuls(int64_t tokens, int64_t tp, Precision precision, Compute compute) {
    const auto key = std::make_tuple(tokens, tp, precision);
    auto found = matmuls_.find(key);
    if (found == matmuls_.end()) found = matmuls_.emplace(key, compute()).first;
    return found->second;
  }

  // The makespan of the pipeline run whose inputs `key` holds (their bits), run by `run` the first time.
  template <typename Run>
  double makespan(const std::vector<uint64_t>& key, Run run) {
    auto found = makespans_.find(key);
    if (found == makespans_.end()) found = makespans_.emplace(key, run()).first;
    return found->second;
  }

  // stage_layouts(model, request): they depend on its stages, model chunks and tp only.
  const std::vector<StageShape>& stage_layouts(const Model& model, const EstimateRequest& request) {
    const auto key = std::make_tuple(request.layout.pp, request.plugin.model_chunks(), request.layout.tp);
    auto found = stage_layouts_.find(key);
    if (found == stage_layouts_.end()) found = stage_layouts_.emplace(key, planner::stage_layouts(model, request)).first;
    return found->second;
  }

  // activation_table(model.config, profile, precision).
  const ActivationTable& activation_table(const Model& model, ActivationProfile profile, Precision precision) {
    const auto key = std::make_pair(profile, precision);
    auto found = activation_tables_.find(key);
    if (found == activation_tables_.end()) found = activation_tables_.emplace(key, planner::activation_table(model.config, profile, precision)).first;
    return found->second;
  }

  static uint64_t bits(double value) { return std::bit_cast<uint64_t>(value); }

 private:
  std::map<std::tuple<int64_t, int64_t, Precision>, std::vector<PassSeconds>> matmuls_;
  std::map<std::vector<uint64_t>, double> makespans_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<StageShape>> stage_layouts_;
  std::map<std::pair<ActivationProfile, Precision>, ActivationTable> activation_tables_;
};

// simulate_step without trace events, drawing on and filling `memo`.
Result<StepSimulation> simulate_step(const Model& model, const ClusterSpec& cluster, const EstimateRequest& request, const MemoryEstimate& estimate,
                                     const SimulationSettings& settings, SimulationMemo& memo);

}  // namespace tessera::planner
