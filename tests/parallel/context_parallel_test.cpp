// The model under context parallelism on real ranks (mpirun -np 2 and 3, the
// world as the context group): each rank runs tiny-gpt2 or tiny-llama on its
// two chunks of every sequence (planner/context_parallel.h) and must give
// what the whole model gives on the whole sequences on one rank: the mean of
// the ranks' losses is its loss, and the mean of their gradients (each the
// gradient of its own tokens' mean loss) is its gradient, within 1e-5 of
// their norm (the ranks add the attention's blocks and the tokens' terms in
// another order), for every recompute mode (selective and full recompute run
// the ring again). Sequences of 2 · cp · 5 tokens: chunks of an odd length.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/engine/comm/mpi.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/registry.h"
#include "training_check.h"

namespace {

using namespace tessera;
using namespace tessera::engine;
using training_check::expect;

void check(comm::Communicator& world, const char* model_name, planner::RecomputeMode recompute) {
  const int rank = world.rank();
  const int64_t cp = world.size(), B = 2, S = 2 * cp * 5, local = S / cp;
  const std::string name = std::string(model_name) + " at cp " + std::to_string(cp) + ", recompute " + std::string(enum_name(recompute));
  const planner::Model model = planner::load_model(model_name).value();
  MemoryLedger split_ledger, whole_ledger;
  auto split = Transformer<float>::create(model, split_ledger, B, local, 11, recompute, {}, nullptr, false, {}, &world);
  auto whole = Transformer<float>::create(model, whole_ledger, B, S, 11, recompute);
  expect(split.ok() && whole.ok(), name + ": " + (split.ok() ? (whole.ok() ? "" : whole.error().message) : split.error().message), rank);
  if (!split.ok() || !whole.ok()) return;

  std::vector<int32_t> tokens(static_cast<size_t>(B * S)), targets(tokens.size()), my_tokens(static_cast<size_t>(B * local)), my_targets(my_tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 37 + 5) % static_cast<size_t>(model.config.vocab_size));
    targets[i] = static_cast<int32_t>((i * 101 + 3) % static_cast<size_t>(model.config.vocab_size));
  }
  const planner::ContextSplit chunks{cp, rank};
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < local; ++t) {
      const auto from = static_cast<size_t>(b * S + chunks.global_position(t, local)), to = static_cast<size_t>(b * local + t);
      my_tokens[to] = tokens[from];
      my_targets[to] = targets[from];
    }
  }
  double split_loss = split.value().forward(my_tokens.data(), my_targets.data());
  split.value().zero_gradients();
  split.value().backward(1.0f / static_cast<float>(cp));  // the mean over the ranks, summed below
  const double whole_loss = whole.value().forward(tokens.data(), targets.data());
  whole.value().zero_gradients();
  whole.value().backward(1.0f);
  expect(split->communication_status().ok(), name + ": " + (split->communication_status().ok() ? "" : split->communication_status().error().message), rank);
  (void)world.all_reduce(&split_loss, &split_loss, 1, comm::ReduceOp::sum);
  split_loss /= static_cast<double>(cp);
  expect(std::abs(split_loss - whole_loss) <= 1e-6 * std::abs(whole_loss),
         name + ": loss " + std::to_string(split_loss) + " vs the whole model's " + std::to_string(whole_loss), rank);
  double squared = 0, reference = 0;
  for (size_t p = 0; p < split->gradients().size(); ++p) {
    const Slice<float>& mine = split->gradients()[p];
    (void)world.all_reduce(mine.data(), mine.data(), static_cast<size_t>(mine.numel()), comm::ReduceOp::sum);
    for (int64_t i = 0; i < mine.numel(); ++i) {
      const double expected = whole->gradients()[p].data()[i];
      squared += (mine.data()[i] - expected) * (mine.data()[i] - expected);
      reference += expected * expected;
    }
  }
  const double apart = std::sqrt(squared / reference);
  if (rank == 0) std::printf("%s: loss %.9g vs %.9g, gradients differ by %.3g of their norm\n", name.c_str(), split_loss, whole_loss, apart);
  expect(apart < 1e-5, name + ": gradients differ by " + std::to_string(apart), rank);
}

}  // namespace

int main() {
  auto runtime = comm::MpiRuntime::start().value();
  auto world = runtime->world().value();
  for (const char* model : {"tiny-gpt2", "tiny-llama"}) {
    for (planner::RecomputeMode recompute : {planner::RecomputeMode::none, planner::RecomputeMode::selective, planner::RecomputeMode::full}) {
      check(*world, model, recompute);
    }
  }
  double total = training_check::failures;
  (void)world->all_reduce(&total, &total, 1, comm::DataType::f64, comm::ReduceOp::sum);
  if (world->rank() == 0) std::printf("context_parallel_test: %s\n", total == 0 ? "all checks passed" : "checks failed (see above)");
  return total == 0 ? 0 : 1;
}
