#include "tessera/engine/parallel/strategy.h"

#include <string>

#include "tessera/engine/parallel/data_parallel.h"
#include "tessera/engine/parallel/fsdp.h"
#include "tessera/engine/parallel/gemini.h"
#include "tessera/planner/chunks.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/sharding.h"

namespace tessera::engine {

using planner::PluginKind;

Status check_data_parallel_supported(const planner::PluginOptions& plugin, planner::Precision precision, const planner::Model& model, int64_t dp) {
  if (plugin.kind == PluginKind::gemini) {
    const planner::GeminiOptions& g = plugin.gemini;
    if (precision == planner::Precision::fp32) {
      return make_error(ErrorCode::unsupported, "--precision fp32: gemini trains in bf16 or fp16 (as ColossalAI's GeminiPlugin), keeping fp32 master weights; "
                                                "plan it with --precision bf16");
    }
    const int64_t chunk = planner::gemini_chunk_size(model.inventory, g, dp);
    if (chunk % dp != 0) {
      return make_error(ErrorCode::invalid_argument, "--chunk-size " + std::to_string(chunk) + " does not split evenly over " + std::to_string(dp) +
                                                         " ranks; give a multiple of " + std::to_string(dp));
    }
  }
  if (plugin.cpu_offload && !plugin.cpu_offload_applies()) {
    return make_error(ErrorCode::invalid_argument, "--cpu-offload: the engine offloads torch_fsdp's shards and the ZeRO optimizer of low_level_zero and "
                                                   "of hybrid_parallel at --zero-stage 1 or 2; plan without it");
  }
  const int64_t params = model.parameter_count;
  const int64_t padded = planner::padded_flat_numel(params, dp);
  // hybrid_parallel's ZeRO-2 reduces after the step's last backward (sequence
  // parallelism's norm gradients are complete only then), so in one bucket.
  if (plugin.kind == PluginKind::hybrid_parallel && plugin.effective_zero_stage() == 2 && dp > 1 &&
      planner::zero_bucket_numel(plugin.reduce_bucket_numel, params, dp) < padded) {
    return make_error(ErrorCode::unsupported, "--reduce-bucket-m: the engine's hybrid_parallel ZeRO-2 reduces all gradients in one bucket so far; plan with "
                                              "--reduce-bucket-m " + std::to_string((padded + (1 << 20) - 1) >> 20) + " or more, or ZeRO stage 1");
  }
  return Status::success();
}

template <typename T>
std::unique_ptr<ParallelStrategy<T>> make_parallel_strategy(comm::Communicator& group, const planner::PluginOptions& plugin, const planner::Model& model,
                                                            std::optional<int64_t> gemini_host_chunks) {
  if (plugin.kind == PluginKind::torch_fsdp) return std::make_unique<FullyShardedDataParallel<T>>(group, plugin, model);
  if (plugin.kind == PluginKind::gemini) return std::make_unique<Gemini<T>>(group, plugin, model, gemini_host_chunks);
  return std::make_unique<DataParallel<T>>(group, plugin, model);
}

template std::unique_ptr<ParallelStrategy<float>> make_parallel_strategy(comm::Communicator&, const planner::PluginOptions&, const planner::Model&,
                                                                         std::optional<int64_t>);
template std::unique_ptr<ParallelStrategy<bf16>> make_parallel_strategy(comm::Communicator&, const planner::PluginOptions&, const planner::Model&,
                                                                         std::optional<int64_t>);
template std::unique_ptr<ParallelStrategy<fp16>> make_parallel_strategy(comm::Communicator&, const planner::PluginOptions&, const planner::Model&,
                                                                         std::optional<int64_t>);

}  // namespace tessera::engine
