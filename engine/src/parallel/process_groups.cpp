#include "tessera/engine/parallel/process_groups.h"

#include <string>

#include "tessera/planner/enum_names.h"

namespace tessera::engine {
namespace {

// Ranks of one group differ only in their coordinate along `axis`, which
// grows with the world rank; key = world rank numbers them in that order.
Result<std::unique_ptr<comm::Communicator>> split_along(comm::Communicator& world, const planner::ParallelLayout& layout, planner::MeshAxis axis,
                                                        const char* name) {
  const int64_t color = planner::group_index(layout, world.rank(), axis);
  return world.split(static_cast<int>(color), world.rank(), std::string(name) + "/" + std::to_string(color));
}

}  // namespace

Result<ProcessGroups> make_process_groups(comm::Communicator& world, const planner::ParallelLayout& layout) {
  const int64_t planned = layout.world_size();
  if (planned != world.size()) {
    return make_error(ErrorCode::invalid_argument, "the plan's layout (dp " + std::to_string(layout.dp) + " × tp " + std::to_string(layout.tp) +
                                                       " × pp " + std::to_string(layout.pp) + (layout.cp > 1 ? " × cp " + std::to_string(layout.cp) : "") + ") needs " + std::to_string(planned) + " ranks, " +
                                                       std::to_string(world.size()) + " were started; launch with mpirun -np " +
                                                       std::to_string(planned));
  }
  ProcessGroups groups;
  groups.coordinates = planner::rank_coordinates(layout, world.rank());
  auto data = split_along(world, layout, planner::MeshAxis::data, "dp");
  if (!data) return data.error();
  auto tensor = split_along(world, layout, planner::MeshAxis::tensor, "tp");
  if (!tensor) return tensor.error();
  auto pipeline = split_along(world, layout, planner::MeshAxis::pipeline, "pp");
  if (!pipeline) return pipeline.error();
  auto context = split_along(world, layout, planner::MeshAxis::context, "cp");
  if (!context) return context.error();
  const auto data_context_color = static_cast<int>(planner::data_context_group_index(layout, world.rank()));
  auto data_context = world.split(data_context_color, world.rank(), "dp-cp/" + std::to_string(data_context_color));
  if (!data_context) return data_context.error();
  groups.data = std::move(data.value());
  groups.tensor = std::move(tensor.value());
  groups.pipeline = std::move(pipeline.value());
  groups.context = std::move(context.value());
  groups.data_context = std::move(data_context.value());
  return groups;
}

}  // namespace tessera::engine
