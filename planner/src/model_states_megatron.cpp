// Megatron-Core's model states (--runtime megatron, hybrid_parallel), read from
// NVIDIA/Megatron-LM at d98e8a64ddf34856e74b24714e3bedb2f5a39553:
//  - DistributedDataParallel keeps every gradient in one contiguous main-gradient
//    buffer (megatron/core/distributed/param_and_grad_buffer.py, _ParamAndGradBuffer:
//    grad_data = torch.zeros(numel, dtype=grad_dtype)); under bf16 it is fp32, since
//    megatron/training/arguments.py sets accumulate_allreduce_grads_in_fp32 for
//    bf16 ("bfloat16 requires gradient accumulation and all-reduce to be done in
//    fp32"), and in the parameters' dtype otherwise, or with --grad-reduce-in-bf16
//    (core_v0.14.0 arguments.py turns accumulate_allreduce_grads_in_fp32 off for it).
//  - The optimizer keeps fp32 main parameters and Adam's two fp32 moments; from a
//    16-bit buffer (fp16, --grad-reduce-in-bf16) it also casts each gradient of
//    its shard to an fp32 main gradient (distrib_optimizer.py,
//    _copy_model_grads_to_main_grads: shard_model_grad.float()).
//  Bytes per parameter, as docs/user-guide/features/dist_optimizer.md tabulates
//  them with Adam: fp16 2 + 2 + 4 + 4 + 8 = 20, bf16 2 + 4 + 4 + 8 = 18, fp32
//  4 + 4 + 8 = 16; with the distributed optimizer (--zero-stage 1) the fp32 main
//  parameters, main gradients and moments are sharded over dp: 4 + 16/d, 6 + 12/d
//  and 8 + 8/d.
//  - With the distributed optimizer the parameters move into a contiguous buffer
//    too (param_data), laid out as the gradients: parameters in reverse order,
//    each starting at a multiple of 64 elements (optimizer/param_layout.py,
//    pad_param_start), the bucket ending at a multiple of lcm(dp, 128)
//    (pad_bucket_end), so that every rank's shard is numel / dp. One bucket:
//    DistributedDataParallel sets bucket_size = None without --overlap-grad-reduce
//    (distributed_data_parallel.py). The tensors are Tessera's inventory on one
//    tp rank; Megatron fuses q, k and v (and gate and up) into one tensor, which
//    changes the 64-element padding only where a width is not a multiple of 64.
#include <numeric>

#include "model_states.h"
#include "tessera/planner/fp8.h"
#include "tessera/planner/gradient_accumulation.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::planner {
namespace {

using Cat = MemoryCategory;
constexpr MemorySpace kDevice = MemorySpace::device;

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

bool holds(const StageShape& stage, const TensorInfo& tensor, int num_layers, int64_t pp) {
  if (tensor.layer == kEmbeddingLayer) return stage.first;
  if (tensor.layer >= num_layers) return stage.last && (tensor.tied_to < 0 || pp > 1);  // the head; a tied copy only with a pipeline
  for (const StageLayers& chunk : stage.chunks) {
    if (tensor.layer >= chunk.first_layer && tensor.layer < chunk.first_layer + chunk.num_layers) return true;
  }
  return false;
}

// Elements of the stage's parameter and gradient buffer under the distributed optimizer.
int64_t distributed_buffer_numel(const Model& model, const StageShape& stage, int64_t tp, int64_t pp, int64_t dp) {
  const TensorInventory local = tp_rank_inventory(model.inventory, tp);
  const int num_layers = static_cast<int>(model.config.num_layers);
  int64_t end = 0;
  for (auto it = local.tensors.rbegin(); it != local.tensors.rend(); ++it) {  // reverse order, as Megatron lays them out
    if (!holds(stage, *it, num_layers, pp)) continue;
    end = round_up(end, 64) + it->numel();
  }
  return round_up(end, std::lcm(dp, int64_t{128}));
}

// --tp-comm-overlap: Transformer Engine's userbuffers, held for the whole run.
// Megatron-LM's _initialize_tp_communicators (megatron/training/initialize.py
// at 2fd6e2b74efca73a1f2d27b89bb5419384b4d3bf) gives TE's initialize_ub the
// shape [seq_length · micro_batch_size / cp, hidden_size] and use_fp8;
// initialize_ub (transformer_engine/pytorch/module/base.py at
// 0004dbd0231cb02d7b47d45344900a494fa13f46) makes one communicator for each
// of 10 GEMMs (qkv, proj, fc1, fc2 fprop; qkv, proj, fc1, fc2 dgrad; qkv and
// fc1 wgrad), each registering a userbuffer of that shape
// (transformer_engine/pytorch/csrc/comm_gemm_overlap.h at
// 0067163550cbea7ba9a59d2f51612e41f3328d0a: ubuf_bytes = sample.numel() ·
// sample.element_size()), bf16 (its default dtype), and one byte for the six
// all-gather ones under FP8 (fp8_buf: qkv_fprop, qkv_dgrad, proj_dgrad,
// fc1_fprop, fc1_dgrad, fc2_dgrad).
int64_t userbuffer_bytes(const Model& model, const EstimateRequest& r) {
  const int64_t elements = r.training.micro_batch_size * r.local_seq_len() * model.config.hidden_size;
  const int64_t all_gather_bytes = is_fp8(r.training.precision) ? 1 : 2;
  return elements * (6 * all_gather_bytes + 4 * 2);
}

}  // namespace

void add_megatron_states(const Model& model, const StageShape& stage, const EstimateRequest& r, MemoryBreakdown& out) {
  const Precision precision = r.training.precision;
  const int64_t param_bytes = compute_bytes(precision);
  const int64_t grad_bytes = megatron_main_grad_bytes(r.plugin, precision);
  const int64_t main_grad_copy_bytes = grad_bytes == 2 ? 4 : 0;  // 16-bit gradients cast to fp32 for the step
  const int64_t master_bytes = is_mixed_precision(precision) ? 4 : 0;
  const int64_t optimizer_bytes = 4 * optimizer_state_count(r.training.optimizer);
  const bool distributed = r.plugin.effective_zero_stage() == 1;
  const int64_t buffer = distributed ? distributed_buffer_numel(model, stage, r.layout.tp, r.layout.pp, r.layout.shard_ranks()) : stage.params;
  const int64_t sharded = distributed ? buffer / r.layout.shard_ranks() : stage.params;
  out.add(Cat::parameters, kDevice, buffer * param_bytes);
  out.add(Cat::gradients, kDevice, buffer * grad_bytes + sharded * main_grad_copy_bytes);
  out.add(Cat::master_weights, kDevice, sharded * master_bytes);
  out.add(Cat::optimizer_states, kDevice, sharded * optimizer_bytes);
  if (r.plugin.tp_comm_overlap && r.layout.tp > 1) out.add(Cat::comm_buffers, kDevice, userbuffer_bytes(model, r));
}

}  // namespace tessera::planner
