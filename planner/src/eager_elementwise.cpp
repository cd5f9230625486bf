#include "tessera/planner/eager_elementwise.h"

namespace tessera::planner {

ElementwiseBytes torchtitan_eager_block_bytes(const ModelConfig& c, int64_t dtype_bytes) {
  const auto d = static_cast<double>(dtype_bytes);  // the activations' dtype
  constexpr double f = 4;                            // fp32, where the norms and RoPE compute
  const double cast = dtype_bytes == 4 ? 0 : d + f;  // read one dtype, write the other
  const auto h = static_cast<double>(c.hidden_size);
  const auto q = static_cast<double>(c.q_width());
  const auto kv = static_cast<double>(c.kv_width());
  const auto I = static_cast<double>(c.intermediate_size);

  // Per element of the hidden state. Forward: the cast up, pow (read, write), mean
  // (read), x * rsqrt (read, write), the cast down, * weight (read, write).
  const double norm_forward = cast + 2 * f + f + 2 * f + cast + 2 * d;
  // Backward: * weight (the input's gradient read and written, the weight's read
  // from the gradient and the saved output), the cast down's, x * rsqrt (the
  // gradient times rsqrt read and written, the row sums of gradient × x read),
  // mean's (the expanded gradient written), pow's (gradient and x read, written),
  // the two gradients of x added, the cast up's.
  const double norm_backward = 4 * d + cast + 4 * f + f + 3 * f + 3 * f + cast;
  // Per element of q and k: the cast up, the complex multiply (read, write), the cast down; backward the same.
  const double rope = cast + 2 * f + cast;
  // repeat_kv copies keys and values from kv_width to q_width (summed back in backward).
  const double repeat = c.num_kv_heads < c.num_heads ? 2 * d * (kv + q) : 0;
  const double residual = 2 * 3 * d * h;  // two adds: two reads, one write; backward, two gradient sums
  // SwiGLU: SiLU (read, write) and the product (two reads, one write); backward the
  // product's two gradients (four reads, two writes) and SiLU's (two reads, one write).
  const double swiglu_forward = 5 * d * I;
  const double swiglu_backward = 9 * d * I;
  return ElementwiseBytes{2 * norm_forward * h + rope * (q + kv) + repeat + residual + swiglu_forward,
                          2 * norm_backward * h + rope * (q + kv) + repeat + residual + swiglu_backward};
}

}  // namespace tessera::planner
