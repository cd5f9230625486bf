// What the plan search (search.cpp) and its explanations of an empty search
// (search_filters.cpp) share: the layouts the search enumerates.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/search.h"

namespace tessera::planner::search_detail {

// The divisors of n, ascending.
std::vector<int64_t> divisors(int64_t n);

// Whether the plugin filter (empty: all) admits `kind`.
bool allowed(const std::vector<PluginKind>& plugins, PluginKind kind);

// Whether the search tries tensor-parallel size `tp`: it divides the query and
// key/value heads and the MLP width (Megatron-LM splits each by tp), stays
// inside a node and divides the GPUs.
bool tensor_parallel_allowed(const ModelConfig& config, const PlanRequest& request, int64_t tp);

// Plugin and layout settings before the micro-batch and recompute are chosen;
// they do not depend on the global batch.
std::vector<EstimateRequest> plugin_templates(const Model& model, const PlanRequest& request);

}  // namespace tessera::planner::search_detail
