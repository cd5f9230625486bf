// Pipeline parallelism in training, under mpirun (-np 2, 4 and 8):
// hybrid_parallel layouts of dp × tp × pp ranks — GPipe, 1F1B and
// interleaved 1F1B, uneven splits, tied embeddings kept in sync between the
// first and the last stage, with and without sequence parallelism, ZeRO 0 and
// 1 — train 5 steps and leave the same parameters as one process training the
// same global batch; the consolidated checkpoint they write resumes in the
// same layout. Each stage's sends are the stated formula (planner/pp_traffic.h).
// Where the GPU step runs the layout, its host copy of the checkpoint loads
// and writes back the same bytes (gpu_host_copy.h).
//
// Tolerance, fp32: as tensor_parallel_training_test, 1e-5 of the parameters'
// norm (issue 13): the stages accumulate the tied embedding's two gradients
// and the tensor-parallel partial sums in another order than one process.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/engine/comm/mpi.h"
#include "tessera/engine/parallel/process_groups.h"
#include "tessera/planner/pp_traffic.h"
#include "tessera/planner/registry.h"
#include "gpu_host_copy.h"
#include "training_check.h"

namespace {

using namespace tessera;
using namespace tessera::engine;
using training_check::expect;

struct Layout {
  const char* model;
  int64_t layers;  // the shipped model's blocks, or more (a deeper copy of its config)
  int64_t tp, pp;
  planner::PipelineSchedule schedule;
  int64_t chunks = 1;
  bool sequence_parallel = false;
  int zero_stage = 0;
  int64_t recomputed_blocks = 0;  // --recompute full --recompute-num-layers: the first of each chunk; 0: no recompute
};

std::string name_of(const Layout& c, int64_t dp) {
  return std::string(c.model) + " (" + std::to_string(c.layers) + " blocks) dp " + std::to_string(dp) + " × tp " + std::to_string(c.tp) + " × pp " +
         std::to_string(c.pp) + (c.sequence_parallel ? " + sp" : "") + ", " + std::string(enum_name(c.schedule)) +
         (c.chunks > 1 ? " × " + std::to_string(c.chunks) : "") + ", zero " + std::to_string(c.zero_stage) +
         (c.recomputed_blocks > 0 ? ", " + std::to_string(c.recomputed_blocks) + " blocks a stage recomputed" : "");
}

// The shipped model, or its config with more blocks, written under `root` by rank 0.
planner::Model model_of(comm::Communicator& world, const Layout& c, const std::string& root) {
  planner::Model shipped = planner::load_model(c.model).value();
  if (shipped.config.num_layers == c.layers) return shipped;
  const std::string path = root + "/" + c.model + "-" + std::to_string(c.layers) + ".json";
  if (world.rank() == 0) {
    nlohmann::json config = nlohmann::json::parse(planner::model_config_text(c.model).value());
    config[config.contains("n_layer") ? "n_layer" : "num_hidden_layers"] = c.layers;
    std::ofstream(path) << config.dump(2);
  }
  (void)world.barrier();
  return planner::load_model(path).value();
}

void check(comm::Communicator& world, const Layout& c, const std::string& root) {
  const int rank = world.rank();
  const int64_t dp = world.size() / (c.tp * c.pp), k = 4;  // 4 micro-batches: a multiple of pp, as interleaving needs
  const std::string name = name_of(c, dp);
  const planner::Model model = model_of(world, c, root);
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::hybrid_parallel;
  plugin.zero_stage = c.zero_stage;
  plugin.pp_schedule = c.schedule;
  plugin.num_model_chunks = c.chunks;
  plugin.reduce_bucket_numel = 20000;
  const planner::ParallelLayout layout{dp, c.tp, c.pp, c.sequence_parallel};
  auto groups = make_process_groups(world, layout);
  if (!groups.ok()) return expect(false, name + ": " + groups.error().message, rank);
  TrainOptions o = training_check::short_run(plugin, k, planner::Precision::fp32);
  o.tensor_parallel_group = groups->tensor.get();
  o.pipeline_parallel_group = groups->pipeline.get();
  o.pipeline_schedule = c.schedule;
  o.model_chunks = c.chunks;
  o.sequence_parallel = c.sequence_parallel;
  if (c.recomputed_blocks > 0) {
    o.recompute = planner::RecomputeMode::full;
    o.recompute_num_layers = c.recomputed_blocks;
  }
  const std::string dir = root + "/" + c.model + "-" + std::to_string(c.layers) + "-" + std::to_string(dp) + "x" + std::to_string(c.tp) + "x" +
                          std::to_string(c.pp) + (c.sequence_parallel ? "-sp-" : "-") + std::string(enum_name(c.schedule)) + std::to_string(c.chunks) +
                          "-zero" + std::to_string(c.zero_stage) + "-recompute" + std::to_string(c.recomputed_blocks);
  auto parallel = training_check::train_into(dir, o, groups->data.get(), model, &world);
  expect(parallel.ok(), name + ": " + (parallel.ok() ? "" : parallel.error().message), rank);
  if (!parallel.ok()) return;
  // The stage's sends over 5 steps (the pipeline group carries nothing else but the gradient norm's one all-reduce a step).
  const int64_t steps = 5;
  const planner::CollectiveCalls sends = planner::stage_sends_per_step(
      c.pp, groups->coordinates.pp_rank, c.chunks, k, planner::stage_boundary_bytes(o.micro_batch_size, o.seq_len, model.config.hidden_size, o.precision, layout));
  const comm::CommCounters& moved = parallel->pipeline_parallel_communication;
  expect(moved.calls_of(comm::Collective::send) == steps * sends.calls && moved.bytes_of(comm::Collective::send) == steps * sends.bytes &&
             moved.calls_of(comm::Collective::recv) == steps * sends.calls && moved.bytes_of(comm::Collective::recv) == steps * sends.bytes,
         name + ": the stage sent " + std::to_string(moved.calls_of(comm::Collective::send)) + " messages of " +
             std::to_string(moved.bytes_of(comm::Collective::send)) + " bytes and received " + std::to_string(moved.calls_of(comm::Collective::recv)) +
             "; the formula says " + std::to_string(steps * sends.calls) + " of " + std::to_string(steps * sends.bytes) + " each way",
         rank);
  const auto saved_after_five = rank == 0 ? training_check::read_model(dir, model) : std::vector<std::vector<float>>{};
  // Resumed for 2 more steps in the same layout: each stage loads its tensors of the consolidated checkpoint.
  o.steps = 7;
  o.resume = true;
  auto resumed = training_check::train_into(dir, o, groups->data.get(), model, &world);
  expect(resumed.ok(), name + ", resumed: " + (resumed.ok() ? "" : resumed.error().message), rank);
  // The layouts the GPU step runs (a pipeline with data and tensor parallelism, GPipe, 1F1B or interleaved, ZeRO stage 0 or 1): its checkpoints are these.
  training_check::check_gpu_host_copy(world, groups.value(), model, plugin, dir, name, c.chunks);
  if (rank != 0) return;
  // One process, the same global batch: dp · k micro-batches.
  training_check::expect_one_process_agrees(name, dir, saved_after_five, parallel.value(), dp * k, planner::Precision::fp32, model, 1e-5);
}

}  // namespace

int main() {
  auto runtime = comm::MpiRuntime::start().value();
  auto world = runtime->world().value();
  const std::string root = training_check::run_root(*world, "pipeline-parallel-training");
  if (world->rank() == 0) std::filesystem::create_directories(root);
  (void)world->barrier();
  using S = planner::PipelineSchedule;
  std::vector<Layout> layouts;
  if (world->size() == 2) {
    layouts = {{"tiny-gpt2", 2, 1, 2, S::gpipe},
               {"tiny-gpt2", 2, 1, 2, S::one_f_one_b},
               {"tiny-llama", 3, 1, 2, S::one_f_one_b},  // uneven: 1 and 2 blocks
               {"tiny-gpt2", 4, 1, 2, S::interleaved, 2},
               {"tiny-llama", 4, 1, 2, S::interleaved, 2},
               {"tiny-llama", 6, 1, 2, S::one_f_one_b, 1, false, 0, 2}};  // 2 of each stage's 3 blocks recomputed whole
  } else if (world->size() == 4) {
    layouts = {{"tiny-llama", 2, 2, 2, S::one_f_one_b},
               {"tiny-gpt2", 2, 2, 2, S::one_f_one_b, 1, true},
               {"tiny-llama", 4, 1, 4, S::one_f_one_b},
               {"tiny-gpt2", 8, 1, 4, S::interleaved, 2},
               {"tiny-gpt2", 2, 1, 2, S::one_f_one_b, 1, false, 1},
               {"tiny-gpt2", 2, 1, 2, S::gpipe}};  // dp 2 × pp 2 as the GPU step runs it
  } else {
    layouts = {{"tiny-llama", 2, 2, 2, S::one_f_one_b, 1, false, 1}, {"tiny-gpt2", 4, 2, 2, S::interleaved, 2, true, 1}};
  }
  for (const Layout& layout : layouts) check(*world, layout, root);
  return training_check::finish(*world, root);
}
