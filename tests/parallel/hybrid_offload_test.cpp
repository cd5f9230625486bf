// hybrid_parallel's ZeRO-Offload (--cpu-offload at --zero-stage 1 or 2) on
// the CPU engine, under mpirun (-np 2: dp 2; -np 4: tp 2 × dp 2, and pp 2 ×
// dp 2 at ZeRO-1). Each layout trains 5 steps with the optimizer on the device
// and 5 with it offloaded (parallel/data_parallel.h: the fp32 master weights,
// states and gradient shard of each rank's part on the host), then 3 offloaded
// steps resumed to 5. Checked on every rank:
//  - the offloaded run's losses and gradient norms are the same doubles as
//    the run without offload, and its checkpoint the same files, byte for
//    byte (the same format, and the same weights and states): offloading
//    only moves the optimizer, whose gradients it widens to fp32 exactly and
//    whose arithmetic is the same;
//  - the resumed offloaded run's checkpoint is the straight one's, byte for byte;
//  - the ledger's peaks of the model states' categories (parameters,
//    gradients, master weights, optimizer states, comm buffers) on the
//    device and on the host are the planner's estimate of the same run
//    (planner/memory_model.cpp, add_zero_states), this rank's stage's row.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "tessera/engine/comm/mpi.h"
#include "tessera/engine/parallel/process_groups.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"
#include "gpu_host_copy.h"
#include "offload_check.h"
#include "training_check.h"

namespace {

using namespace tessera;
using namespace tessera::engine;
using training_check::expect;
using training_check::expect_planners_estimate;
using training_check::expect_same_checkpoint;

struct Layout {
  int64_t tp, pp;
  int zero_stage;
  planner::Precision precision;
  bool sequence_parallel = false;
};

std::string name_of(const Layout& c, int64_t dp) {
  return "tiny-gpt2 dp " + std::to_string(dp) + " × tp " + std::to_string(c.tp) + " × pp " + std::to_string(c.pp) + (c.sequence_parallel ? " + sp" : "") +
         ", zero " + std::to_string(c.zero_stage) + ", " + std::string(enum_name(c.precision));
}

void check(comm::Communicator& world, const Layout& c, const std::string& root) {
  const int rank = world.rank();
  const int64_t dp = world.size() / (c.tp * c.pp), k = 4;  // 4 micro-batches: a pipeline's, or accumulated
  const std::string name = name_of(c, dp);
  const planner::Model model = planner::load_model("tiny-gpt2").value();
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::hybrid_parallel;
  plugin.zero_stage = c.zero_stage;
  plugin.reduce_bucket_numel = c.zero_stage == 1 ? 20000 : planner::padded_flat_numel(model.parameter_count, dp);  // ZeRO-1: several pieces; ZeRO-2: one bucket
  const planner::ParallelLayout layout{dp, c.tp, c.pp, c.sequence_parallel};
  auto groups = make_process_groups(world, layout);
  if (!groups.ok()) return expect(false, name + ": " + groups.error().message, rank);
  TrainOptions o = training_check::short_run(plugin, k, c.precision);
  o.tensor_parallel_group = groups->tensor.get();
  o.pipeline_parallel_group = groups->pipeline.get();
  o.sequence_parallel = c.sequence_parallel;
  const std::string dir = root + "/" + std::to_string(dp) + "x" + std::to_string(c.tp) + "x" + std::to_string(c.pp) + "-zero" +
                          std::to_string(c.zero_stage) + "-" + std::string(enum_name(c.precision));
  const int64_t stage = groups->coordinates.pp_rank;
  auto on_device = training_check::train_into(dir + "-device", o, groups->data.get(), model, &world);
  expect(on_device.ok(), name + ": " + (on_device.ok() ? "" : on_device.error().message), rank);
  if (!on_device.ok()) return;
  expect_planners_estimate(model, o, layout, stage, on_device->ledger, name, rank);
  o.plugin.cpu_offload = true;
  auto offloaded = training_check::train_into(dir + "-offloaded", o, groups->data.get(), model, &world);
  expect(offloaded.ok(), name + ", offloaded: " + (offloaded.ok() ? "" : offloaded.error().message), rank);
  if (!offloaded.ok()) return;
  expect(offloaded->loss == on_device->loss, name + ": the offloaded run's losses differ from the run's without offload", rank);
  expect(offloaded->grad_norm == on_device->grad_norm, name + ": the offloaded run's gradient norms differ from the run's without offload", rank);
  expect_planners_estimate(model, o, layout, stage, offloaded->ledger, name + ", offloaded", rank);
  expect(offloaded->ledger.peak(MemoryCategory::optimizer_states, MemorySpace::device) == 0, name + ": optimizer states left on the device", rank);
  if (rank == 0) {
    const MemoryLedger& l = offloaded->ledger;
    std::printf("%s: offloaded, final loss %.6f and norm %.6f as on the device; rank 0's host master weights %lld, optimizer states %lld, gradients %lld bytes\n",
                name.c_str(), offloaded->loss.back(), offloaded->grad_norm.back(),
                static_cast<long long>(l.peak(MemoryCategory::master_weights, MemorySpace::host)),
                static_cast<long long>(l.peak(MemoryCategory::optimizer_states, MemorySpace::host)),
                static_cast<long long>(l.peak(MemoryCategory::gradients, MemorySpace::host)));
  }
  // Rank 0 reads the checkpoints once every rank has committed its part.
  (void)world.barrier();
  if (rank == 0) expect_same_checkpoint(dir + "-offloaded", dir + "-device", name + ", offloaded against on the device", rank);
  // 3 offloaded steps, then resumed to 5: the checkpoint of 5 straight ones.
  o.steps = 3;
  auto first = training_check::train_into(dir + "-resumed", o, groups->data.get(), model, &world);
  o.steps = 5;
  o.resume = true;
  auto resumed = first.ok() ? training_check::train_into(dir + "-resumed", o, groups->data.get(), model, &world) : first;
  expect(resumed.ok(), name + ", resumed: " + (resumed.ok() ? "" : resumed.error().message), rank);
  (void)world.barrier();
  if (rank == 0 && resumed.ok()) expect_same_checkpoint(dir + "-resumed", dir + "-offloaded", name + ", 3 + 2 steps against 5", rank);
  // A consolidated checkpoint through the GPU step's host copy of it (its ZeRO-Offload saves the same shard state): the same bytes.
  if (c.tp > 1 || c.pp > 1) training_check::check_gpu_host_copy(world, groups.value(), model, o.plugin, dir + "-offloaded", name);
}

}  // namespace

int main() {
  auto runtime = comm::MpiRuntime::start().value();
  auto world = runtime->world().value();
  const std::string root = training_check::run_root(*world, "hybrid-offload");
  const planner::Precision fp32 = planner::Precision::fp32, bf16 = planner::Precision::bf16;
  std::vector<Layout> layouts;
  if (world->size() == 2) {
    layouts = {{1, 1, 1, fp32}, {1, 1, 2, bf16}};
  } else {
    layouts = {{2, 1, 1, fp32, true}, {2, 1, 2, bf16}, {1, 2, 1, fp32}};
  }
  for (const Layout& layout : layouts) check(*world, layout, root);
  return training_check::finish(*world, root);
}
