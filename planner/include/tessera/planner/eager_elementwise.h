// The element-wise traffic of models run eagerly, op by op: each PyTorch op
// outside the GEMMs and SDPA is its own kernel, reading its inputs from HBM
// and writing its output there, in forward and again, with its gradient, in
// backward. The simulator charges these bytes at HBM speed in place of the
// once-per-kept-activation traffic it charges runtimes that fuse element-wise
// work, or that run under torch.compile (TrainingOptions::torch_compile;
// simulate.cpp). Two runtimes run eagerly: torchtitan's Llama block (its
// default, `training.compile = false`) and Hugging Face's GPT-2 (the hf,
// hf_eager and hf_autocast profiles, which ColossalAI and DeepSpeed run).
//
// torchtitan's ops, from its model (pytorch/torchtitan, torchtitan/models/llama/model.py
// and models/norms.py as of the 2024 performance tables, e.g. 0199cbc):
//  - RMSNorm, twice: x.float(), pow(2), mean(-1), x * rsqrt(...), .type_as(x),
//    * weight (per-row scalars cost nothing); or, under --fused-rmsnorm, the
//    Triton kernel the 2024 tables' 8B and 13B configs chose (norm_type
//    "fused_rmsnorm" at 0413364), one read and one write forward, three backward;
//  - RoPE on q and k: .float(), a complex multiply by freqs_cis, .type_as();
//  - repeat_kv under grouped-query attention: keys and values copied out to
//    every query head (expand + reshape), and summed back in backward;
//  - the two residual adds, SiLU and the SwiGLU product.
// SDPA's transposes are views (its flash kernel takes the strides). Backward
// counts each op's autograd formula: an input's gradient from the output's
// and the saved operands, the norm weight's gradient as a reduction over
// tokens, and the sums where two gradients meet (the norm's input, the
// residual stream). A cast between equal dtypes (fp32 runs) is free.
//
// Hugging Face's GPT-2 (transformers' modeling_gpt2.py: GPT2Block's two
// LayerNorms and residual adds, Conv1D as addmm with its bias, SDPA between
// them; activations.py's NewGELUActivation, the
// config's default "gelu_new", written out as eight ops: pow, two scalar
// products, an add, tanh, 1 +, 0.5 · x and the product). Under autocast
// (hf_autocast: fp32 weights) the dtypes follow PyTorch's autocast op lists
// (torch.amp docs, "Autocast Op Reference"): addmm runs in 16 bits, so each
// GEMM's fp32 input is cast first; layer_norm and pow run in fp32, so the
// residual stream, the norms and the GELU chain after pow are fp32. Our saved-
// tensor measurement on an H100 (transformers 5.17, torch 2.11:
// data/measurements/2026-11-24-nvidia-h100-80gb-hbm3-saved-tensors.json) shows
// those dtypes: fp32 norm inputs, a 16-bit copy of each GEMM input, three fp32
// and one 16-bit tensor of the GELU's width. With 16-bit weights (hf, hf_eager)
// every op runs in the compute dtype and no cast is made. The embedding's
// two lookups and their sum, the final norm and the loss run outside the blocks.
//
// Hugging Face's Llama-layout models (modeling_llama.py's LlamaDecoderLayer,
// which Mistral and Qwen2 share): LlamaRMSNorm in Python (torchtitan's ops),
// separate q, k, v, gate and up projections (under autocast each casts its
// input: the measurement holds five 16-bit copies of a block's norm outputs),
// apply_rotary_pos_emb's rotate_half, SDPA taking grouped-query k and v as
// they are, SiLU and the gate product, the residual adds. Under autocast the
// stream and the norms are fp32, and so are cos and sin, which makes RoPE's
// products fp32 until attention casts them back.
// Eager attention (hf_eager) runs element-wise ops over every s × s score
// (hf_eager_attention_score_bytes) beside the two batched GEMMs that
// attention_core_seconds (gemm_model.h) times.
#pragma once

#include <cstdint>

#include "tessera/planner/model_config.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

struct ElementwiseBytes {
  double forward = 0;   // bytes per token through HBM
  double backward = 0;
};

// What one token costs outside the blocks: on the first pipeline stage (the
// embedding) and on the last (the final norm and the loss).
struct OutsideBlocksBytes {
  ElementwiseBytes first_stage;
  ElementwiseBytes last_stage;
};

// Bytes a cast moves per element: read one dtype, write the other; none between equal dtypes.
double cast_bytes(double from, double to);

// How a run's element-wise ops execute: fused by a runtime whose kernels are not
// read (or by torch.compile), op by op as torchtitan's Llama block or Hugging
// Face's GPT-2, or as Megatron-LM's own fused kernels (the megatron profile:
// megatron_elementwise.h).
enum class ElementwiseExecution { fused, torchtitan_llama_eager, hf_gpt2_eager, hf_llama_eager, megatron_lm_kernels };
ElementwiseExecution elementwise_execution(const ModelConfig& config, Runtime runtime, const TrainingOptions& training);

// One block, per token; `fused_rmsnorm`: torchtitan's Triton RMSNorm
// (PluginOptions::fused_rmsnorm) in place of the Python one.
ElementwiseBytes torchtitan_eager_block_bytes(const ModelConfig& config, int64_t dtype_bytes, bool fused_rmsnorm = false);
OutsideBlocksBytes torchtitan_eager_outside_bytes(const ModelConfig& config, int64_t dtype_bytes, bool fused_rmsnorm = false);

// Hugging Face GPT-2 on one tensor-parallel rank of `tp` (the MLP's width and
// the vocabulary split, the hidden state whole). Outside the blocks, the loss
// as the transformers release `transformers` runs it (transformers_version.h).
ElementwiseBytes hf_gpt2_eager_block_bytes(const ModelConfig& config, ActivationProfile profile, Precision precision, int64_t tp);
OutsideBlocksBytes hf_gpt2_eager_outside_bytes(const ModelConfig& config, ActivationProfile profile, Precision precision, int64_t tp,
                                               TransformersVersion transformers = kMeasuredTransformers);

// Hugging Face's Llama-layout models (Llama, Mistral, Qwen2), likewise.
ElementwiseBytes hf_llama_eager_block_bytes(const ModelConfig& config, ActivationProfile profile, Precision precision, int64_t tp);
OutsideBlocksBytes hf_llama_eager_outside_bytes(const ModelConfig& config, ActivationProfile profile, Precision precision, int64_t tp,
                                                TransformersVersion transformers = kMeasuredTransformers);

// Hugging Face's eager attention (the hf_eager profile) beyond its two matmuls,
// per token of one tensor-parallel rank of `tp`, over sequences of `seq_len`:
// the element-wise ops each head runs on its s × s scores, from transformers'
// eager_attention_forward (4.51.3; 4.31's GPT2Attention._attn runs the same ops).
// GPT-2: the division by √d_head (read, write), torch.where with the causal
// mask (the scores and the one-byte mask read, written), softmax (read,
// write), dropout (read, written with its one-byte mask); backward dropout's
// (gradient and mask read, written), softmax's (output and gradient read,
// written), where's (gradient and mask read, written), the division's.
// Llama, Mistral, Qwen2: the product with the scaling (read, write), the 4-D
// causal mask the model builds for eager attention added (two reads, a write),
// softmax(dtype=float32) (fp16 scores read as they are; bf16 ones cast up
// first: PyTorch's softmax with a dtype), its cast back (read, write), dropout
// where the config has it; backward the same in reverse, softmax's in fp32.
// Broadcast masks are counted a byte (or element) per score, as if L2 held
// none of them; a padding mask a training loop passes to GPT-2 is not counted.
ElementwiseBytes hf_eager_attention_score_bytes(const ModelConfig& config, Precision precision, int64_t tp, int64_t seq_len);

// The loss over `vocab` logits of `logits_bytes` each, upcast first as both
// runtimes do (Hugging Face's ForCausalLMLoss `logits.float()`; torchtitan's
// `self.output(h).float()`): the cast, log_softmax (read, write), in backward
// nll_loss's gradient written, log_softmax's backward (two reads, a write) and
// the cast's. Per token.
ElementwiseBytes upcast_cross_entropy_bytes(int64_t vocab, int64_t logits_bytes);

}  // namespace tessera::planner
