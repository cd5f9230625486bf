// Context parallelism in training, under mpirun (-np 2 and 4): hybrid_parallel
// layouts that split every 32-token sequence over cp ranks (ring attention,
// model/ring_attention.h), alone or beside data, tensor or pipeline
// parallelism, train 5 steps and leave the same parameters and loss as one
// process training the same global batch whole; the checkpoint they write is
// a data-parallel run's (the model is whole on every context rank) and a
// resume from it, in the same layout or on one process, continues the run.
// The ledger of every rank books, category by category, what the planner
// estimates for that rank (the ring's buffers among its activations), and the
// ring sends the blocks the planner counts.
//
// Tolerance, fp32: the ranks add the blocks' attention and the tokens'
// gradients in another order than one process does, so the parameters
// differ by rounding; over the whole model that stays below 1e-5 of their norm.
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/engine/comm/mpi.h"
#include "tessera/engine/parallel/process_groups.h"
#include "tessera/planner/context_parallel.h"
#include "tessera/planner/registry.h"
#include "training_check.h"

namespace {

using namespace tessera;
using namespace tessera::engine;
using training_check::expect;

struct Layout {
  const char* model;
  int64_t tp, pp, cp;
  bool sequence_parallel;
  int zero_stage;
  planner::RecomputeMode recompute = planner::RecomputeMode::none;
};

std::string name_of(const Layout& c, int64_t dp) {
  return std::string(c.model) + " dp " + std::to_string(dp) + " × tp " + std::to_string(c.tp) + (c.sequence_parallel ? " + sp" : "") + " × pp " +
         std::to_string(c.pp) + " × cp " + std::to_string(c.cp) + ", zero " + std::to_string(c.zero_stage) +
         ", recompute " + std::string(enum_name(c.recompute));
}

void check(comm::Communicator& world, const Layout& c, const std::string& root) {
  const int rank = world.rank();
  const int64_t dp = world.size() / (c.tp * c.pp * c.cp), k = 2;
  const std::string name = name_of(c, dp);
  const planner::Model model = planner::load_model(c.model).value();
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::hybrid_parallel;
  plugin.zero_stage = c.zero_stage;
  const planner::ParallelLayout layout{dp, c.tp, c.pp, c.sequence_parallel, c.cp};
  auto groups = make_process_groups(world, layout);
  if (!groups.ok()) return expect(false, name + ": " + groups.error().message, rank);
  TrainOptions o = training_check::short_run(plugin, k, planner::Precision::fp32);
  o.tensor_parallel_group = groups->tensor.get();
  o.sequence_parallel = c.sequence_parallel;
  o.pipeline_parallel_group = groups->pipeline.get();
  o.context_parallel_group = groups->context.get();
  o.recompute = c.recompute;
  const std::string dir = root + "/" + std::to_string(dp) + "x" + std::to_string(c.tp) + "x" + std::to_string(c.pp) + "x" + std::to_string(c.cp) + "-" + c.model +
                          (c.sequence_parallel ? "-sp" : "") + "-zero" + std::to_string(c.zero_stage) +
                          "-" + std::string(enum_name(c.recompute));
  auto parallel = training_check::train_into(dir, o, groups->data_context.get(), model, &world);
  expect(parallel.ok(), name + ": " + (parallel.ok() ? "" : parallel.error().message), rank);
  if (!parallel.ok()) return;
  // This rank's peaks per category: the planner's estimate for the layout.
  const std::optional<planner::RankMemory> row = training_check::expect_planned_peaks(name, model, o, layout, parallel->ledger, rank);
  if (!row) return;
  // The ring's sends over 5 steps of k micro-batches through this rank's blocks: planner/context_parallel.h's count, which the simulator times.
  const int64_t layers = row->last_layer - row->first_layer + 1, steps = 5;
  const planner::RingSends per_layer = planner::ring_sends(c.cp, c.recompute);
  const int64_t sends = steps * k * layers * (per_layer.forward + per_layer.backward);
  const int64_t bytes = sends * planner::ring_block_elements(o.micro_batch_size, o.seq_len / c.cp, model.config.kv_width(), c.tp) * 4;
  const comm::CommCounters& ring = groups->context->counters();
  expect(ring.calls_of(comm::Collective::send) == sends && ring.bytes_of(comm::Collective::send) == bytes,
         name + ": the ring sent " + std::to_string(ring.calls_of(comm::Collective::send)) + " blocks, " +
             std::to_string(ring.bytes_of(comm::Collective::send)) + " bytes; the planner counts " + std::to_string(sends) + ", " + std::to_string(bytes),
         rank);
  const auto saved_after_five = rank == 0 ? training_check::read_model(dir, model) : std::vector<std::vector<float>>{};
  // Resumed for 2 more steps in the same layout.
  o.steps = 7;
  o.resume = true;
  auto resumed = training_check::train_into(dir, o, groups->data_context.get(), model, &world);
  expect(resumed.ok(), name + ", resumed: " + (resumed.ok() ? "" : resumed.error().message), rank);
  if (rank != 0) return;
  // One process, the same global batch (dp · k micro-batches of whole sequences).
  training_check::expect_one_process_agrees(name, dir, saved_after_five, parallel.value(), dp * k, planner::Precision::fp32, model, 1e-5);
  // The checkpoint is a data-parallel run's: one process continues it on the same global batch.
  planner::PluginOptions one_rank;
  one_rank.kind = planner::PluginKind::torch_ddp;
  TrainOptions single = training_check::short_run(one_rank, dp * k, planner::Precision::fp32);
  single.steps = 8;
  single.resume = true;
  auto continued = training_check::train_into(dir, single, nullptr, model);
  expect(continued.ok() && continued->first_step == 8, name + ": one process resuming the checkpoint: " +
                                                           (continued.ok() ? "began at step " + std::to_string(continued->first_step) : continued.error().message),
         rank);
}

}  // namespace

int main() {
  auto runtime = comm::MpiRuntime::start().value();
  auto world = runtime->world().value();
  const std::string root = training_check::run_root(*world, "context-parallel-training");
  std::vector<Layout> layouts;
  if (world->size() == 2) {
    layouts = {{"tiny-gpt2", 1, 1, 2, false, 0}, {"tiny-llama", 1, 1, 2, false, 1, planner::RecomputeMode::full}};
  } else {
    layouts = {{"tiny-gpt2", 1, 1, 2, false, 1}, {"tiny-llama", 2, 1, 2, true, 0}, {"tiny-llama", 1, 1, 4, false, 0}, {"tiny-gpt2", 1, 2, 2, false, 1, planner::RecomputeMode::selective}};
  }
  for (const Layout& layout : layouts) check(*world, layout, root);
  return training_check::finish(*world, root);
}
