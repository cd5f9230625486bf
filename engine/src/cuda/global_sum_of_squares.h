// The square of the GPU step's global gradient norm, summed as the CPU
// engine's ParallelStrategy::global_sum_of_squares sums it (parallel/strategy.h):
// the sum of squares of each range of its gradients that this rank counts
// (device/tensor_parallel_part.h, gradient_norm_runs: under tensor
// parallelism a replicated parameter on tp rank 0 only), then summed over
// each group in turn: ZeRO's data-parallel ranks (whose shards differ), then
// the tensor-parallel ranks. Shared by the replicated step's norm
// (tensor_parallel_step.h), ZeRO's shard (zero_shards.h) and FSDP's fp32
// shard (fsdp_shards.h, one run over its data-parallel group); the group
// sums also by ZeRO-Offload's host sum (zero_offload.h).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/half.h"

namespace tessera::engine::cuda {

// `runs`: [begin, end) ranges of `grads`; `groups`: null or one-rank ones
// skipped. `result`: a device double and its overflow flag after it;
// `workspace`: sum_of_squares_workspace_bytes of the longest run. Each
// group's sum is one all-reduce of 8 bytes, blocking, on device memory.
// `G`: bf16 or float.
template <typename G>
Result<double> global_sum_of_squares(const G* grads, const std::vector<std::pair<int64_t, int64_t>>& runs, double* result, void* workspace,
                                     std::initializer_list<comm::Communicator*> groups);

// `sum` summed over each of `groups` in turn (null or one-rank ones
// skipped) through the device double `scratch`: one blocking all-reduce of 8
// bytes a group (NCCL's buffers are device memory).
Result<double> sum_over_groups(double sum, double* scratch, std::initializer_list<comm::Communicator*> groups);

}  // namespace tessera::engine::cuda
