// torchtitan's Llama block run eagerly, read from its model code as the
// published runs ran it: pytorch/torchtitan@9dec370 (2024-12-26, the runs of
// benchmarks/llama3_h100_202412_torchtitan.md) torchtitan/models/llama/model.py
// and torchtitan/models/norms.py; @0413364 (2024-04-24, docs/performance.md's
// tables) has the same block and its 8B and 13B configs set
// `norm_type = "fused_rmsnorm"`. What each op keeps is its autograd formula's
// saved inputs or outputs (PyTorch's tools/autograd/derivatives.yaml; an input
// is saved only where another input's gradient needs it, so a product with a
// buffer keeps only the buffer):
//  - RMSNorm in Python: `self._norm(x.float()).type_as(x) * self.weight`, with
//    _norm `x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)`. pow and
//    the product keep the fp32 copy of x, rsqrt its per-row output, the
//    product with the weight the normalised 16-bit tensor; the block's 16-bit
//    input itself is kept by no op (the cast and the residual add keep nothing).
//  - RMSNorm as torchtitan's Triton kernel (FusedRMSNorm, norms.py):
//    save_for_backward(x, weight, rstd), the 16-bit input and an fp32 rstd per row.
//  - wq, wk and wv keep the norm's output once; apply_rotary_emb's complex
//    products keep only freqs_cis, a slice of the model's buffer (no new memory);
//    repeat_kv copies k and v out to every query head (expand, then reshape),
//    and SDPA (the flash kernel) keeps q, those k and v, its output and an fp32
//    log-sum-exp per row and head; the output's transpose back is a view (the
//    kernel writes it (b, s, heads, d); activations.cpp's flash_table), which
//    wo keeps as its input.
//  - FeedForward `w2(F.silu(w1(x)) * w3(x))`: w1 and w3 keep the norm's output,
//    SiLU its input (w1's output), the product both factors (SiLU's output and
//    w3's), w2 the product.
// A block's linears' outputs that no op keeps (wq's before RoPE, and wv's when
// repeat_kv copies it) are terms that only torchtitan's op-level policy keeps.
// Under checkpointing every recomputed block holds what it keeps again while
// its backward runs (counts_recompute_working_set), and a checkpoint keeps the
// block's input as it came, in 16 bits. By then autograd has freed the loss's
// tensors (working_set_after_loss): the last block's backward follows the loss's,
// the head's and the final norm's.
// This is torchtitan's block up to 2025; today's (v0.2.2, models/llama3/model/
// model.py) hands SDPA grouped-query k and v (enable_gqa) without repeat_kv's
// copies, which the planner still counts, as its eager traffic does.
#include "activations_torchtitan.h"

#include "activation_terms.h"

namespace tessera::planner {
namespace {

using Split = ActivationSplit;

ActivationTerm kept_only_by_op_policy(ActivationTerm t) {
  t.saved_only_by_op_policy = true;
  t.kept_under_selective = false;
  return t;
}

// One RMSNorm of the stream, the block's input where `block_input`; then the
// weighted output its linears keep (`output`).
void rms_norm(std::vector<ActivationTerm>& terms, const ModelConfig& c, int64_t dt, bool fused, bool block_input, std::string_view input,
              std::string_view fp32_input, std::string_view rstd, std::string_view normalized, std::string_view output) {
  const int64_t h = c.hidden_size;
  ActivationTerm kept = fused ? term(input, h, dt, Split::sequence) : term(fp32_input, h, kFp32, Split::sequence);
  kept.is_block_input = block_input;
  if (block_input && !fused && dt < kFp32) kept.checkpointed_bytes_per_element = dt;  // in fp32, x.float() is x
  terms.push_back(kept);
  terms.push_back(term(rstd, 1, kFp32, Split::sequence));
  if (!fused) terms.push_back(term(normalized, h, dt, Split::sequence));
  terms.push_back(term(output, h, dt, Split::sequence));
}

}  // namespace

ActivationTable torchtitan_eager_table(const ModelConfig& c, int64_t dt, bool fused_rmsnorm) {
  const int64_t q = c.q_width(), kv = c.kv_width(), I = c.intermediate_size;
  const bool repeats_kv = c.num_kv_heads < c.num_heads;
  ActivationTable t;
  auto& b = t.block;
  rms_norm(b, c, dt, fused_rmsnorm, true, "attn_norm_input", "attn_norm_fp32_input", "attn_norm_rstd", "attn_norm_normalized", "qkv_input");
  b.push_back(kept_only_by_op_policy(term("query", q, dt, Split::tensor_parallel)));
  ActivationTerm value = term("value", kv, dt, Split::tensor_parallel);
  b.push_back(repeats_kv ? kept_only_by_op_policy(value) : value);  // without repeat_kv wv's output is SDPA's v
  b.push_back(term("sdpa_query", q, dt, Split::tensor_parallel));
  b.push_back(term("sdpa_key", q, dt, Split::tensor_parallel));  // every head's, after repeat_kv
  if (repeats_kv) b.push_back(term("sdpa_value", q, dt, Split::tensor_parallel));
  b.push_back(log_sum_exp("softmax_lse", c));
  b.push_back(term("attn_proj_input", q, dt, Split::tensor_parallel));
  rms_norm(b, c, dt, fused_rmsnorm, false, "mlp_norm_input", "mlp_norm_fp32_input", "mlp_norm_rstd", "mlp_norm_normalized", "mlp_input");
  b.push_back(term("mlp_gate", I, dt, Split::tensor_parallel));
  b.push_back(term("silu_output", I, dt, Split::tensor_parallel));
  b.push_back(term("mlp_up", I, dt, Split::tensor_parallel));
  b.push_back(term("activation_output", I, dt, Split::tensor_parallel));
  mark_op_policy(b, c, dt);
  t.counts_recompute_working_set = true;
  t.working_set_after_loss = true;
  // The embedding keeps the token ids for its backward; the final norm as the blocks', then the output layer's input.
  t.first_stage.push_back(term("input_ids", 1, 8, Split::whole));
  rms_norm(t.last_stage, c, dt, fused_rmsnorm, false, "final_norm_input", "final_norm_fp32_input", "final_norm_rstd", "final_norm_normalized",
           "head_input");
  t.logits.push_back(term("logits_fp32", c.vocab_size, kFp32, Split::tensor_parallel));  // the loss's, replaced by with_loss
  return t;
}

}  // namespace tessera::planner
