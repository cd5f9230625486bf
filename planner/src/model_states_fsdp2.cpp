// FSDP2's model states as torchtitan applies it (--runtime torchtitan, torch_fsdp).
//  - Units (pytorch/torchtitan at b5bcd76c66d0acb1a08b176d9639425bc55e0b2a,
//    torchtitan/distributed/fsdp.py, apply_fsdp_to_decoder): the token embeddings,
//    each transformer block, and the final norm with the output head; with tied
//    embeddings, the embeddings, norm and head are one unit. Blocks and the
//    embeddings reshard after forward ("default" policy without a pipeline); the
//    norm-and-head unit (or the tied unit) does not, "since FSDP would prefetch
//    them immediately". shard_grad_op stands for reshard_after_forward "never".
//  - MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): the model is built
//    in fp32, so the sharded parameters are the optimizer's fp32 weights (no
//    separate master copy), the sharded gradients fp32, and the gathered
//    parameters bf16 (torchtitan's mixed_precision_param allows bfloat16 or float32).
//  - Per-parameter sharding on dim 0 (pytorch/pytorch at
//    8fc2039decebd92b15b38296df8bf9aa13275be0, torch/distributed/fsdp/_fully_shard/
//    _fsdp_collectives.py, _get_dim0_padded_size): a parameter of r rows holds
//    ceil(r / dp) rows on every rank, and is gathered padded to dp · ceil(r / dp) rows.
//  - Gathering (foreach_all_gather): the unit being computed and the one
//    prefetched next are unsharded at once.
//  - Reducing (foreach_reduce): a unit's unsharded gradients in the parameters'
//    dtype are copied into an fp32 reduce-scatter input of the padded size and
//    then freed; the previous unit's input lives until this unit's reduce
//    starts (_fsdp_param_group.py, post_backward clears reduce_scatter_state).
#include <algorithm>
#include <vector>

#include "model_states.h"
#include "tessera/planner/fsdp_offload.h"
#include "tessera/planner/pinned_host_blocks.h"
#include "tessera/planner/sharding.h"

namespace tessera::planner {
namespace {

using Cat = MemoryCategory;
constexpr MemorySpace kDevice = MemorySpace::device;
constexpr int64_t kReduceBytes = 4;  // reduce_dtype float32 (torchtitan's mixed_precision_reduce)

struct Unit {
  int64_t numel = 0;    // unpadded
  int64_t shard = 0;    // elements on one rank
  int64_t padded = 0;   // dp · shard: the unit gathered
};

// A parameter's elements on one rank: ceil(rows / dp) rows.
int64_t dim0_shard(const TensorInfo& tensor, int64_t dp) {
  const int64_t rows = tensor.shape.empty() ? 1 : tensor.shape[0];
  return (rows + dp - 1) / dp * (tensor.numel() / rows);
}

void add_tensor(Unit& unit, const TensorInfo& tensor, int64_t dp) {
  const int64_t shard = dim0_shard(tensor, dp);
  unit.numel += tensor.numel();
  unit.shard += shard;
  unit.padded += dp * shard;
}

// The units in execution order: embeddings, blocks, norm and head (untied), or
// the blocks then the one tied unit.
std::vector<Unit> fsdp2_units(const Model& model, int64_t dp, bool tied) {
  const int num_layers = static_cast<int>(model.config.num_layers);
  std::vector<Unit> units(static_cast<size_t>(num_layers + 2));  // [0] embeddings, [1..L] blocks, [L+1] head
  for (const FlatParameter& p : flat_parameter_order(model.inventory)) {
    const TensorInfo& tensor = model.inventory.tensors[static_cast<size_t>(p.tensor_index)];
    const size_t index = tensor.layer == kEmbeddingLayer ? 0 : (tensor.layer >= num_layers ? units.size() - 1 : static_cast<size_t>(tensor.layer + 1));
    add_tensor(units[index], tensor, dp);
  }
  if (tied) {
    Unit& root = units.back();
    root.numel += units.front().numel;
    root.shard += units.front().shard;
    root.padded += units.front().padded;
    units.erase(units.begin());
  }
  return units;
}

int64_t largest_pair(const std::vector<Unit>& units, size_t first, size_t last) {
  int64_t best = 0;
  for (size_t i = first; i < last; ++i) best = std::max(best, units[i].padded + (i + 1 < last ? units[i + 1].padded : 0));
  return best;
}

}  // namespace

void add_fsdp2_states(const Model& model, const EstimateRequest& r, MemoryBreakdown& out) {
  const int64_t dp = r.layout.shard_ranks();
  const int64_t gathered_bytes = compute_bytes(r.training.precision);  // param_dtype bf16, or fp32 unmixed
  const bool tied = model.config.tie_word_embeddings;
  const std::vector<Unit> units = fsdp2_units(model, dp, tied);
  int64_t shard = 0, padded_total = 0;
  for (const Unit& u : units) {
    shard += u.shard;
    padded_total += u.padded;
  }
  // CPUOffloadPolicy: the shards on the host, and one unit's fp32 shard on
  // the device on its way up, one reduced fp32 gradient shard on its way down (fsdp_offload.h).
  const MemorySpace shards = r.plugin.fsdp_offload() ? MemorySpace::host : kDevice;
  out.add(Cat::optimizer_states, shards, shard * 4 * optimizer_state_count(r.training.optimizer));
  if (!r.plugin.fsdp_offload()) {
    out.add(Cat::parameters, kDevice, shard * 4);
    out.add(Cat::gradients, kDevice, shard * 4);
  } else {
    // CPUOffloadPolicy's pin_memory (True by default) pins each parameter's
    // padded fp32 shard (torch/distributed/fsdp/_fully_shard/_fsdp_param.py
    // at 010ae4a8, _init_sharded_param), and foreach_reduce copies each
    // reduced gradient shard to the host by a non-blocking .to("cpu") on the
    // first micro-batch (_fsdp_collectives.py at 010ae4a8), whose
    // destination _to_copy pins (aten/src/ATen/native/TensorConversions.cpp
    // at fc9325ea, pin_out): blocks per parameter, each held at the pinned
    // allocator's power of two (pinned_host_blocks.h).
    std::vector<PinnedHostBlock> blocks;
    for (const FlatParameter& p : flat_parameter_order(model.inventory)) {
      const int64_t bytes = dim0_shard(model.inventory.tensors[static_cast<size_t>(p.tensor_index)], dp) * 4;
      blocks.push_back({Cat::parameters, bytes});
      blocks.push_back({Cat::gradients, bytes});
    }
    add_host_blocks(blocks, HostBlockSizing::pinned, out);
    int64_t largest = 0;
    for (const Unit& u : units) largest = std::max(largest, u.shard);
    out.add(Cat::parameters, kDevice, largest * kFsdpOffloadBytesPerElement);
    out.add(Cat::gradients, kDevice, largest * kFsdpOffloadBytesPerElement);
  }

  // Gathered parameters: every unit under shard_grad_op; otherwise two adjacent
  // units, beside the tied unit that stays gathered from forward to backward.
  const size_t blocks_end = tied ? units.size() - 1 : units.size();
  int64_t gathered = padded_total;
  if (r.plugin.fsdp_strategy == FsdpStrategy::full_shard) gathered = tied ? units.back().padded + largest_pair(units, 0, blocks_end) : largest_pair(units, 0, units.size());
  out.add(Cat::chunk_buffers, kDevice, gathered * gathered_bytes);

  // Backward, last unit first: a unit's gradients and its fp32 reduce-scatter
  // input beside the previous unit's. The tied unit reduces last, its gradients
  // held from the head's backward on.
  std::vector<size_t> order;
  for (size_t k = blocks_end; k-- > 0;) order.push_back(k);
  if (tied) order.push_back(units.size() - 1);
  int64_t reduce = 0, previous_input = 0;
  for (size_t k : order) {
    const int64_t held = tied && k + 1 < units.size() ? units.back().numel * gathered_bytes : 0;
    reduce = std::max(reduce, units[k].numel * gathered_bytes + std::max(previous_input, units[k].padded) * kReduceBytes + held);
    previous_input = units[k].padded;
  }
  out.add(Cat::comm_buffers, kDevice, reduce);
}

}  // namespace tessera::planner
