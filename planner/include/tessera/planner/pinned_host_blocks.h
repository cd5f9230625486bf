// The blocks of page-locked (pinned) host memory that offload takes, per
// layout, and what a pinned allocator holds for each: the one description
// the memory model and the engine's GPU step both read, so that a GPU run's
// host bytes per category are the planner's.
//
// The engine's GPU step takes them from its pinned allocator
// (engine/device/pinned_host_allocator.h), which, as PyTorch's
// CachingHostAllocator does, rounds every request up to a power of two
// (pinned_block_bytes) and books the rounded block under its category. The
// CPU engine keeps the same buffers in ordinary (pageable) memory, exactly
// as large as requested.
//
// Whether the runtimes the planner models round them too:
//  - PyTorch FSDP1's CPUOffload (ColossalAI's TorchFSDPPlugin): yes, per
//    flat parameter. Each unit's fp32 shard and its `_cpu_grad` come from
//    Tensor.pin_memory() (torch/distributed/fsdp/_flat_param.py at 01caf79e,
//    FlatParamHandle.shard, see fsdp_offload.h), which takes the CUDA host
//    allocator (aten/src/ATen/cuda/PinnedMemoryAllocator.h at 06bb9e25,
//    getPinnedMemoryAllocator; aten/src/ATen/cuda/CachingHostAllocator.cpp
//    at 03258ab2 registers the caching one for kCUDA), whose allocate rounds
//    to c10::llvm::PowerOf2Ceil (aten/src/ATen/core/CachingHostAllocator.h at
//    04456333). fsdp1_offload_pinned_blocks lists them.
//  - FSDP2's CPUOffloadPolicy (--runtime torchtitan): yes, per parameter
//    (model_states_fsdp2.cpp).
//  - ColossalAI's LowLevelZeroOptimizer with cpu_offload (low_level_zero,
//    hybrid_parallel): no. Its master shard is `.to("cpu")` and each step's
//    gradient `.to(master_param.device)`, blocking copies into pageable
//    memory (colossalai/zero/low_level/low_level_optim.py at d322ff8c,
//    _create_master_param_current_rank, step).
//  - ColossalAI's Gemini: yes, and more of them than it offloads. A chunk's
//    host shard is torch.empty(pin_memory=True) (colossalai/zero/gemini/
//    chunk/chunk.py at d322ff8c, close_chunk and init_grad_chunk), and
//    torch.empty pins through the same allocator (aten/src/ATen/
//    EmptyTensor.cpp at 2cc1a34a, GetCPUAllocatorMaybePinned). Under
//    pin_memory, which GeminiPlugin's default enable_async_reduce=True sets
//    (colossalai/booster/plugin/gemini_plugin.py at d322ff8c), every chunk
//    not kept gathered makes that shard when it closes and keeps it when it
//    moves to the device (shard_move), and so does its gradient chunk; the
//    fp32 master chunks are chunks too (gemini_ddp.py _init_chunks registers
//    them with the same pin_memory). colossalai_gemini_pinned_blocks lists
//    one chunk's; without pin_memory the host holds, pageable, what Tessera's
//    engine holds (gemini_chunk_host_blocks).
//  - DeepSpeed ZeRO-3's offload_optimizer (--runtime deepspeed --cpu-offload):
//    yes, under its pin_memory (offload_config.py at edaa722: True by
//    default), through tensor.pin_memory() (accelerator/
//    abstract_accelerator.py, pin_memory, unless DS_PIN_MEMORY_BACKEND=
//    native): the flat buffer of the rank's gradient partitions and each
//    sub-group's fp32 gradients (deepspeed_offload_gradient_blocks). Its fp32
//    partitions and CPU Adam's moments stay pageable. Under offload_param the
//    16-bit partitions' flat buffer is pinned whatever pin_memory says
//    (model_states_deepspeed.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/memory_categories.h"
#include "tessera/planner/sharding.h"

namespace tessera::planner {

// A request for pinned memory: its bytes, booked under `category` on the host.
struct PinnedHostBlock {
  MemoryCategory category = MemoryCategory::runtime;
  int64_t bytes = 0;
};

// What a pinned allocator holds for a request of `bytes`: the next power of
// two (PyTorch's CachingHostAllocator::allocate, cited above), 0 for none.
int64_t pinned_block_bytes(int64_t bytes);

// ZeRO-Offload in the GPU step (engine/src/cuda/zero_offload.h): one
// transfer buffer of the rank's fp32 gradient shard, under gradients. The
// master weights and optimizer states stay in pageable memory.
PinnedHostBlock zero_offload_transfer_block(int64_t shard_numel);

// FSDP's CPU offload in the GPU step (engine/src/cuda/fsdp_shards.h): the
// rank's fp32 weight shard of every unit in one block, and its fp32
// gradient shard in another.
struct FsdpOffloadBlocks {
  PinnedHostBlock weights;    // parameters
  PinnedHostBlock gradients;  // gradients
};
FsdpOffloadBlocks fsdp_offload_blocks(int64_t shard_numel);

// PyTorch FSDP1's CPU offload: per unit, its fp32 shard and its _cpu_grad.
std::vector<PinnedHostBlock> fsdp1_offload_pinned_blocks(const FsdpLayout& layout);

// A Gemini chunk's host blocks in the GPU step (engine/device/
// gemini_device_chunks.h), `shard` elements each: with its 16-bit shards on
// the host, its weight shard (parameters) and gradient shard (gradients);
// on the device with its states on the host (exchanges_through_host), the
// host copy it exchanges through (gradients). A block of 0 bytes is none.
struct GeminiChunkHostBlocks {
  PinnedHostBlock weights, gradients, exchange;
};
GeminiChunkHostBlocks gemini_chunk_host_blocks(int64_t shard, bool shards_on_host, bool optimizer_on_host, int64_t parameter_bytes,
                                               int64_t gradient_bytes);

// ColossalAI's Gemini under pin_memory: a chunk's pinned host shards,
// `shard` elements each, whatever its placement: its 16-bit weights
// (parameters), its gradient chunk's (gradients), and its fp32 master
// chunk's (master weights). The optimizer's moments of an offloaded chunk
// are not chunks, and stay pageable (colossalai/nn/optimizer/hybrid_adam.py
// at d322ff8c, step: torch.zeros_like(p, device=target_device)).
std::vector<PinnedHostBlock> colossalai_gemini_pinned_blocks(int64_t shard, int64_t parameter_bytes, int64_t gradient_bytes,
                                                             int64_t master_bytes);
// Whether a plan holds those blocks: Gemini as ColossalAI runs it (not
// Tessera's engine, which pins only what it offloads) under pin_memory.
bool colossalai_pins_every_chunk(const PluginOptions& plugin, const TrainingOptions& training);

// DeepSpeed ZeRO-3 with offload_optimizer on the CPU (runtime/zero/stage3.py
// at edaa722): the rank's gradient partitions in one flat host buffer in the
// gradients' dtype (grad_partitions_flat_buffer, on self.device, the CPU),
// and the fp32 gradients the optimizer steps on, a buffer per sub-group
// (initialize_optimizer_states: subgroup_gradient_buffer). A sub-group takes
// parameters in order until their partitions reach sub_group_size elements
// (_create_fp16_sub_groups). `partitions` are the rank's, parameter by
// parameter; all blocks are under gradients, pinned when pin_memory is on.
std::vector<PinnedHostBlock> deepspeed_offload_gradient_blocks(const std::vector<int64_t>& partitions, int64_t sub_group_size,
                                                               int64_t gradient_bytes);

// How the host holds the blocks: as requested (the CPU engine; a runtime
// whose host buffers are pageable), or as a pinned allocator does.
enum class HostBlockSizing { exact, pinned };

// Adds each block's bytes, sized so, to its category on the host.
void add_host_blocks(const std::vector<PinnedHostBlock>& blocks, HostBlockSizing sizing, MemoryBreakdown& out);

}  // namespace tessera::planner
