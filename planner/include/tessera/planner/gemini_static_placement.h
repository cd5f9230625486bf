// What ColossalAI's static placement really moves to the host, chunk by chunk.
//
// Source: hpcaitech/ColossalAI v0.5.0 (d322ff8c), colossalai/zero/gemini/
// placement_policy.py, StaticPlacementPolicy:
//  - __init__: offload_param_frac is ignored (set to 0, with a warning) unless
//    shard_param_frac is 1 and offload_optim_frac is 1.
//  - setup_grads_device: the target is offload_optim_frac × total_chunk_mem,
//    where total_chunk_mem sums, over every parameter, the memory of the chunk
//    holding it, so a chunk of ten tensors counts ten times. It then walks the
//    chunks and sends a chunk's fp32 master weights and optimizer states to the
//    host while the memory already sent is below the target. The fractions are
//    therefore not fractions of the states: with many tensors per chunk a small
//    offload_optim_frac already sends every chunk (gpt2-medium's 0.25 sends all
//    of them). The walk is over a Python set of chunks, in an order no one can
//    know before the run; Tessera walks them in packing order (chunks.h), which
//    gives the same count wherever the chunks have one capacity.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/chunks.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// How many chunks (the first ones in packing order) keep their fp32 master
// weights and optimizer states on the host under offload_optim_frac.
int64_t offloaded_optimizer_chunks(const ChunkLayout& layout, double offload_optim_frac);

// The leading chunks whose fp32 states live on the host under a placement:
// all of them under `cpu`, the walk above under `static`, none under `cuda`
// (and `auto`, which the planner solves against the GPU and the engine runs
// as the static placement solved).
int64_t optimizer_chunks_on_host(const ChunkLayout& layout, const GeminiOptions& gemini);

// An offload_optim_frac under which ColossalAI offloads exactly `chunks`
// chunks: halfway between the targets of chunks - 1 and chunks, so that
// rounding of the fraction cannot change the count.
double offload_optim_frac_for(const ChunkLayout& layout, int64_t chunks);

// The elements of the first `chunks` chunks: what their offload moves, per
// rank after sharding divided by dp.
int64_t leading_chunk_elements(const ChunkLayout& layout, int64_t chunks);

// keep_gathered_chunk_mem of StaticPlacementPolicy in elements (chunk_mem and
// the budget scale by the same element size): (1 - shard_param_frac) × the
// counted total. 0 outside `static`. gemini_gathering.h spends it.
double kept_gathered_elements(const ChunkLayout& layout, const GeminiOptions& gemini);

// Per chunk, whether its 16-bit parameter and gradient shards live on the
// host. `cpu`: all; `cuda` and `auto` (solved as a share in the memory
// model, and not run by the engine unless all or none): none. `static`:
// evict_tensors moves a released chunk to the host while the memory of the
// released chunks not yet moved is above keep_cuda_chunk_mem = (1 -
// offload_param_frac) × the counted total (setup_grads_device). Forward
// releases one chunk at a time (the one the next layer no longer uses), so a
// chunk goes to the host when its own memory is above that budget: all of
// them at an effective fraction of 1, none at 0, and in between only chunks
// larger than the budget (a large tensor's own chunk), since the counted
// total is many times the chunks' memory.
std::vector<bool> parameter_chunks_on_host(const ChunkLayout& layout, const GeminiOptions& gemini);

// offload_param_frac as ColossalAI applies it: 0 unless shard_param_frac and
// offload_optim_frac are both 1.
double effective_offload_param_frac(const GeminiOptions& gemini);

// Whether a chunk trades its 16-bit shard with the host every step: its fp32
// states on the host while its 16-bit shards live on the device. ColossalAI
// sends such a chunk's reduced gradients to the optimizer's side
// (placement_policy.py setup_grads_device sets grads_device to the CPU for the
// chunks it offloads; gemini_ddp.py grad_handle then move_chunk(grad_chunk,
// grads_device[p], force_copy=True)) into the chunk's pinned host shard,
// which chunk.py shard_move keeps under pin_memory, and the updated weights
// go back up from the host at the next access (chunk.py optim_update,
// __paired_shard_move). That host shard is counted under gradients on the
// host; the updated 16-bit weights travel up through it.
inline bool exchanges_through_host(bool optimizer_on_host, bool parameters_on_host) { return optimizer_on_host && !parameters_on_host; }

}  // namespace tessera::planner
