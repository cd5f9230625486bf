// GEMM and attention-kernel times; the model is described in gemm_model.h.
#include "tessera/planner/gemm_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tessera/planner/fp8.h"

namespace tessera::planner {
namespace {

// cuBLAS's 256×128 thread-block tile, one per SM at a time (the user's guide's
// wave-quantization example on the A100).
constexpr double kTileM = 256;
constexpr double kTileN = 128;

// Under fp8 everything but the blocks' GEMMs runs in bf16 (fp8.h).
double dense_peak_tflops(const GpuProfile& gpu, Precision p) {
  // fp32 runs on the fp32 pipes: PyTorch leaves TF32 matmuls off by default.
  return p == Precision::bf16 || is_fp8(p) ? gpu.peak_tflops.bf16 : p == Precision::fp16 ? gpu.peak_tflops.fp16 : gpu.peak_tflops.fp32;
}

// A matmul weight's (input features, output features) on one tp rank. Hugging
// Face's nn.Linear stores (out, in), GPT-2's Conv1D (in, out) (tensor_inventory.cpp);
// GPT-2's head is its tied embedding, (vocab, hidden) = (out, in).
struct WeightDims {
  double in = 0;
  double out = 0;
};

bool stored_in_out(const ModelConfig& config, const TensorInfo& t) { return config.family == ModelFamily::gpt2 && t.tp_split != TpSplit::vocab; }

WeightDims weight_dims(const ModelConfig& config, const TensorInfo& t, int64_t tp) {
  std::vector<double> dims(t.shape.begin(), t.shape.end());
  if (dims.size() != 2) return {};
  const auto cut = static_cast<size_t>(t.tp_dim);
  if (t.tp_split == TpSplit::split) dims[cut] /= static_cast<double>(tp);
  if (t.tp_split == TpSplit::vocab) dims[cut] = std::ceil(dims[cut] / static_cast<double>(tp));  // padded to a multiple of tp
  return stored_in_out(config, t) ? WeightDims{dims[0], dims[1]} : WeightDims{dims[1], dims[0]};
}

// A split weight's tensor-parallel cut runs along its input features: a
// row-parallel layer (attention's output projection, the MLP's last), whose
// output the ranks reduce; else a column-parallel one.
bool row_parallel(const ModelConfig& config, const TensorInfo& t) {
  const bool stored_in_out = config.family == ModelFamily::gpt2;
  return t.tp_dim == (stored_in_out ? 0 : 1);
}

// `gemm` on the SMs that `reserved_sms` leave, each at its usual pace.
double gemm_seconds_on_fewer_sms(const GemmShape& gemm, const KernelRoofs& roofs, int64_t reserved_sms) {
  if (roofs.sm_count <= reserved_sms) return gemm_seconds(gemm, roofs);
  KernelRoofs fewer = roofs;
  fewer.sm_count = roofs.sm_count - reserved_sms;
  fewer.matmul_flops = roofs.matmul_flops * static_cast<double>(fewer.sm_count) / static_cast<double>(roofs.sm_count);
  return gemm_seconds(gemm, fewer);
}

}  // namespace

KernelRoofs kernel_roofs(const GpuProfile& gpu, Precision precision, double memory_efficiency) {
  KernelRoofs r;
  r.peak_flops = dense_peak_tflops(gpu, precision) * 1e12;
  r.matmul_flops = r.peak_flops * (gpu.matmul_efficiency > 0 ? gpu.matmul_efficiency : kDefaultMatmulEfficiency) * kOrdinaryShapeFractionOfBest;
  r.fused_attention_flops = r.peak_flops * (gpu.fused_attention_efficiency > 0 ? gpu.fused_attention_efficiency : kDefaultFusedAttentionEfficiency);
  r.hbm_bytes_per_s = gpu.hbm_gbps * 1e9 * memory_efficiency;
  r.element_bytes = static_cast<double>(compute_bytes(precision));
  r.sm_count = gpu.sm_count;
  return r;
}

BlockGemmRoofs block_gemm_roofs(const GpuProfile& gpu, Precision precision, double memory_efficiency) {
  KernelRoofs r = kernel_roofs(gpu, precision, memory_efficiency);
  if (!is_fp8(precision)) return {r, r};
  r.peak_flops = gpu.peak_tflops.fp8 * 1e12;
  KernelRoofs backward = r;
  if (gpu.matmul_efficiency_fp8 > 0) {
    // Measured as torch._scaled_mm runs by default, with the split accumulator:
    // the backward's; the forward's fast accumulation is faster by the ratio.
    backward.matmul_flops = r.peak_flops * gpu.matmul_efficiency_fp8 * kOrdinaryShapeFractionOfBest;
    r.matmul_flops = std::min(r.peak_flops, backward.matmul_flops * kFp8SplitAccumulatorSlowdown);
  } else {
    r.matmul_flops *= gpu.peak_tflops.fp8 / gpu.peak_tflops.bf16;
    backward.matmul_flops = r.matmul_flops / kFp8SplitAccumulatorSlowdown;
  }
  return {r, backward};
}

double gemm_seconds(const GemmShape& g, const KernelRoofs& roofs) {
  if (g.flops() <= 0) return 0;
  double compute = g.flops() / roofs.matmul_flops;
  if (roofs.sm_count > 0) {
    // Whole waves of whole tiles: each wave takes as long as one tile's FLOPs on one SM.
    const double tiles = std::ceil(g.m / kTileM) * std::ceil(g.n / kTileN) * g.count;
    const double waves = std::ceil(tiles / static_cast<double>(roofs.sm_count));
    compute = waves * 2 * kTileM * kTileN * g.k / (roofs.matmul_flops / static_cast<double>(roofs.sm_count));
  }
  const double bytes = (g.m * g.k + g.k * g.n + g.m * g.n) * g.count * roofs.element_bytes;
  return std::max(compute, bytes / roofs.hbm_bytes_per_s);
}

std::vector<StepGemm> step_gemms(const Model& model, int64_t tokens, int64_t tp) {
  const int64_t layers = model.config.num_layers;
  const auto m = static_cast<double>(tokens);
  std::vector<StepGemm> gemms;
  for (const TensorInfo& t : model.inventory.tensors) {
    if (!t.is_matmul_weight) continue;
    const auto entry = static_cast<size_t>(std::clamp<int64_t>(t.layer + 1, 0, layers + 1));
    const WeightDims w = weight_dims(model.config, t, tp);
    const bool in_out = stored_in_out(model.config, t);
    gemms.push_back({&t, entry, GemmPass::forward, {m, w.out, w.in}, in_out});
    gemms.push_back({&t, entry, GemmPass::input_gradient, {m, w.in, w.out}, in_out});
    gemms.push_back({&t, entry, GemmPass::weight_gradient, {w.in, w.out, m}, in_out});
  }
  return gemms;
}

std::vector<PassSeconds> matmul_seconds_by_layer(const Model& model, int64_t tokens, int64_t tp, const KernelRoofs& roofs,
                                                 const BlockGemmRoofs& block_roofs) {
  std::vector<PassSeconds> by_layer(static_cast<size_t>(model.config.num_layers + 2));
  for (const StepGemm& g : step_gemms(model, tokens, tp)) {
    const bool outside_blocks = g.layer_entry == 0 || g.layer_entry == by_layer.size() - 1;
    const bool forward = g.pass == GemmPass::forward;
    const KernelRoofs& pass_roofs = outside_blocks ? roofs : forward ? block_roofs.forward : block_roofs.backward;
    PassSeconds& s = by_layer[g.layer_entry];
    (forward ? s.forward : s.backward) += gemm_seconds(g.shape, pass_roofs);
  }
  return by_layer;
}

double userbuffer_sm_margin_seconds(const Model& model, int64_t tokens, int64_t tp, const KernelRoofs& forward_roofs) {
  double extra = 0;
  for (const TensorInfo& t : model.inventory.tensors) {
    // proj_fprop and fc2_fprop; the blocks are alike: the first one's.
    if (!t.is_matmul_weight || t.layer != 0 || t.tp_split != TpSplit::split || !row_parallel(model.config, t)) continue;
    const WeightDims w = weight_dims(model.config, t, tp);
    const GemmShape forward{static_cast<double>(tokens), w.out, w.in};
    extra += gemm_seconds_on_fewer_sms(forward, forward_roofs, kUserbufferPipelineCommSms) - gemm_seconds(forward, forward_roofs);
  }
  return extra;
}

double causal_keys_per_query(int64_t seq_len, int64_t sliding_window) {
  const auto s = static_cast<double>(seq_len);
  if (sliding_window <= 0 || sliding_window >= seq_len) return (s + 1) / 2;
  const auto w = static_cast<double>(sliding_window);
  return (w * (w + 1) / 2 + (s - w) * w) / s;  // query i sees min(i + 1, w) keys
}

PassSeconds attention_core_seconds(const ModelConfig& c, bool fused, int64_t micro_batch, int64_t seq_len, int64_t tp, const KernelRoofs& roofs) {
  const double heads = static_cast<double>(micro_batch) * static_cast<double>(c.num_heads) / static_cast<double>(tp);
  const auto s = static_cast<double>(seq_len);
  const auto d = static_cast<double>(c.head_dim);
  if (fused) {
    const double forward_flops = 4 * heads * s * causal_keys_per_query(seq_len, c.sliding_window) * d;
    return {forward_flops / roofs.fused_attention_flops, 2.5 * forward_flops / roofs.fused_attention_flops};
  }
  const GemmShape scores{s, s, d, heads};  // QK^T, and in backward dP = dO·V^T
  const GemmShape values{s, d, s, heads};  // P·V, and in backward dV, dQ and dK
  // The softmax, dropout and the rest over the scores are the runtime's element-wise
  // work (megatron_elementwise.h, eager_elementwise.h; simulate.cpp).
  return {gemm_seconds(scores, roofs) + gemm_seconds(values, roofs), gemm_seconds(scores, roofs) + 3 * gemm_seconds(values, roofs)};
}

bool fused_attention(ActivationProfile profile) {
  switch (profile) {
    case ActivationProfile::flash:
    case ActivationProfile::hf:
    case ActivationProfile::hf_autocast:
    case ActivationProfile::tessera:  // SDPA / FlashAttention; the engine's FlashAttention-2 (engine/include/tessera/engine/ops/attention.h)
    case ActivationProfile::tessera_gpu: return true;  // cuDNN's fused flash attention (engine/include/tessera/engine/cuda/attention.h)
    case ActivationProfile::megatron:
    case ActivationProfile::hf_eager: return false;
  }
  return false;
}

}  // namespace tessera::planner
