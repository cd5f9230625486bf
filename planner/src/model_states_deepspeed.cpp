// DeepSpeed ZeRO-3's model states (--runtime deepspeed, low_level_zero at stage 3),
// read from deepspeedai/DeepSpeed at edaa7221267243c7be7fb49c5d5f5c4fb97b4641:
//  - Every parameter is partitioned on its own: ceil(numel / dp) elements per
//    rank (runtime/zero/partition_parameters.py, _aligned_size and _partition_param).
//    A parameter of at most stage3_param_persistence_threshold elements is
//    persistent (parameter_offload.py, mark_persistent_parameters: ds_numel <=
//    param_threshold): its whole 16-bit copy stays on every rank beside its
//    partition. stage3_model_persistence_threshold is left at its default
//    (sys.maxsize), which bounds nothing.
//  - runtime/zero/stage3.py: 16-bit partitions, a flat buffer of gradient
//    partitions in the gradient-accumulation dtype (the model's dtype unless
//    grad_accum_dtype says otherwise: engine.py, get_data_types), fp32 partitions
//    of the weights (_create_fp32_partitions; shared with the partitions when the
//    model is fp32) and the optimizer's states on them; with contiguous_gradients
//    (the default) one reduce_bucket_size bucket of gradients in the model's dtype.
//  - Gathered parameters (partitioned_param_coordinator.py): after a module
//    runs its parameters are released unless they are used again within
//    stage3_max_reuse_distance elements of the trace (__params_to_release); the
//    prefetch fetches up to min(stage3_prefetch_bucket_size, stage3_max_live_parameters
//    - the available elements) ahead (fetch_sub_module). At the turn from
//    forward to backward, where the activations peak, a tensor whose later
//    tensors sum to `after` elements is used again 2 · after elements later
//    (the rest of forward, then backward down to it); the last tensor is in use
//    there. Recompute's second forward is not in this trace.
//  - With offload_optimizer on the CPU (--cpu-offload; ZeRO-Offload, Ren et al.
//    2021) the gradient partitions' flat buffer is on the host (self.device is
//    the CPU), so is each sub-group's fp32 gradient buffer beside it
//    (pinned_host_blocks.h, deepspeed_offload_gradient_blocks), and the fp32
//    partitions (_create_fp32_partitions: the 16-bit partition converted to
//    fp32 on the CPU, even when the model is fp32) with DeepSpeedCPUAdam's
//    moments on them, pageable. The 16-bit partitions stay on the device.
//  - With offload_param on the CPU (--offload-param; ZeRO-Infinity, Rajbhandari
//    et al. 2021) the 16-bit partitions move to one flat host buffer per
//    parameter group, pinned whatever offload_param's pin_memory says
//    (_create_param_groups_fp16_flat_cpu_memory), and come up to be gathered;
//    the persistent tensors stay whole on the device.
//  Left out: without offload, the fp32 copy of each sub-group's gradients that
//  the optimizer step makes (_prepare_fp32_grad_for_sub_group), after backward
//  has freed the activations and the gathered parameters.
#include <algorithm>
#include <vector>

#include "model_states.h"
#include "tessera/planner/deepspeed_pipeline.h"
#include "tessera/planner/module_order.h"
#include "tessera/planner/pinned_host_blocks.h"
#include "tessera/planner/sharding.h"

namespace tessera::planner {
namespace {

using Cat = MemoryCategory;
constexpr MemorySpace kDevice = MemorySpace::device;

// Elements of the non-persistent parameters still gathered when backward begins.
int64_t gathered_at_turn(const TensorInventory& inventory, const DeepSpeedZero3Options& z) {
  const auto& tensors = inventory.tensors;
  std::vector<bool> kept(tensors.size(), false);
  int64_t after = 0;  // elements of the tensors after this one in execution order
  for (size_t i = tensors.size(); i-- > 0;) {
    const size_t unique = tensors[i].tied_to >= 0 ? static_cast<size_t>(tensors[i].tied_to) : i;
    if (after == 0 || 2 * after < z.max_reuse_distance) kept[unique] = true;  // the last tensor is in use at the turn
    after += tensors[i].numel();
  }
  int64_t kept_numel = 0, released_numel = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].tied_to >= 0 || tensors[i].numel() <= z.param_persistence_threshold) continue;
    (kept[i] ? kept_numel : released_numel) += tensors[i].numel();
  }
  const int64_t prefetch = std::min({z.prefetch_bucket_size, std::max<int64_t>(0, z.max_live_parameters - kept_numel), released_numel});
  return kept_numel + prefetch;
}

// The pipeline engine's optimizers' 16-bit flat groups on one stage, counted as
// one: a multiple of nccl_start_alignment_factor (2) · dp elements (bf16_optimizer.py
// at 36ad3119d; stage_1_and_2.py at v0.9.5, flatten_dense_tensors_aligned).
int64_t flat_group_numel(const StageShape& stage, const EstimateRequest& r) { return padded_flat_numel(stage.params, 2 * r.layout.shard_ranks()); }

}  // namespace

void add_deepspeed_zero3_states(const Model& model, const EstimateRequest& r, MemoryBreakdown& out) {
  const DeepSpeedZero3Options& z = r.plugin.deepspeed;
  const int64_t dp = r.layout.shard_ranks();
  const int64_t width = compute_bytes(r.training.precision);
  // In the order model.parameters() gives them, which the optimizer's groups,
  // and so the sub-groups, keep (module_order.h).
  std::vector<int64_t> partition_numels;
  int64_t partitions = 0, persistent = 0;
  for (const int index : module_parameter_order(model.config, model.inventory)) {
    const int64_t numel = model.inventory.tensors[static_cast<size_t>(index)].numel();
    partition_numels.push_back(shard_numel(numel, dp));
    partitions += partition_numels.back();
    if (numel <= z.param_persistence_threshold) persistent += numel;
  }
  if (z.offload_param) {
    out.add(Cat::parameters, kDevice, persistent * width);
    add_host_blocks({{Cat::parameters, partitions * width}}, HostBlockSizing::pinned, out);
  } else {
    out.add(Cat::parameters, kDevice, (partitions + persistent) * width);
  }
  const int64_t optimizer_states = partitions * 4 * optimizer_state_count(r.training.optimizer);
  if (r.plugin.cpu_offload) {
    add_host_blocks(deepspeed_offload_gradient_blocks(partition_numels, z.sub_group_size, width),
                    r.plugin.pin_memory ? HostBlockSizing::pinned : HostBlockSizing::exact, out);
    out.add(Cat::master_weights, MemorySpace::host, partitions * 4);
    out.add(Cat::optimizer_states, MemorySpace::host, optimizer_states);
  } else {
    out.add(Cat::gradients, kDevice, partitions * width);
    out.add(Cat::master_weights, kDevice, is_mixed_precision(r.training.precision) ? partitions * 4 : 0);
    out.add(Cat::optimizer_states, kDevice, optimizer_states);
  }
  out.add(Cat::chunk_buffers, kDevice, gathered_at_turn(model.inventory, z) * width);
  out.add(Cat::comm_buffers, kDevice, z.reduce_bucket_size * width);
}

// The pipeline engine's optimizer (deepspeed_pipeline.h): one pipeline stage of
// one tensor-parallel rank. bf16: the BF16_Optimizer's gradients and fp32
// buffer; fp16: DeepSpeedZeroOptimizer's gradients and its contiguous copy of
// the partition's.
void add_deepspeed_pipeline_states(const StageShape& stage, const EstimateRequest& r, MemoryBreakdown& out) {
  const int64_t flat = flat_group_numel(stage, r);
  const int64_t partition = flat / r.layout.shard_ranks();
  const bool fp16 = r.training.precision == Precision::fp16;
  out.add(Cat::parameters, kDevice, flat * 2);
  out.add(Cat::gradients, kDevice, stage.params * 2 + (fp16 ? partition * 2 : flat * 4));
  out.add(Cat::master_weights, kDevice, partition * 4);
  out.add(Cat::optimizer_states, kDevice, partition * 4 * optimizer_state_count(r.training.optimizer));
}

// What the reduction after the schedule holds, where it exceeds the activations
// and logits it outlives. bf16: the flat groups' bf16 copy for the all-reduce;
// fp16: the ipg bucket, released before the step, or then the partition's
// flattened gradients and their fp32 cast.
void add_deepspeed_reduce_copy(const StageShape& stage, const EstimateRequest& r, MemoryBreakdown& out) {
  const int64_t flat = flat_group_numel(stage, r);
  const int64_t held = r.training.precision == Precision::fp16
                           ? std::max<int64_t>(r.plugin.deepspeed.reduce_bucket_size * 2, flat / r.layout.shard_ranks() * (2 + 4))
                           : flat * static_cast<int64_t>(kDeepSpeedReduceWireBytes);
  const int64_t freed = out[Cat::activations].device + out[Cat::logits].device;
  out.add(Cat::comm_buffers, kDevice, std::max<int64_t>(0, held - freed));
}

}  // namespace tessera::planner
