// What the GPU step saves and resumes under tensor or pipeline parallelism
// (engine/src/cuda/gpu_train.cpp), checked on the CPU by the multi-rank
// training tests (tensor_parallel_training_test.cpp,
// pipeline_parallel_training_test.cpp): the CPU run's committed checkpoint,
// loaded by each rank into a host copy of its optimizer as the GPU loop loads
// it (flat_checkpoint.h's FlatAdamWState of its stage's tensor-parallel part,
// the stage holding `chunks` model chunks under the interleaved schedule,
// or at hybrid_parallel's ZeRO stage 1 or 2 its shard of it,
// planner::optimizer_layout over the dp group; load_flat_checkpoint of the
// stage's tensors), and written back as the GPU loop writes it
// (write_consolidated_checkpoint over the same groups) gives the CPU's bytes.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "tessera/engine/consolidated_checkpoint.h"
#include "tessera/engine/flat_checkpoint.h"
#include "tessera/engine/parallel/process_groups.h"
#include "tessera/engine/run_directory.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/pipeline_stage_model.h"
#include "tessera/planner/tensor_parallel.h"
#include "training_check.h"

namespace tessera::training_check {

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void check_gpu_host_copy(engine::comm::Communicator& world, const engine::ProcessGroups& groups, const planner::Model& model,
                                const planner::PluginOptions& plugin, const std::string& dir, const std::string& name, int64_t chunks = 1) {
  const int rank = world.rank();
  std::optional<engine::CommittedCheckpoint> committed;
  for (int reader = 0; reader < world.size(); ++reader) {  // one writer's lock at a time
    if (rank == reader) {
      auto directory = engine::RunDirectory::open(dir);
      auto found = directory.ok() ? directory->committed() : Result<std::optional<engine::CommittedCheckpoint>>(directory.error());
      if (found.ok()) committed = found.value();
    }
    if (!world.barrier().ok()) return expect(false, name + ": barrier", rank);
  }
  expect(committed.has_value(), name + ": the committed checkpoint", rank);
  if (!committed) return;
  const int64_t tp = groups.tensor->size(), pp = groups.pipeline->size();
  const planner::Model stage = planner::stage_model(model, planner::PipelinePlacement{pp, groups.coordinates.pp_rank, chunks});
  const planner::Model part = planner::tp_rank_model(stage, tp);
  engine::FlatAdamWState state(planner::optimizer_layout(part, plugin, groups.data->size(), groups.data->rank()));
  auto loaded = engine::load_flat_checkpoint(*committed, stage, state, engine::TensorParallelRank{tp, groups.coordinates.tp_rank});
  expect(loaded.ok(), name + ": the GPU step's host copy loads its part: " + (loaded.ok() ? "" : loaded.error().message), rank);
  if (!loaded.ok()) return;
  const std::string copy = dir + "-gpu-host-copy";
  if (rank == 0) std::filesystem::create_directories(copy);
  if (!world.barrier().ok()) return expect(false, name + ": barrier", rank);
  engine::comm::Communicator* pipeline = pp > 1 ? groups.pipeline.get() : nullptr;
  auto files = engine::write_consolidated_checkpoint({*groups.data, *groups.tensor, pipeline, world, chunks}, state, part, stage, model, plugin,
                                                     planner::OptimizerKind::adamw, copy, loaded.value());
  expect(files.ok(), name + ": the GPU step's consolidated save: " + (files.ok() ? "" : files.error().message), rank);
  if (rank != 0 || !files.ok()) return;
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    expect(file_bytes(copy + "/" + file) == file_bytes(committed->file(file)), name + ": the GPU step's " + file + " is the CPU run's, byte for byte", rank);
  }
}

}  // namespace tessera::training_check
