// Time of the matrix multiplications a transformer runs, on one GPU.
//
// Each GEMM is a roofline (Williams et al. 2009, "Roofline: an insightful
// visual performance model"): the slower of its FLOPs at the compute roof and
// its operands' bytes at the HBM roof. The compute roof is the dtype's dense
// peak × the fraction cuBLAS sustains on large shapes (measured per GPU:
// GpuProfile::matmul_efficiency, for ordinary shapes), lowered by tile and wave quantization (NVIDIA
// Matrix Multiplication Background User's Guide, §3): the output is cut into
// 256×128 tiles, one tile per SM at a time, so a partial tile costs a whole one
// and the last wave of a GEMM whose tiles do not fill every SM runs part-empty.
// Efficiency therefore rises with the GEMM's size and saturates at the measured
// value; a GEMM thin in k (attention's QK^T with k = head_dim) hits the HBM roof.
//
// Attention's core: a fused kernel (FlashAttention-2/3, PyTorch SDPA) skips the
// masked half of a causal QK^T and PV and runs at the GPU's measured fused-
// attention efficiency; its backward recomputes QK^T, 5 matmuls to the forward's
// 2 (Dao 2023, FlashAttention-2, §3.1 and §4.1: backward = 2.5 × forward FLOPs).
// An unfused core (Megatron-LM 2021, Hugging Face eager) computes every s×s
// score, masked or not, as batched GEMMs timed by the roofline above; its
// softmax and dropout over the scores are element-wise work, counted with the
// runtime's other kernels (megatron_elementwise.h, eager_elementwise.h).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/hardware.h"
#include "tessera/planner/model.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// The profiles' matmul efficiencies are the best shape a brute-force search
// found (MAMF); a sweep over ordinary shapes (m varied, n = k = 4096) "should
// give around 80-90% of the maximum achievable result" (stas00/ml-engineering,
// compute/accelerator/benchmarks/README.md, mamf-finder usage): a transformer's
// GEMMs are ordinary shapes, so the roof is the middle of that range.
inline constexpr double kOrdinaryShapeFractionOfBest = 0.85;

// Where a GPU profile has no measurement: the lowest of the NVIDIA parts'
// measured matmul efficiencies (H100 SXM, 80.3%: data/hardware/gpus/h100-80g.json),
// and FlashAttention-2's A100 figure (a100-80g.json).
inline constexpr double kDefaultMatmulEfficiency = 0.80;
inline constexpr double kDefaultFusedAttentionEfficiency = 0.50;

struct GemmShape {
  double m = 0, n = 0, k = 0;  // (m × k) · (k × n)
  double count = 1;            // independent GEMMs of this shape (a batched GEMM's batch)
  double flops() const { return 2 * m * n * k * count; }
};

// The roofs of one GPU for one compute dtype.
struct KernelRoofs {
  double peak_flops = 1;             // dense peak
  double matmul_flops = 1;           // what cuBLAS sustains on large GEMMs
  double fused_attention_flops = 1;  // what a fused attention kernel sustains
  double hbm_bytes_per_s = 1;        // HBM bandwidth × the memory efficiency element-wise kernels reach
  double element_bytes = 2;
  int64_t sm_count = 0;              // 0: wave quantization unknown, not applied
};

// Under fp8 the roofs of everything but the blocks' GEMMs are bf16's.
KernelRoofs kernel_roofs(const GpuProfile& gpu, Precision precision, double memory_efficiency);

// The roofs of the blocks' GEMMs, forward and backward: under fp8 Transformer
// Engine runs them on the FP8 tensor cores (fp8.h). The backward's split
// accumulator sustains the profile's measured FP8 fraction of that peak
// (GpuProfile::matmul_efficiency_fp8, measured with torch._scaled_mm's default
// split accumulator) and the forward's fast accumulation is faster by
// kFp8SplitAccumulatorSlowdown. A profile without an FP8 measurement takes the
// forward to sustain bf16's fraction and the backward that ratio slower. Else
// both are kernel_roofs.
struct BlockGemmRoofs {
  KernelRoofs forward;
  KernelRoofs backward;  // the input and weight gradients
};
BlockGemmRoofs block_gemm_roofs(const GpuProfile& gpu, Precision precision, double memory_efficiency);

double gemm_seconds(const GemmShape& gemm, const KernelRoofs& roofs);

struct PassSeconds {
  double forward = 0;
  double backward = 0;  // input gradients and weight gradients
};

// The GEMMs of one weight in a training step: its forward product, then in
// backward the input gradient (tokens × in) and the weight gradient (in × out,
// summed over the tokens).
enum class GemmPass { forward, input_gradient, weight_gradient };

struct StepGemm {
  const TensorInfo* weight = nullptr;  // into the model's inventory
  size_t layer_entry = 0;              // layer + 1: 0 before the blocks, num_layers + 1 the head
  GemmPass pass = GemmPass::forward;
  GemmShape shape;
  // The weight is stored (in, out), as GPT-2's Conv1D, rather than nn.Linear's
  // (out, in): which operand a runtime transposes in each pass.
  bool weight_stored_in_out = false;
};

// Every matmul weight's three GEMMs on one tensor-parallel rank for `tokens`
// tokens, in the inventory's order: what the simulator times, and what
// bench/gpu_gemm_roof measures on a GPU against it.
std::vector<StepGemm> step_gemms(const Model& model, int64_t tokens, int64_t tp);

// One tensor-parallel rank's matmuls on `tokens` tokens, layer by layer: entry
// layer + 1 for each block, entry 0 for the weights before the blocks
// (kEmbeddingLayer) and the last entry for those after them (the head). The
// blocks' GEMMs run on `block_roofs`, the others on `roofs`.
std::vector<PassSeconds> matmul_seconds_by_layer(const Model& model, int64_t tokens, int64_t tp, const KernelRoofs& roofs,
                                                 const BlockGemmRoofs& block_roofs);

// Megatron-Core's --tp-comm-overlap runs the blocks' tensor-parallel GEMMs
// through Transformer Engine's userbuffers, which pipeline each with its
// all-gather or reduce-scatter in chunks. The row-parallel forward GEMMs
// (proj_fprop, fc2_fprop) take TE's "pipeline" method, whose reduce-scatter
// kernels keep num_sm = 16 SMs to themselves (set_sm_margin;
// transformer_engine/pytorch/module/base.py, initialize_ub, `methods` and
// get_default_config, TE 2.x): the GEMM is launched on multiProcessorCount −
// num_comm_sms SMs (CommOverlapBase, transformer_engine/common/userbuffers/
// comm_gemm_overlap.h at 034280b2). NeMo's H100 configs keep the method and set
// 16 to 24 SMs per GEMM (NeMo-Framework-Launcher 24.09,
// conf/training/tp_overlap/ub_cfg_h100_*.yaml). What that adds to one block's
// forward, one micro-batch (the blocks are alike: the first one's).
// Not charged: the chunks' own cost. cuBLAS picks a tile for each chunk's
// shape; gemm_seconds' one 256×128 tile would charge the ring exchange's tp
// chunks of Llama-70B's GEMMs at tp 4 a third more, which the NeMo bf16 rows
// (−9% with it) do not show.
inline constexpr int64_t kUserbufferPipelineCommSms = 16;
double userbuffer_sm_margin_seconds(const Model& model, int64_t tokens, int64_t tp, const KernelRoofs& forward_roofs);

// One rank's attention core (QK^T, softmax, PV) for one layer and micro-batch.
PassSeconds attention_core_seconds(const ModelConfig& config, bool fused, int64_t micro_batch, int64_t seq_len, int64_t tp,
                                   const KernelRoofs& roofs);

// Whether the activation profile's runtime runs a fused attention kernel.
bool fused_attention(ActivationProfile profile);

// Key positions a causal query attends to, averaged over the sequence: (s + 1)/2,
// or fewer under a sliding window.
double causal_keys_per_query(int64_t seq_len, int64_t sliding_window);

}  // namespace tessera::planner
