#include "tessera/engine/device/gpu_plugins.h"

#include <string>

#include "tessera/planner/enum_names.h"

namespace tessera::engine {

using planner::PluginKind;

Status check_gpu_plugin(const planner::PluginOptions& plugin) {
  if (plugin.kind != PluginKind::torch_ddp && plugin.kind != PluginKind::low_level_zero) {
    return make_error(ErrorCode::unsupported, "--plugin " + std::string(enum_name(plugin.kind)) +
                                                  ": on GPUs the engine runs torch_ddp and low_level_zero so far; use one of them");
  }
  if (plugin.kind != PluginKind::low_level_zero) return Status::success();
  const int stage = plugin.effective_zero_stage();
  if (stage != 1 && stage != 2) {
    return make_error(ErrorCode::unsupported, "--zero-stage " + std::to_string(stage) + ": low_level_zero on GPUs runs ZeRO stage 1 or 2; use --zero-stage 1 or 2");
  }
  return Status::success();
}

}  // namespace tessera::engine
