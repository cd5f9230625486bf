#include "tessera/engine/comm/ordered_reduce.h"

#include <cstring>

#include "tessera/engine/kernels/ordered_reduce.h"

namespace tessera::engine::comm {
namespace {

using kernels::combine_in_rank_order;

template <typename T>
void reduce_typed(T* out, const T* slices, int n, size_t count, ReduceOp op) {
  std::memcpy(out, slices, count * sizeof(T));
  // Slice by slice, so each element sees the operands in rank order and the
  // inner loop streams through memory.
  const bool take_max = op == ReduceOp::max;
  for (int i = 1; i < n; ++i) {
    const T* slice = slices + static_cast<size_t>(i) * count;
    for (size_t k = 0; k < count; ++k) out[k] = combine_in_rank_order(out[k], slice[k], take_max);
  }
}

// 16-bit elements: widened, reduced in fp32 in rank order, rounded once.
template <typename Half>
void reduce_narrow(Half* out, const Half* slices, int n, size_t count, ReduceOp op) {
  const bool take_max = op == ReduceOp::max;
  for (size_t k = 0; k < count; ++k) {
    float value = widen(slices[k]);
    for (int i = 1; i < n; ++i) value = combine_in_rank_order(value, widen(slices[static_cast<size_t>(i) * count + k]), take_max);
    out[k] = narrow<Half>(value);
  }
}

}  // namespace

void reduce_in_rank_order(void* out, const void* slices, int n, size_t count, DataType type, ReduceOp op) {
  if (n <= 0 || count == 0) return;
  switch (type) {
    case DataType::f32: reduce_typed(static_cast<float*>(out), static_cast<const float*>(slices), n, count, op); break;
    case DataType::f64: reduce_typed(static_cast<double*>(out), static_cast<const double*>(slices), n, count, op); break;
    case DataType::bf16: reduce_narrow(static_cast<bf16*>(out), static_cast<const bf16*>(slices), n, count, op); break;
    case DataType::f16: reduce_narrow(static_cast<fp16*>(out), static_cast<const fp16*>(slices), n, count, op); break;
  }
}

}  // namespace tessera::engine::comm
