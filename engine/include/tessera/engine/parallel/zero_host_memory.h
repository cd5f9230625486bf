// ZeRO's reduction memory on the host (zero_overlap.h's ZeroReductionMemory):
// the CPU engine's low_level_zero (data_parallel.h), and the tests' stand-in
// for the GPU step's device copies, which do the same element for element
// (cuda/zero_shards.cpp: cudaMemsetAsync, residual_add, cudaMemcpy2DAsync,
// cudaMemcpyAsync).
#pragma once

#include <algorithm>
#include <cstdint>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"
#include "tessera/engine/parallel/zero_overlap.h"

namespace tessera::engine {

template <typename T>
class HostZeroMemory final : public ZeroReductionMemory {
 public:
  // `full_gradients`: the padded flat gradients (stage 1), or null;
  // `gradient_shard`: this rank's reduced gradients (stage 2), or null.
  HostZeroMemory(T* full_gradients, T* gradient_shard, int64_t shard_numel, int64_t dp, int64_t rank)
      : full_(full_gradients), shard_(gradient_shard), shard_numel_(shard_numel), dp_(dp), rank_(rank) {}

  Status zero(void* at, int64_t numel) override {
    std::fill_n(static_cast<T*>(at), numel, T{});
    return Status::success();
  }
  Status add_into_shard(int64_t offset, const void* reduced, int64_t numel) override {
    const T* mine = static_cast<const T*>(reduced);
    T* into = shard_ + offset;
    for (int64_t j = 0; j < numel; ++j) into[j] = narrow<T>(math::residual_sum(widen(into[j]), widen(mine[j])));
    return Status::success();
  }
  Status gather_piece(void* bucket, int64_t begin, int64_t numel) override {
    for (int64_t r = 0; r < dp_; ++r) std::copy_n(full_ + r * shard_numel_ + begin, numel, static_cast<T*>(bucket) + r * numel);
    return Status::success();
  }
  Status scatter_piece(const void* reduced, int64_t begin, int64_t numel) override {
    std::copy_n(static_cast<const T*>(reduced), numel, full_ + rank_ * shard_numel_ + begin);
    return Status::success();
  }

 private:
  T* full_;
  T* shard_;
  int64_t shard_numel_, dp_, rank_;
};

}  // namespace tessera::engine
