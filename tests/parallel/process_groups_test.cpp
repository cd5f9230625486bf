// The dp, tp, pp and cp groups on real ranks (mpirun -np 8): for each layout of 8
// ranks, every group holds exactly the world ranks planner::group_members
// lists, in that order, the dp-cp group (gradients) the ranks of the rank's
// planner::data_context_group_index ascending, and a layout of another size is refused on every rank
// before any communication. A plain program, as mpi_communicator_test: every
// rank makes the same calls whatever fails, and the ranks agree on the verdict.
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/engine/comm/mpi.h"
#include "tessera/engine/parallel/process_groups.h"

namespace {

using namespace tessera;
using planner::MeshAxis;

int failures = 0;

void expect(bool ok, const std::string& what, int rank) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what.c_str());
}

// The world ranks of `group`'s members, in the group's rank order.
std::vector<int64_t> members(engine::comm::Communicator& group, int world_rank) {
  const double mine = world_rank;
  std::vector<double> all(static_cast<size_t>(group.size()));
  if (!group.all_gather(&mine, all.data(), 1)) return {};
  return std::vector<int64_t>(all.begin(), all.end());
}

void check_layout(engine::comm::Communicator& world, planner::ParallelLayout layout) {
  const std::string name = "dp " + std::to_string(layout.dp) + " × tp " + std::to_string(layout.tp) + " × pp " + std::to_string(layout.pp) + " × cp " +
                           std::to_string(layout.cp);
  auto groups = engine::make_process_groups(world, layout);
  expect(groups.ok(), name + ": " + (groups.ok() ? "" : groups.error().message), world.rank());
  if (!groups.ok()) return;
  const planner::RankCoordinates c = planner::rank_coordinates(layout, world.rank());
  expect(groups->coordinates.tp_rank == c.tp_rank && groups->coordinates.dp_rank == c.dp_rank && groups->coordinates.pp_rank == c.pp_rank,
         name + ": coordinates", world.rank());
  const std::pair<engine::comm::Communicator*, MeshAxis> axes[] = {
      {groups->data.get(), MeshAxis::data}, {groups->tensor.get(), MeshAxis::tensor}, {groups->pipeline.get(), MeshAxis::pipeline},
      {groups->context.get(), MeshAxis::context}};
  for (const auto& [group, axis] : axes) {
    const std::vector<int64_t> expected = planner::group_members(layout, world.rank(), axis);
    expect(members(*group, world.rank()) == expected, name + ": the " + std::string(tessera::enum_name(axis)) + " group's members", world.rank());
  }
  expect(groups->tensor->rank() == c.tp_rank && groups->data->rank() == c.dp_rank && groups->pipeline->rank() == c.pp_rank &&
             groups->context->rank() == c.cp_rank,
         name + ": each group numbers this rank by its coordinate", world.rank());
  std::vector<int64_t> reducing;
  for (int64_t r = 0; r < layout.world_size(); ++r) {
    if (planner::data_context_group_index(layout, r) == planner::data_context_group_index(layout, world.rank())) reducing.push_back(r);
  }
  expect(members(*groups->data_context, world.rank()) == reducing && groups->data_context->rank() == planner::data_context_rank(layout, world.rank()),
         name + ": the dp-cp group's members and this rank's place in it", world.rank());
}

}  // namespace

int main() {
  auto runtime = engine::comm::MpiRuntime::start();
  if (!runtime.ok()) return std::fprintf(stderr, "%s\n", runtime.error().message.c_str()), 1;
  auto world = runtime.value()->world();
  if (!world.ok()) return std::fprintf(stderr, "%s\n", world.error().message.c_str()), 1;
  engine::comm::Communicator& w = *world.value();
  const int rank = w.rank();
  expect(w.size() == 8, "run under mpirun -np 8", rank);
  for (planner::ParallelLayout layout : {planner::ParallelLayout{2, 2, 2}, planner::ParallelLayout{1, 4, 2}, planner::ParallelLayout{8, 1, 1},
                                         planner::ParallelLayout{2, 4, 1}, planner::ParallelLayout{2, 2, 1, false, 2},
                                         planner::ParallelLayout{1, 2, 2, false, 2}, planner::ParallelLayout{2, 1, 1, false, 4}}) {
    check_layout(w, layout);
  }
  auto refused = engine::make_process_groups(w, planner::ParallelLayout{2, 2, 1});
  expect(!refused.ok() && refused.error().message == "the plan's layout (dp 2 × tp 2 × pp 1) needs 4 ranks, 8 were started; launch with mpirun -np 4",
         "a layout of 4 ranks on 8 is refused: " + (refused.ok() ? std::string("(accepted)") : refused.error().message), rank);
  double total = failures;
  if (!w.all_reduce(&total, &total, 1, engine::comm::ReduceOp::sum)) return 1;
  if (rank == 0) std::printf("process_groups_test: %s\n", total == 0 ? "all checks passed" : "checks failed (see above)");
  return total == 0 ? 0 : 1;
}
