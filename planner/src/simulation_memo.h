// What the estimates and simulations of one plan search repeat from candidate
// to candidate, kept so that each is computed once: the GEMM times of a
// micro-batch's tokens on a tensor-parallel rank (every plugin, ZeRO stage and
// recompute mode of a layout and micro-batch runs the same GEMMs), each
// pipeline run (ZeRO stages 0 and 1 of a pipeline, for one, run the same
// passes), the stages' blocks and parameters of a pipeline layout, the
// activation table of a profile and precision, and the micro-batches an
// interleaved stage holds at its peak. Results are
// those of the computation they stand for, bit for bit. Valid for one model,
// cluster and SimulationSettings: one memo per search (search.cpp).
#pragma once

#include <bit>
#include <cstdint>
#include <map>
#include <numeric>
#include <tuple>
#include <vector>

#include "tessera/planner/activations.h"
#include "tessera/planner/gemm_model.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/pipeline_stages.h"
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

  // The activation table of a profile, precision and transformers release, with
  // a runtime's loss (memory_model.cpp), computed by `compute` the first time.
  template <typename Compute>
  const ActivationTable& activation_table(ActivationProfile profile, Precision precision, TransformersVersion transformers, BlockAccounting block,
                                          LossAccounting loss, Compute compute) {
    const auto key = std::make_tuple(profile, precision, transformers, block, loss);
    auto found = activation_tables_.find(key);
    if (found == activation_tables_.end()) found = activation_tables_.emplace(key, compute()).first;
    return found->second;
  }

  // in_flight_at_peak under the interleaved schedule (the others compute it at
  // once). Its answer compares sums of bytes_per_pass, so it is the same for
  // them scaled by any positive factor: they are kept divided by their greatest
  // common divisor, and the recompute modes and micro-batch sizes of a layout
  // whose chunks hold as many blocks share one replay.
  const std::vector<int64_t>& in_flight_at_peak(int64_t pp, int64_t stage, int64_t num_micro_batches, int64_t chunks,
                                                const std::vector<int64_t>& bytes_per_pass) {
    const int64_t divisor = std::reduce(bytes_per_pass.begin(), bytes_per_pass.end(), int64_t{0}, [](int64_t a, int64_t b) { return std::gcd(a, b); });
    std::vector<int64_t> key{pp, stage, num_micro_batches, chunks};
    for (int64_t bytes : bytes_per_pass) key.push_back(divisor > 0 ? bytes / divisor : bytes);
    auto found = in_flight_.find(key);
    if (found == in_flight_.end()) {
      const std::vector<int64_t> scaled(key.begin() + 4, key.end());
      found = in_flight_.emplace(std::move(key), planner::in_flight_at_peak(PipelineSchedule::interleaved, pp, stage, num_micro_batches, chunks, scaled)).first;
    }
    return found->second;
  }

  static uint64_t bits(double value) { return std::bit_cast<uint64_t>(value); }

 private:
  std::map<std::tuple<int64_t, int64_t, Precision>, std::vector<PassSeconds>> matmuls_;
  std::map<std::vector<uint64_t>, double> makespans_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<StageShape>> stage_layouts_;
  std::map<std::tuple<ActivationProfile, Precision, TransformersVersion, BlockAccounting, LossAccounting>, ActivationTable> activation_tables_;
  std::map<std::vector<int64_t>, std::vector<int64_t>> in_flight_;
};

// estimate_memory, drawing on and filling `memo`.
Result<MemoryEstimate> estimate_memory(const Model& model, const GpuProfile& gpu, const EstimateRequest& request, SimulationMemo& memo);

// simulate_step without trace events, drawing on and filling `memo`.
Result<StepSimulation> simulate_step(const Model& model, const ClusterSpec& cluster, const EstimateRequest& request, const MemoryEstimate& estimate,
                                     const SimulationSettings& settings, SimulationMemo& memo);

}  // namespace tessera::planner
