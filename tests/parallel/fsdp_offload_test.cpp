// torch_fsdp with --cpu-offload (FSDP's CPUOffload, planner/fsdp_offload.h)
// on the CPU engine, under mpirun -np 2 (dp 2): full_shard in fp32 and
// shard_grad_op in bf16 each train 5 steps with the shards on the device and
// 5 with them offloaded (parallel/fsdp.h), then 3 offloaded steps resumed to
// 5. One micro-batch a step: PyTorch FSDP does not accumulate under CPU
// offload, and the planner refuses more (check_fsdp_offload_accumulation).
// Checked on every rank:
//  - the offloaded run's losses and gradient norms are the same doubles as
//    the run's without offload, and its checkpoint the same files, byte for
//    byte: offloading moves the shards, not the arithmetic;
//  - the resumed offloaded run's checkpoint is the straight one's, byte for byte;
//  - the ledger's peaks of the model states' categories and the gathered and
//    communication buffers, on the device and on the host, are the planner's
//    estimate of the same run (planner/memory_model.cpp, add_fsdp_states):
//    offloaded, no shard on the device but the largest unit's fp32 shard on
//    its way up (parameters) and down (gradients).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/engine/comm/mpi.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/fsdp_offload.h"
#include "tessera/planner/registry.h"
#include "offload_check.h"
#include "training_check.h"

namespace {

using namespace tessera;
using namespace tessera::engine;
using training_check::expect;

struct Layout {
  planner::FsdpStrategy strategy;
  planner::Precision precision;
};

void check(comm::Communicator& world, const Layout& c, const std::string& root) {
  const int rank = world.rank();
  const int64_t dp = world.size();
  const std::string name = "tiny-gpt2 dp " + std::to_string(dp) + ", " + std::string(enum_name(c.strategy)) + ", " + std::string(enum_name(c.precision));
  const planner::Model model = planner::load_model("tiny-gpt2").value();
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::torch_fsdp;
  plugin.fsdp_strategy = c.strategy;
  const planner::ParallelLayout layout{dp, 1, 1};
  TrainOptions o = training_check::short_run(plugin, 1, c.precision);
  const std::string dir = root + "/" + std::string(enum_name(c.strategy)) + "-" + std::string(enum_name(c.precision));
  auto on_device = training_check::train_into(dir + "-device", o, &world, model, &world);
  expect(on_device.ok(), name + ": " + (on_device.ok() ? "" : on_device.error().message), rank);
  if (!on_device.ok()) return;
  training_check::expect_planners_estimate(model, o, layout, 0, on_device->ledger, name, rank);
  o.plugin.cpu_offload = true;
  auto offloaded = training_check::train_into(dir + "-offloaded", o, &world, model, &world);
  expect(offloaded.ok(), name + ", offloaded: " + (offloaded.ok() ? "" : offloaded.error().message), rank);
  if (!offloaded.ok()) return;
  expect(offloaded->loss == on_device->loss, name + ": the offloaded run's losses differ from the run's without offload", rank);
  expect(offloaded->grad_norm == on_device->grad_norm, name + ": the offloaded run's gradient norms differ from the run's without offload", rank);
  training_check::expect_planners_estimate(model, o, layout, 0, offloaded->ledger, name + ", offloaded", rank);
  // The shards themselves, worked out here: every unit's ceil(numel / dp) elements, 4 bytes each, on the host.
  const planner::FsdpLayout units = planner::fsdp_layout(model.inventory, planner::flat_parameter_order(model.inventory), dp);
  int64_t shard = 0, largest = 0;
  for (const planner::ShardedUnit& u : units.units) {
    shard += (u.numel + dp - 1) / dp;
    largest = std::max(largest, (u.numel + dp - 1) / dp);
  }
  const MemoryLedger& l = offloaded->ledger;
  expect(l.peak(MemoryCategory::parameters, MemorySpace::host) == 4 * shard, name + ": the host's weight shard", rank);
  expect(l.peak(MemoryCategory::gradients, MemorySpace::host) == 4 * shard, name + ": the host's gradient shard", rank);
  expect(l.peak(MemoryCategory::optimizer_states, MemorySpace::host) == 8 * shard, name + ": the host's AdamW states", rank);
  expect(l.peak(MemoryCategory::optimizer_states, MemorySpace::device) == 0, name + ": optimizer states left on the device", rank);
  expect(l.peak(MemoryCategory::parameters, MemorySpace::device) == 4 * largest, name + ": the device's copy of one unit's shard", rank);
  if (rank == 0) {
    std::printf("%s: offloaded, final loss %.6f and norm %.6f as on the device; host shards %lld elements, device staging %lld bytes each way\n",
                name.c_str(), offloaded->loss.back(), offloaded->grad_norm.back(), static_cast<long long>(shard), static_cast<long long>(4 * largest));
  }
  (void)world.barrier();  // every rank has committed its part
  if (rank == 0) training_check::expect_same_checkpoint(dir + "-offloaded", dir + "-device", name + ", offloaded against on the device", rank);
  o.steps = 3;
  auto first = training_check::train_into(dir + "-resumed", o, &world, model, &world);
  o.steps = 5;
  o.resume = true;
  auto resumed = first.ok() ? training_check::train_into(dir + "-resumed", o, &world, model, &world) : first;
  expect(resumed.ok(), name + ", resumed: " + (resumed.ok() ? "" : resumed.error().message), rank);
  (void)world.barrier();
  if (rank == 0 && resumed.ok()) training_check::expect_same_checkpoint(dir + "-resumed", dir + "-offloaded", name + ", 3 + 2 steps against 5", rank);
}

}  // namespace

int main() {
  auto runtime = comm::MpiRuntime::start().value();
  auto world = runtime->world().value();
  const std::string root = training_check::run_root(*world, "fsdp-offload");
  for (const Layout& layout : {Layout{planner::FsdpStrategy::full_shard, planner::Precision::fp32},
                               Layout{planner::FsdpStrategy::shard_grad_op, planner::Precision::bf16}}) {
    check(*world, layout, root);
  }
  return training_check::finish(*world, root);
}
