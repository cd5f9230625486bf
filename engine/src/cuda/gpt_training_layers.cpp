// The launchers every block and the head are built from, on one GPU's
// training step (gpt_training_state.h): a linear layer's forward and its
// input and parameter gradients as cuBLASLt GEMMs in either weight layout
// (ops/linear.h), and the family's norm (LayerNorm or RMSNorm) forward and
// backward over this rank's rows.
#include "gpt_training_state.h"

#include "tessera/engine/cuda/norms.h"

namespace tessera::engine::cuda {

// out (N, OC) = inp (N, IC) · W + bias, W stored (IC, OC) (in_out: GPT-2's
// Conv1D) or (OC, IC) (out_in: nn.Linear), as ops/linear.h.
void GptTraining::State::linear_forward(T* out, const T* inp, const T* weight, const T* bias, int64_t rows, int64_t IC, int64_t OC,
                                        cpu::WeightLayout layout) {
  const bool out_in = layout == cpu::WeightLayout::out_in;
  const GemmCall call{false, out_in, rows, OC, IC, IC, out_in ? IC : OC, OC, 1.0f, 0.0f, bias != nullptr ? GemmEpilogue::bias : GemmEpilogue::none};
  check(gemm.run<T>(call, inp, weight, out, bias, nullptr), "linear forward");
}

// dinp = dout · Wᵀ (overwritten, or added with `accumulate`); dweight +=
// the product of inp and dout in W's layout; dbias += the column sums of dout (1 · dout).
void GptTraining::State::linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int64_t rows, int64_t IC,
                                         int64_t OC, cpu::WeightLayout layout, bool accumulate) {
  linear_backward_input(dinp, dout, weight, rows, IC, OC, layout, accumulate);
  linear_backward_weight(dweight, dbias, dout, inp, rows, IC, OC, layout);
}

// The input gradient alone, on any range of rows (ops/linear.h's linear_backward_input).
void GptTraining::State::linear_backward_input(T* dinp, const T* dout, const T* weight, int64_t rows, int64_t IC, int64_t OC,
                                               cpu::WeightLayout layout, bool accumulate) {
  const bool out_in = layout == cpu::WeightLayout::out_in;
  const float beta = accumulate ? 1.0f : 0.0f;
  check(gemm.run<T>(GemmCall{false, !out_in, rows, IC, OC, OC, out_in ? IC : OC, IC, 1.0f, beta, GemmEpilogue::none}, dout, weight, dinp, nullptr,
                    nullptr),
        "linear backward (input)");
}

// The parameter gradients alone, over all `rows`.
void GptTraining::State::linear_backward_weight(T* dweight, T* dbias, const T* dout, const T* inp, int64_t rows, int64_t IC, int64_t OC,
                                                cpu::WeightLayout layout) {
  const bool out_in = layout == cpu::WeightLayout::out_in;
  if (out_in) {  // dW (OC, IC) += doutᵀ · inp
    check(gemm.run<T>(GemmCall{true, false, OC, IC, rows, OC, IC, IC, 1.0f, 1.0f, GemmEpilogue::none}, dout, inp, dweight, nullptr, nullptr),
          "linear backward (weight)");
  } else {  // dW (IC, OC) += inpᵀ · dout
    check(gemm.run<T>(GemmCall{true, false, IC, OC, rows, IC, OC, OC, 1.0f, 1.0f, GemmEpilogue::none}, inp, dout, dweight, nullptr, nullptr),
          "linear backward (weight)");
  }
  if (dbias != nullptr) {
    check(gemm.run<T>(GemmCall{false, false, 1, OC, rows, rows, OC, OC, 1.0f, 1.0f, GemmEpilogue::none}, ones.as<T>(), dout, dbias, nullptr, nullptr),
          "linear backward (bias)");
  }
}

// LayerNorm (statistics: mean, then rstd) or RMSNorm (rstd), as the family
// has, over this rank's Nl rows.
void GptTraining::State::norm_forward(T* out, float* statistics, const T* in, int weight, int bias) {
  const auto eps = static_cast<float>(config.norm_eps);
  if (config.norm == planner::NormKind::layer_norm) {
    check(layernorm_forward(out, statistics, statistics + Nl, in, param(weight), param_or_null(bias), Nl, C, eps, nullptr), "layernorm");
  } else {
    check(rmsnorm_forward(out, statistics, in, param(weight), Nl, C, eps, nullptr), "rmsnorm");
  }
}

// Adds the norm's input gradient into dinp, its parameters' into their
// gradients, from `dout`: this rank's rows of the gradient of its output,
// which the column-parallel layers above it wrote partial and the group has
// summed (Megatron's f, backward: reduced_gemms, or reduce_rows for the head).
void GptTraining::State::norm_backward(T* dinp, const T* dout, const T* in, const float* statistics, int weight, int bias) {
  void* workspace = norm_workspace.as<void>();
  if (config.norm == planner::NormKind::layer_norm) {
    check(layernorm_backward(dinp, grad(weight), grad_or_null(bias), dout, in, param(weight), statistics, statistics + Nl, Nl, C, workspace, nullptr),
          "layernorm backward");
  } else {
    check(rmsnorm_backward(dinp, grad(weight), dout, in, param(weight), statistics, Nl, C, workspace, nullptr), "rmsnorm backward");
  }
}

}  // namespace tessera::engine::cuda
