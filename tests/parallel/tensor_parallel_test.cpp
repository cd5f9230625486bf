// Tensor parallelism on real ranks (mpirun -np 2 and 4, the world as the tp
// group), with and without sequence parallelism: a model split over the ranks
// computes what the whole model computes on one rank. Each rank also builds the whole model (same seed) and checks
// that its parts of the initial weights are the whole model's exactly, that
// the loss agrees, and that its parts of the gradients after backward agree
// within 1e-5 of their norm (the ranks' partial sums are added in another
// order than one rank's GEMM adds them). A plain program: every rank makes the
// same calls whatever fails, and the ranks agree on the verdict.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/engine/comm/mpi.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/tensor_parallel.h"

namespace {

using namespace tessera;
using namespace tessera::engine;

int failures = 0;

void expect(bool ok, const std::string& what, int rank) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what.c_str());
}

// Σ (part − whole's elements)² and Σ whole's elements² over every parameter's part.
struct Difference {
  double squared = 0, reference = 0;
  double relative() const { return std::sqrt(squared / reference); }
};

Difference compare_parts(const planner::Model& model, int64_t tp, int64_t rank, const std::vector<Slice<float>>& parts,
                         const std::vector<Slice<float>>& whole) {
  Difference d;
  size_t p = 0;
  for (const planner::TensorInfo& tensor : model.inventory.tensors) {
    if (tensor.tied_to >= 0) continue;
    planner::for_each_tp_element(tensor, tp, rank, [&](int64_t local, int64_t full) {
      const double mine = parts[p].data()[local], expected = full < 0 ? 0.0 : whole[p].data()[full];
      d.squared += (mine - expected) * (mine - expected);
      d.reference += expected * expected;
    });
    ++p;
  }
  return d;
}

void check(comm::Communicator& world, const char* model_name, planner::RecomputeMode recompute, bool sequence_parallel) {
  const int rank = world.rank();
  const std::string name = std::string(model_name) + " at tp " + std::to_string(world.size()) + (sequence_parallel ? " + sp" : "") + ", recompute " +
                           std::string(tessera::enum_name(recompute));
  const planner::Model model = planner::load_model(model_name).value();
  const int64_t B = 2, T = 16;
  MemoryLedger split_ledger, whole_ledger;
  auto split = Transformer<float>::create(model, split_ledger, B, T, 11, recompute, {}, &world, sequence_parallel);
  auto whole = Transformer<float>::create(model, whole_ledger, B, T, 11, recompute);
  expect(split.ok() && whole.ok(), name + ": " + (split.ok() ? (whole.ok() ? "" : whole.error().message) : split.error().message), rank);
  if (!split.ok() || !whole.ok()) return;
  const Difference initial = compare_parts(model, world.size(), rank, split->parameters(), whole->parameters());
  expect(initial.squared == 0, name + ": the initial parts are the whole model's", rank);

  std::vector<int32_t> tokens(static_cast<size_t>(B * T)), targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 37 + 5) % static_cast<size_t>(model.config.vocab_size));
    targets[i] = static_cast<int32_t>((i * 101 + 3) % static_cast<size_t>(model.config.vocab_size));
  }
  const double split_loss = split.value().forward(tokens.data(), targets.data());
  const double whole_loss = whole.value().forward(tokens.data(), targets.data());
  expect(std::abs(split_loss - whole_loss) <= 1e-6 * std::abs(whole_loss),
         name + ": loss " + std::to_string(split_loss) + " vs the whole model's " + std::to_string(whole_loss), rank);
  split.value().backward(1.0f);
  split.value().reduce_sequence_parallel_gradients();
  whole.value().backward(1.0f);
  expect(split->communication_status().ok(), name + ": " + (split->communication_status().ok() ? "" : split->communication_status().error().message), rank);
  const Difference gradients = compare_parts(model, world.size(), rank, split->gradients(), whole->gradients());
  if (rank == 0) std::printf("%s: loss %.9g vs %.9g, gradients differ by %.3g of their norm\n", name.c_str(), split_loss, whole_loss, gradients.relative());
  expect(gradients.relative() < 1e-5, name + ": gradients differ by " + std::to_string(gradients.relative()), rank);
}

}  // namespace

int main() {
  auto runtime = comm::MpiRuntime::start();
  if (!runtime.ok()) return std::fprintf(stderr, "%s\n", runtime.error().message.c_str()), 1;
  auto world_result = runtime.value()->world();
  if (!world_result.ok()) return std::fprintf(stderr, "%s\n", world_result.error().message.c_str()), 1;
  comm::Communicator& world = *world_result.value();
  for (bool sequence_parallel : {false, true}) {
    for (planner::RecomputeMode recompute : {planner::RecomputeMode::none, planner::RecomputeMode::selective, planner::RecomputeMode::full}) {
      check(world, "tiny-gpt2", recompute, sequence_parallel);
    }
  }
  if (world.size() == 2) {
    check(world, "tiny-llama", planner::RecomputeMode::none, false);
    check(world, "tiny-llama", planner::RecomputeMode::full, true);
  } else {
    // tiny-llama has 2 key-value heads: 4 ranks cannot each hold whole ones.
    MemoryLedger ledger;
    auto refused = Transformer<float>::create(planner::load_model("tiny-llama").value(), ledger, 1, 8, 1, planner::RecomputeMode::none, {}, &world);
    expect(!refused.ok() && refused.error().message.find("--tp 4: the engine gives each tensor-parallel rank whole attention and key-value heads") == 0,
           "tiny-llama at tp 4 is refused: " + (refused.ok() ? std::string("(accepted)") : refused.error().message), world.rank());
  }
  double total = failures;
  if (!world.all_reduce(&total, &total, 1, comm::ReduceOp::sum)) return 1;
  if (world.rank() == 0) std::printf("tensor_parallel_test: %s\n", total == 0 ? "all checks passed" : "checks failed (see above)");
  return total == 0 ? 0 : 1;
}
