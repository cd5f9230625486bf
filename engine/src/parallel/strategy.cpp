#include "tessera/engine/parallel/strategy.h"

#include <string>

#include "tessera/engine/parallel/data_parallel.h"
#include "tessera/engine/parallel/fsdp.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/sharding.h"

namespace tessera::engine {

using planner::PluginKind;

Status check_data_parallel_supported(const planner::PluginOptions& plugin, planner::Precision /*precision*/, const planner::Model& model, int64_t dp) {
  if (plugin.kind != PluginKind::torch_ddp && plugin.kind != PluginKind::low_level_zero && plugin.kind != PluginKind::torch_fsdp) {
    return make_error(ErrorCode::unsupported, "--plugin " + std::string(enum_name(plugin.kind)) +
                                                  ": the engine runs torch_ddp, torch_fsdp and low_level_zero so far; plan with one of them");
  }
  if (plugin.cpu_offload && plugin.kind != PluginKind::low_level_zero) {
    return make_error(ErrorCode::unsupported, "--cpu-offload: the engine offloads low_level_zero's optimizer so far; plan without it");
  }
  const int64_t params = model.parameter_count;
  const int64_t padded = planner::padded_flat_numel(params, dp);
  if (plugin.kind == PluginKind::low_level_zero && plugin.effective_zero_stage() == 2 && dp > 1 &&
      planner::zero_bucket_numel(plugin.reduce_bucket_numel, params, dp) < padded) {
    return make_error(ErrorCode::unsupported, "--reduce-bucket-m: the engine's ZeRO-2 reduces all gradients in one bucket so far; plan with "
                                              "--reduce-bucket-m " + std::to_string((padded + (1 << 20) - 1) >> 20) + " or more, or ZeRO stage 1");
  }
  return Status::success();
}

template <typename T>
std::unique_ptr<ParallelStrategy<T>> make_parallel_strategy(comm::Communicator& group, const planner::PluginOptions& plugin, const planner::Model& model) {
  if (plugin.kind == PluginKind::torch_fsdp) return std::make_unique<FullyShardedDataParallel<T>>(group, plugin, model);
  return std::make_unique<DataParallel<T>>(group, plugin, model.parameter_count);
}

template std::unique_ptr<ParallelStrategy<float>> make_parallel_strategy(comm::Communicator&, const planner::PluginOptions&, const planner::Model&);
template std::unique_ptr<ParallelStrategy<bf16>> make_parallel_strategy(comm::Communicator&, const planner::PluginOptions&, const planner::Model&);
template std::unique_ptr<ParallelStrategy<fp16>> make_parallel_strategy(comm::Communicator&, const planner::PluginOptions&, const planner::Model&);

}  // namespace tessera::engine
