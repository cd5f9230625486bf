// The element-wise HBM traffic of Megatron's vocabulary-parallel cross-entropy,
// the loss the fusing runtimes run on the last pipeline stage over each rank's
// [tokens × vocab/tp] logits (the runs that go op by op charge theirs with
// their blocks: eager_elementwise.h). Reads and writes per logit, each pass
// from the source:
//
// Unfused: Megatron-LM's mpu/cross_entropy.py _VocabParallelCrossEntropy with
// gpt_model.py's `output.float()` before it (NVIDIA/Megatron-LM@79a3bb6b, the
// SC21 scripts' commit, which pass no --fp16-lm-cross-entropy), and Megatron-Core's
// tensor_parallel/cross_entropy.py, which moves the `.float()` inside
// (NVIDIA/Megatron-LM@baf94af3, core_r0.8.0). Forward: the cast up (read the
// logits, write fp32), torch.max over the vocabulary (read), the in-place
// subtraction of the row maxima (read, write), torch.exp in place (read, write),
// the row sums (read), the in-place division into the softmax kept for backward
// (read, write). Backward: the target logits' update touches one element a row;
// grad_input.mul_ (read, write); the fp32 gradient cast to the logits' dtype
// (read, write: the cast's backward in 79a3bb6b, the autograd engine's
// conversion to the input's dtype where the cast is inside the Function).
//
// Fused (--cross-entropy-loss-fusion; core_r0.8.0 fusions/fused_cross_entropy.py):
// the same steps in four @jit_fuser functions, which megatron/core/jit.py makes
// torch.compile under PyTorch 2.2 and later; each compiles to kernels that read
// their full-size inputs once and write their full-size outputs, and the inputs
// they change in place, once. Forward: calculate_logits_max (read the logits,
// write the fp32 copy), calculate_predicted_logits (the subtraction and exp in
// place: read, write), calculate_cross_entropy_loss (the division in place:
// read, write). Backward: calculate_gradients (read the softmax, write it back
// multiplied, write the gradient cast to bf16 as its code fixes it).
//
// The three per-row all-reduces over tp are tensor-parallel traffic (tp_traffic.h).
#pragma once

#include <cstdint>

#include "tessera/planner/eager_elementwise.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// Per token, over `vocab_per_rank` logits of `logits_bytes` each.
ElementwiseBytes vocab_parallel_cross_entropy_bytes(int64_t vocab_per_rank, int64_t logits_bytes, bool fused);

// The same over one tp rank's share of the model's vocabulary, padded to a
// multiple of tp as the output layer is (gemm_model.cpp).
ElementwiseBytes vocab_parallel_cross_entropy_bytes(const ModelConfig& config, int64_t tp, int64_t logits_bytes, bool fused);

// Whether a run's loss is Megatron's: Megatron-Core's runtime, and the megatron
// activation profile (Megatron-LM's own model, as the 2020-2022 runs used it),
// where the element-wise work is fused rather than run op by op.
bool runs_vocab_parallel_cross_entropy(const ModelConfig& config, Runtime runtime, const TrainingOptions& training);

}  // namespace tessera::planner
