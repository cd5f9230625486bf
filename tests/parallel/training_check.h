// What the multi-rank training tests share: a failure counter, the options of
// a short fp32 run on the shipped text, training into a run directory (rank 0
// of the world holds it), reading the model a run saved, and how far two
// models are apart, and the ledger's peaks against the planner's estimate.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/cpu_run_request.h"
#include "tessera/engine/run_directory.h"
#include "tessera/engine/safetensors.h"
#include "tessera/engine/trainer.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/sharding.h"

namespace tessera::training_check {

inline int failures = 0;

inline void expect(bool ok, const std::string& what, int rank) {
  if (ok) return;
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  ++failures;
}

// 5 steps of `micro_batches` micro-batches of one 32-token sequence, seed 7.
inline engine::TrainOptions short_run(const planner::PluginOptions& plugin, int64_t micro_batches, planner::Precision precision) {
  engine::TrainOptions o;
  o.precision = precision;
  o.micro_batch_size = 1;
  o.seq_len = 32;
  o.num_micro_batches = micro_batches;
  o.steps = 5;
  o.seed = 7;
  o.log_every = 100;
  o.data_path = std::string(TESSERA_SOURCE_DIR) + "/data/text/kjv-genesis-exodus.txt";
  o.plugin = plugin;
  return o;
}

// Trains into DIR and returns the metrics. Rank 0 of `world` (or of `group`
// without one, or the only rank) holds the run directory.
inline Result<engine::TrainMetrics> train_into(const std::string& dir, engine::TrainOptions o, engine::comm::Communicator* group,
                                               const planner::Model& model, engine::comm::Communicator* world = nullptr) {
  std::optional<engine::RunDirectory> run_directory;
  engine::comm::Communicator* leader_group = world != nullptr ? world : group;
  if (leader_group == nullptr || leader_group->rank() == 0) {
    auto opened = engine::RunDirectory::open(dir);
    if (!opened) return opened.error();
    run_directory.emplace(std::move(opened).value());
    o.run_directory = &run_directory.value();
  } else {
    o.run_directory_path = dir;
  }
  o.data_parallel_group = group;
  o.world_group = world;
  std::ostringstream log;
  return engine::train(model, o, log, false);
}

// DIR/model.safetensors, tensor by tensor in flat order (NaN where one is missing).
inline std::vector<std::vector<float>> read_model(const std::string& dir, const planner::Model& model) {
  auto reader = engine::SafetensorsReader::open(dir + "/model.safetensors").value();
  std::vector<std::vector<float>> tensors;
  for (const auto& flat : planner::flat_parameter_order(model.inventory)) {
    const auto& info = model.inventory.tensors[static_cast<size_t>(flat.tensor_index)];
    tensors.emplace_back(static_cast<size_t>(flat.numel));
    if (!reader.read(info.name, info.shape, tensors.back().data())) tensors.back().assign(tensors.back().size(), NAN);
  }
  return tensors;
}

// ‖a − b‖ / ‖b‖ over every tensor.
inline double relative_difference(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double diff = 0, norm = 0;
  for (size_t t = 0; t < a.size(); ++t) {
    for (size_t i = 0; i < a[t].size(); ++i) {
      diff += std::pow(static_cast<double>(a[t][i]) - b[t][i], 2);
      norm += std::pow(static_cast<double>(b[t][i]), 2);
    }
  }
  return std::sqrt(diff / norm);
}

// A directory of this run's own under the temporary directory (rank 0's
// process id, sent to every rank), so that no other test can share it.
inline std::string run_root(engine::comm::Communicator& world, const std::string& name) {
  double run_id = world.rank() == 0 ? static_cast<double>(::getpid()) : 0.0;
  (void)world.broadcast(&run_id, &run_id, 1, engine::comm::DataType::f64, 0);
  return std::filesystem::temp_directory_path().string() + "/tessera-" + name + "-" + std::to_string(world.size()) + "-" +
         std::to_string(static_cast<int64_t>(run_id));
}

// The test's exit status on every rank: 0 when no rank failed.
inline int finish(engine::comm::Communicator& world, const std::string& root) {
  double total = failures;
  (void)world.all_reduce(&total, &total, 1, engine::comm::DataType::f64, engine::comm::ReduceOp::sum);
  std::error_code ignored;
  if (world.rank() == 0) std::filesystem::remove_all(root, ignored);
  return total == 0 ? 0 : 1;
}

// Rank 0 of a parallel run that trained `dir` for 5 steps (its model then
// `after_five`, its metrics `parallel`) and resumed it to 7: one process
// trains the same global batch (`micro_batches` micro-batches a step) for 5
// and for 7 steps, and the parameters and the final loss must agree within
// `tolerance` of their norm.
inline void expect_one_process_agrees(const std::string& name, const std::string& dir, const std::vector<std::vector<float>>& after_five,
                                      const engine::TrainMetrics& parallel, int64_t micro_batches, planner::Precision precision,
                                      const planner::Model& model, double tolerance) {
  planner::PluginOptions one_rank;
  one_rank.kind = planner::PluginKind::torch_ddp;
  engine::TrainOptions single = short_run(one_rank, micro_batches, precision);
  const std::string single_dir = dir + "-one-rank";
  auto five = train_into(single_dir + "-5", single, nullptr, model);
  single.steps = 7;
  auto seven = train_into(single_dir + "-7", single, nullptr, model);
  expect(five.ok() && seven.ok(), name + " on one rank failed", 0);
  if (!five.ok() || !seven.ok()) return;
  const double five_apart = relative_difference(after_five, read_model(single_dir + "-5", model));
  const double seven_apart = relative_difference(read_model(dir, model), read_model(single_dir + "-7", model));
  std::printf("%s: parameters differ from one process's by %.3g of their norm after 5 steps, %.3g after a resume to 7\n", name.c_str(), five_apart,
              seven_apart);
  expect(five_apart < tolerance, name + ": parameters after 5 steps differ by " + std::to_string(five_apart), 0);
  expect(seven_apart < tolerance, name + ": parameters after the resume differ by " + std::to_string(seven_apart), 0);
  expect(std::abs(parallel.loss.back() - five->loss.back()) < tolerance * five->loss.back(), name + ": the final loss differs", 0);
}

// The planner's request for a run of `o` on `layout`: its plugin, precision,
// batch and recompute mode, as the tests hold the ledger to it.
inline planner::EstimateRequest estimate_request(const engine::TrainOptions& o, const planner::ParallelLayout& layout) {
  planner::EstimateRequest r;
  r.layout = layout;
  r.plugin = o.plugin;
  r.training.precision = o.precision;
  r.training.micro_batch_size = o.micro_batch_size;
  r.training.seq_len = o.seq_len;
  r.training.num_micro_batches = o.num_micro_batches;
  r.training.recompute = o.recompute;
  return r;
}

// Every device category's peak in `ledger` (rank `rank`'s run of `o` on
// `layout`) equals the planner's estimate for that rank, as `tessera train`
// asks for it (the tessera activations, AdamW). Returns that rank's row of the estimate (none: a failure).
inline std::optional<planner::RankMemory> expect_planned_peaks(const std::string& name, const planner::Model& model, const engine::TrainOptions& o, const planner::ParallelLayout& layout,
                                 const engine::MemoryLedger& ledger, int rank) {
  planner::EstimateRequest r = estimate_request(o, layout);
  r.training.activation_profile = planner::ActivationProfile::tessera;
  r.training.optimizer = planner::OptimizerKind::adamw;
  const planner::MemoryEstimate estimate = planner::estimate_memory(model, planner::load_gpu("h100-80g").value(), engine::cpu_run_request(r, model.config)).value();
  const planner::RankMemory* row = nullptr;
  for (const planner::RankMemory& candidate : estimate.ranks) {
    if (candidate.first_rank <= rank && rank <= candidate.last_rank) row = &candidate;
  }
  if (row == nullptr) {
    expect(false, name + ": the estimate has no row for rank " + std::to_string(rank), rank);
    return std::nullopt;
  }
  for (MemoryCategory category : {MemoryCategory::parameters, MemoryCategory::master_weights, MemoryCategory::gradients,
                                          MemoryCategory::optimizer_states, MemoryCategory::activations, MemoryCategory::logits,
                                          MemoryCategory::comm_buffers, MemoryCategory::workspace}) {
    const int64_t measured = ledger.peak(category, MemorySpace::device), planned = row->bytes[category].device;
    expect(measured == planned, name + ": " + std::string(to_string(category)) + " peaked at " + std::to_string(measured) + " bytes, the planner says " +
                                    std::to_string(planned), rank);
  }
  return *row;
}

}  // namespace tessera::training_check
