// --tp-comm-overlap under mpirun (-np 2 and 3, the world as the tp group,
// sequence parallelism on).
//
// The two overlapped calls (model/sequence_overlap.h) give the collectives'
// results bit for bit, on random rows: the all-gather moves rows, and the
// reduce-scatter sums the partial chunks in rank order as reduce_scatter does;
// each consumes or produces the chunks in planner/tp_overlap_schedule.h's order
// and sends tp - 1 chunks.
//
// Training: each layout trains 5 steps with the plain collectives and again
// overlapped. The overlapped GEMMs run on one rank's rows at a time, and
// OpenBLAS picks its kernel by shape: a GEMM over N/tp rows can round a row
// differently from one over N rows (0.3.21: M 16 against 32 rows of N 64, K 128,
// Bᵀ, the attention output's input gradient), so the runs agree within 1e-6 of
// the loss and, after 5 AdamW steps (whose update divides by the gradients'
// own size, so that rounding-level differences grow), within 1e-5 of the
// parameters' norm (measured: 8e-7), not bit for bit. The overlapped run's
// tensor-parallel sends, recvs and remaining collectives are
// planner/tp_traffic.h's count, and every rank's ledger peaks per category are
// the planner's estimate with --tp-comm-overlap (its send chunks included).
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tessera/engine/comm/mpi.h"
#include "tessera/engine/model/sequence_overlap.h"
#include "tessera/engine/parallel/process_groups.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/tp_traffic.h"
#include "training_check.h"

namespace {

using namespace tessera;
using namespace tessera::engine;
using training_check::expect;

struct Layout {
  const char* model;
  planner::RecomputeMode recompute;
  planner::Precision precision = planner::Precision::fp32;
};

// tiny-gpt2 with 3 heads of 32 (96 wide, an MLP of 384): what 3 tensor-parallel ranks can split.
planner::Model model_for(const char* name, int64_t tp) {
  planner::Model model = planner::load_model(name).value();
  if (tp != 3) return model;
  planner::ModelConfig c = model.config;
  c.hidden_size = 96;
  c.num_heads = c.num_kv_heads = 3;
  c.head_dim = 32;
  c.intermediate_size = 384;
  c.word_embed_proj_dim = 96;
  return planner::make_model(c);
}

std::string name_of(const Layout& c, int64_t tp) {
  return std::string(c.model) + " tp " + std::to_string(tp) + " + sp, recompute " + std::string(enum_name(c.recompute)) + ", " +
         std::string(enum_name(c.precision));
}

// The overlapped run's tensor-parallel calls over 5 steps of k micro-batches: tp_traffic.h's count.
void expect_planned_traffic(const std::string& name, const planner::Model& model, const TrainOptions& o, int64_t tp, int64_t k, const TrainMetrics& measured,
                            int rank) {
  const int64_t width = o.precision == planner::Precision::bf16 ? 2 : 4, steps = 5;
  const planner::TpMicroBatchTraffic micro = planner::tp_micro_batch_traffic(model.config, planner::TpStage{model.config.num_layers}, o.micro_batch_size,
                                                                             o.seq_len, true, o.recompute, width, planner::TpCommOverlap{true, tp});
  const comm::CommCounters& moved = measured.tensor_parallel_communication;
  const auto expect_calls = [&](comm::Collective kind, const planner::CollectiveCalls& forward, const planner::CollectiveCalls& backward) {
    const int64_t calls = steps * k * (forward.calls + backward.calls), bytes = steps * k * (forward.bytes + backward.bytes);
    expect(moved.calls_of(kind) == calls && moved.bytes_of(kind) == bytes,
           name + ": " + std::string(enum_name(kind)) + " in the tp group: " + std::to_string(moved.calls_of(kind)) + " calls, " +
               std::to_string(moved.bytes_of(kind)) + " bytes; the planner says " + std::to_string(calls) + ", " + std::to_string(bytes),
           rank);
  };
  expect_calls(comm::Collective::send, micro.forward.send, micro.backward.send);
  expect_calls(comm::Collective::recv, micro.forward.recv, micro.backward.recv);
  expect_calls(comm::Collective::reduce_scatter, micro.forward.reduce_scatter, micro.backward.reduce_scatter);
  expect_calls(comm::Collective::all_gather, micro.forward.all_gather, micro.backward.all_gather);
}

// Rows of `rank` (random, seeded by rank and call) for `chunks` chunks of n.
std::vector<float> random_rows(int64_t rank, int64_t chunks, int64_t n, unsigned call) {
  std::mt19937 random(static_cast<unsigned>(rank) * 7919u + call);
  std::normal_distribution<float> normal;
  std::vector<float> rows(static_cast<size_t>(chunks * n));
  for (float& x : rows) x = normal(random);
  return rows;
}

void check_calls(comm::Communicator& world) {
  const int rank = world.rank();
  const int64_t tp = world.size(), n = 1000;
  const std::vector<planner::TpOverlapStep> gather_steps = planner::tp_overlap_all_gather_steps(tp, rank);
  const std::vector<planner::TpOverlapStep> scatter_steps = planner::tp_overlap_reduce_scatter_steps(tp, rank);
  const std::vector<float> mine = random_rows(rank, 1, n, 1);
  std::vector<float> gathered(static_cast<size_t>(tp * n)), expected(gathered.size());
  std::vector<int64_t> consumed;
  const comm::CommCounters before = world.counters();
  Status s = overlapped_all_gather(world, HostChunks{}, mine.data(), gathered.data(), n, [&](int64_t chunk) {
    // Each chunk is complete when consumed: its first and last rows are the owner's.
    const std::vector<float> owner = random_rows(chunk, 1, n, 1);
    expect(gathered[static_cast<size_t>(chunk * n)] == owner.front() && gathered[static_cast<size_t>((chunk + 1) * n - 1)] == owner.back(),
           "chunk " + std::to_string(chunk) + " is there when consumed", rank);
    consumed.push_back(chunk);
  });
  expect(s.ok(), "overlapped_all_gather: " + (s.ok() ? "" : s.error().message), rank);
  expect(world.all_gather(mine.data(), expected.data(), static_cast<size_t>(n)).ok() && gathered == expected, "overlapped_all_gather is all_gather", rank);
  for (size_t i = 0; i < consumed.size(); ++i) {
    expect(consumed[i] == gather_steps[i].chunk, "the all-gather consumes chunks in the schedule's order", rank);
  }
  // Each rank's partial of all tp chunks; produce() hands out chunk c of it.
  const std::vector<float> partial = random_rows(rank, tp, n, 2);
  std::vector<float> whole(static_cast<size_t>(tp * n)), sends(static_cast<size_t>(planner::tp_overlap_send_buffers(tp) * n)), reduced(static_cast<size_t>(n)),
      reference(static_cast<size_t>(n));
  std::vector<int64_t> produced;
  s = overlapped_reduce_scatter(world, HostChunks{}, whole.data(), sends.data(), reduced.data(), n, [&](int64_t chunk, float* into) {
    std::copy(partial.begin() + chunk * n, partial.begin() + (chunk + 1) * n, into);
    produced.push_back(chunk);
  });
  expect(s.ok(), "overlapped_reduce_scatter: " + (s.ok() ? "" : s.error().message), rank);
  expect(world.reduce_scatter(partial.data(), reference.data(), static_cast<size_t>(n), comm::ReduceOp::sum).ok() && reduced == reference,
         "overlapped_reduce_scatter is reduce_scatter, bit for bit", rank);
  for (size_t i = 0; i < produced.size(); ++i) {
    expect(produced[i] == scatter_steps[i].chunk, "the reduce-scatter produces chunks in the schedule's order", rank);
  }
  const comm::CommCounters moved = world.counters().since(before);
  expect(moved.calls_of(comm::Collective::send) == 2 * (tp - 1) && moved.calls_of(comm::Collective::recv) == 2 * (tp - 1) &&
             moved.bytes_of(comm::Collective::send) == 2 * (tp - 1) * n * 4,
         "each call sends and receives tp - 1 chunks: " + std::to_string(moved.calls_of(comm::Collective::send)) + " sends", rank);
  if (rank == 0) std::printf("tp %lld: the overlapped all-gather and reduce-scatter are the collectives' results bit for bit\n", static_cast<long long>(tp));
}

void check(comm::Communicator& world, const Layout& c, const std::string& root) {
  const int rank = world.rank();
  const int64_t tp = world.size(), k = 2;
  const std::string name = name_of(c, tp);
  const planner::Model model = model_for(c.model, tp);
  const planner::ParallelLayout layout{1, tp, 1, true};
  auto groups = make_process_groups(world, layout);
  if (!groups.ok()) return expect(false, name + ": " + groups.error().message, rank);
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::hybrid_parallel;
  TrainOptions o = training_check::short_run(plugin, k, c.precision);
  o.tensor_parallel_group = groups->tensor.get();
  o.sequence_parallel = true;
  o.recompute = c.recompute;
  o.seq_len = 16 * tp;  // an equal share of the tokens per rank
  const std::string dir = root + "/" + c.model + "-" + std::string(enum_name(c.recompute)) + "-" + std::string(enum_name(c.precision));
  auto plain = training_check::train_into(dir + "-plain", o, groups->data.get(), model, &world);
  o.plugin.tp_comm_overlap = true;
  auto overlapped = training_check::train_into(dir + "-overlapped", o, groups->data.get(), model, &world);
  expect(plain.ok() && overlapped.ok(), name + ": " + (!plain.ok() ? plain.error().message : !overlapped.ok() ? overlapped.error().message : ""), rank);
  if (!plain.ok() || !overlapped.ok()) return;
  double loss_apart = 0;
  for (size_t step = 0; step < plain->loss.size(); ++step) {
    loss_apart = std::max(loss_apart, std::abs(plain->loss[step] - overlapped->loss[step]) / std::abs(plain->loss[step]));
  }
  expect(plain->loss.size() == overlapped->loss.size() && loss_apart < 1e-6, name + ": the losses differ by " + std::to_string(loss_apart), rank);
  expect_planned_traffic(name, model, o, tp, k, overlapped.value(), rank);
  training_check::expect_planned_peaks(name, model, o, layout, overlapped->ledger, rank);
  if (rank != 0) return;
  const double apart = training_check::relative_difference(training_check::read_model(dir + "-overlapped", model), training_check::read_model(dir + "-plain", model));
  expect(apart < 1e-5, name + ": the parameters after 5 steps differ by " + std::to_string(apart), rank);
  std::printf("%s: 5 steps; losses within %.3g, parameters within %.3g of the plain run's\n", name.c_str(), loss_apart, apart);
}

}  // namespace

int main() {
  auto runtime = comm::MpiRuntime::start().value();
  auto world = runtime->world().value();
  const std::string root = training_check::run_root(*world, "tp-comm-overlap");
  std::vector<Layout> layouts{{"tiny-gpt2", planner::RecomputeMode::none}, {"tiny-gpt2", planner::RecomputeMode::full}};
  if (world->size() == 2) {
    layouts.push_back({"tiny-llama", planner::RecomputeMode::selective});
    layouts.push_back({"tiny-llama", planner::RecomputeMode::none, planner::Precision::bf16});
  }
  check_calls(*world);
  for (const Layout& layout : layouts) check(*world, layout, root);
  return training_check::finish(*world, root);
}
