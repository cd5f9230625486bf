// The forward and backward of one GPU's training step (cuda/gpt_training.h,
// gpt_training_state.h): a block's (block_forward, recompute_block,
// block_backward) and a model chunk's, from the embedding to the loss and
// back (forward, backward). The order of the operations and the buffers they
// use follow the CPU model's block_forward, head_forward, head_backward and
// block_backward (model/transformer.cpp), with every op replaced by its GPU
// launcher.
#include "gpt_training_state.h"

#include <cstdint>
#include <vector>

#include "tessera/engine/cuda/activation.h"
#include "tessera/engine/cuda/embedding.h"
#include "tessera/engine/cuda/residual.h"

namespace tessera::engine::cuda {

void GptTraining::State::block_forward(int l, const T* x, T* out) {
  const BlockParameters& w = slots.blocks[static_cast<size_t>(l)];
  const int64_t q = config.q_width(), kv = config.kv_width();
  const bool sp = sequence_parallel();
  T* ln1 = act(l, "attn_norm_output");
  norm_forward(ln1, stats(l, "attn_norm_stats"), x, w.attn_norm_w, w.attn_norm_b);
  const QkvViews qkv = qkv_views(act(l, "qkv"));
  T* att = act(l, "attention_output");
  T* mid = act(l, "mlp_norm_input");  // the residual stream after attention
  T* attention_out = sp ? gathered() : mid;  // the row-parallel output before its sum (the gathered ln1 is used up)
  const cpu::WeightLayout layout = gpt2() ? cpu::WeightLayout::in_out : cpu::WeightLayout::out_in;
  // Rows [r0, r0 + rows) of the column-parallel projections, from those rows of the norm's output.
  gathered_gemms(ln1, gathered(), [&](int64_t r0, int64_t rows, const T* in) {
    if (gpt2()) {
      linear_forward(qkv.q + r0 * qkv.shape.q_stride, in, param(w.qkv_w), param_or_null(w.qkv_b), rows, C, 3 * q, layout);
    } else {
      linear_forward(qkv.q + r0 * q, in, param(w.q_w), param_or_null(w.q_b), rows, C, q, layout);
      linear_forward(qkv.k + r0 * kv, in, param(w.k_w), param_or_null(w.k_b), rows, C, kv, layout);
      linear_forward(qkv.v + r0 * kv, in, param(w.v_w), param_or_null(w.v_b), rows, C, kv, layout);
    }
  });
  if (!gpt2()) {
    rope(qkv.q, config.num_heads, q, false);
    rope(qkv.k, config.num_kv_heads, kv, false);
  }
  attention_forward(l, qkv, "attention forward");
  reduced_gemms(attention_out, mid, [&](int64_t r0, int64_t rows, T* into) {  // row-parallel: Megatron's g
    linear_forward(into, att + r0 * q, param(w.o_w), tp.row_parallel_bias(param_or_null(w.o_b)), rows, q, C, layout);
  });
  check(residual_add(mid, x, Nl * C, nullptr), "residual");
  T* ln2 = act(l, "mlp_norm_output");
  norm_forward(ln2, stats(l, "mlp_norm_stats"), mid, w.mlp_norm_w, w.mlp_norm_b);
  T* hidden = act(l, "mlp_activation");
  T* mlp_out = sp ? gathered() : out;  // the gathered ln2 is used up before the down projection writes it
  T* pre = gpt2() ? act(l, "mlp_pre_activation") : nullptr;
  T* gate = gpt2() ? nullptr : act(l, "mlp_gate");
  T* up = gpt2() ? nullptr : act(l, "mlp_up");
  gathered_gemms(ln2, gathered(), [&](int64_t r0, int64_t rows, const T* in) {
    if (gpt2()) {
      linear_forward(pre + r0 * I, in, param(w.fc_w), param_or_null(w.fc_b), rows, C, I, layout);
    } else {
      linear_forward(gate + r0 * I, in, param(w.gate_w), nullptr, rows, C, I, layout);
      linear_forward(up + r0 * I, in, param(w.up_w), nullptr, rows, C, I, layout);
    }
  });
  if (gpt2()) {
    check(gelu_forward(hidden, pre, N * I, nullptr), "gelu");
  } else {
    check(swiglu_forward(hidden, gate, up, N * I, nullptr), "swiglu");
  }
  const int down = gpt2() ? w.proj_w : w.down_w;
  const T* down_bias = gpt2() ? tp.row_parallel_bias(param_or_null(w.proj_b)) : nullptr;
  reduced_gemms(mlp_out, out, [&](int64_t r0, int64_t rows, T* into) { linear_forward(into, hidden + r0 * I, param(down), down_bias, rows, I, C, layout); });
  check(residual_add(out, mid, Nl * C, nullptr), "residual");
}

// `gradient_scale` multiplies the gradient of the micro-batch's mean loss
// (micro_batch_gradient_scale). A pipeline stage's model chunk `chunk` runs
// its blocks from the previous virtual stage's `input` (but on the first,
// which embeds the tokens) and hands their output to `output` (but on the
// last, which computes the loss; 0 elsewhere).
double GptTraining::State::forward(const int32_t* host_tokens, const int32_t* host_targets, double gradient_scale, const T* input, T* output,
                                   int64_t chunk) {
  const planner::StageLayers& layers = chunks[static_cast<size_t>(chunk)];
  const int L = static_cast<int>(config.num_layers), begin = layers.first_layer, end = layers.first_layer + layers.num_layers;
  T* embedded = act(begin, "block_input");
  if (embeds(chunk)) {
    check(cudaMemcpy(outside<int32_t>("tokens"), host_tokens, static_cast<size_t>(N) * sizeof(int32_t), cudaMemcpyHostToDevice), "copying the tokens");
    before_layer_forward(planner::kEmbeddingLayer);
    // Each rank looks up the tokens of its vocabulary rows (the others' are 0):
    // their sum is the embedding (under sequence parallelism this rank's rows of it).
    T* lookups = sequence_parallel() ? gathered() : embedded;
    check(embedding_forward(lookups, outside<int32_t>("tokens"), param(slots.wte), N, C, tp.vocab(), nullptr), "embedding");
    tp.reduce_rows(lookups, embedded, N, C);
    if (slots.wpe >= 0) check(position_embedding_forward(embedded, param(slots.wpe), Nl, Tn, C, tp.first_row(N), nullptr, split), "position embedding");
  } else {
    check(cudaMemcpyAsync(embedded, input, static_cast<size_t>(boundary_numel()) * sizeof(T), cudaMemcpyDeviceToDevice, nullptr), "taking the stage's input");
  }
  T* final_input = has_head(chunk) ? outside("final_norm_input") : output;
  for (int l = begin; l < end; ++l) {
    before_layer_forward(l);
    block_forward(l, act(l, "block_input"), l + 1 < end ? act(l + 1, "block_input") : final_input);
    after_layer_forward(l);
  }
  if (!has_head(chunk)) return 0;
  check(cudaMemcpy(outside<int32_t>("targets"), host_targets, static_cast<size_t>(N) * sizeof(int32_t), cudaMemcpyHostToDevice), "copying the targets");
  // The head: final norm, logits = h · Wᵀ (W (V, C): the embedding where
  // tied) over every token (under sequence parallelism h is gathered first),
  // and the fused loss, which leaves dlogits = (p − onehot) · scale / N in the logits.
  T* h = outside("head_input");
  before_layer_forward(L);
  norm_forward(h, outside<float>("final_norm_stats"), final_input, slots.final_norm_w, slots.final_norm_b);
  linear_forward(outside("logits"), whole_values(h), param(slots.head), nullptr, N, C, V,
                 cpu::WeightLayout::out_in);
  // The mean over the global batch: this micro-batch's N tokens of k · dp · N (the reduced sum is the mean gradient).
  // Under tensor parallelism its per-row maxima and sums (2N fp32) live in a
  // buffer of N · C bf16 (C ≥ 4) dead until the backward writes it:
  // grad_residual, or under sequence parallelism (grad_residual then N/tp rows) the gathered gradient's.
  const float scale = static_cast<float>(gradient_scale / static_cast<double>(N));
  float* row_statistics = reinterpret_cast<float*>(sequence_parallel() ? gathered_grad() : outside("grad_residual"));
  tp.cross_entropy(outside<float>("token_losses"), outside("logits"), outside<int32_t>("targets"), N, V, scale, row_statistics);
  std::vector<float> host(static_cast<size_t>(N));
  check(cudaMemcpy(host.data(), outside<float>("token_losses"), host.size() * sizeof(float), cudaMemcpyDeviceToHost), "copying the losses");
  double mean = 0;
  for (float loss : host) mean += static_cast<double>(loss);
  return mean / static_cast<double>(N);
}

// Rebuilds what block l did not keep, as the CPU model's recompute_block:
// the attention core from the kept q, k and v (selective), or the whole
// block from its kept input (full), whose output goes into grad_narrow,
// dead until the block's backward writes it. The same launches on the same
// inputs as the forward's.
void GptTraining::State::recompute_block(int l, int index_in_chunk) {
  const BlockRerun rerun = activations.layout().rerun_of(index_in_chunk);
  if (rerun == BlockRerun::block) {
    block_forward(l, act(l, "block_input"), outside("grad_narrow"));
  } else if (rerun == BlockRerun::attention) {
    attention_forward(l, qkv_views(act(l, "qkv")), "attention recompute");
  }
}

// grad_residual holds the gradient of the block's output; it leaves holding the gradient of its input.
void GptTraining::State::block_backward(int l) {
  const BlockParameters& w = slots.blocks[static_cast<size_t>(l)];
  const int64_t q = config.q_width(), kv = config.kv_width();
  const cpu::WeightLayout layout = gpt2() ? cpu::WeightLayout::in_out : cpu::WeightLayout::out_in;
  const bool sp = sequence_parallel();
  T* dres = outside("grad_residual");
  T* dnarrow = outside("grad_narrow");
  T* dwide = outside("grad_widest");
  // The norms' output gradients, written whole and partial by the column-parallel layers above them.
  T* dnorm_whole = sp ? gathered_grad() : dnarrow;
  // MLP: out = mid + down(act(ln2(mid))); under sequence parallelism the
  // output's gradient and ln2 are gathered whole (ln2 again, as Megatron does).
  // The down projection's input gradient runs row by row as the output
  // gradient's chunks arrive; its weight gradient needs every row.
  T* hidden = act(l, "mlp_activation");
  T* dhidden = gpt2() ? dwide : dwide + N * I;  // SwiGLU: the up projection's half (dgate, dup)
  const int down = gpt2() ? w.proj_w : w.down_w;
  const T* dout = gathered_gemms(dres, gathered_grad(), [&](int64_t r0, int64_t rows, const T* in) {
    linear_backward_input(dhidden + r0 * I, in, param(down), rows, I, C, layout);
  });
  linear_backward_weight(grad(down), gpt2() ? grad_or_null(w.proj_b) : nullptr, dout, hidden, N, I, C, layout);
  if (gpt2()) {
    check(gelu_backward(dwide, act(l, "mlp_pre_activation"), dwide, N * I, nullptr), "gelu backward");
  } else {
    check(swiglu_backward(dwide, dhidden, act(l, "mlp_gate"), act(l, "mlp_up"), dhidden, N * I, nullptr), "swiglu backward");
  }
  const T* ln2 = whole_values(act(l, "mlp_norm_output"));
  if (gpt2()) {
    linear_backward_weight(grad(w.fc_w), grad_or_null(w.fc_b), dwide, ln2, N, C, I, layout);
  } else {
    linear_backward_weight(grad(w.gate_w), nullptr, dwide, ln2, N, C, I, layout);
    linear_backward_weight(grad(w.up_w), nullptr, dhidden, ln2, N, C, I, layout);
  }
  reduced_gemms(dnorm_whole, dnarrow, [&](int64_t r0, int64_t rows, T* into) {
    if (gpt2()) {
      linear_backward_input(into, dwide + r0 * I, param(w.fc_w), rows, C, I, layout);
    } else {
      linear_backward_input(into, dwide + r0 * I, param(w.gate_w), rows, C, I, layout);
      linear_backward_input(into, dhidden + r0 * I, param(w.up_w), rows, C, I, layout, true);
    }
  });
  norm_backward(dres, dnarrow, act(l, "mlp_norm_input"), stats(l, "mlp_norm_stats"), w.mlp_norm_w, w.mlp_norm_b);
  // Attention: mid = x + o(attention(qkv(ln1(x)))). The attention output's
  // gradient (N · q of this rank's heads) fits grad_narrow's N/tp · max(C, q · tp) under sequence parallelism.
  T* att = act(l, "attention_output");
  const QkvViews qkv = qkv_views(act(l, "qkv"));
  const QkvViews dqkv = qkv_views(dwide);
  const T* dmid = gathered_gemms(dres, gathered_grad(), [&](int64_t r0, int64_t rows, const T* in) {
    linear_backward_input(dnarrow + r0 * q, in, param(w.o_w), rows, q, C, layout);
  });
  linear_backward_weight(grad(w.o_w), grad_or_null(w.o_b), dmid, att, N, q, C, layout);
  check(ring->backward(dqkv.q, dqkv.k, dqkv.v, dnarrow, qkv.q, qkv.k, qkv.v, att, stats(l, "attention_lse"), qkv.shape, ring_buffers()), "attention backward");
  if (!gpt2()) {
    rope(dqkv.q, config.num_heads, q, true);
    rope(dqkv.k, config.num_kv_heads, kv, true);
  }
  const T* ln1 = whole_values(act(l, "attn_norm_output"));
  if (gpt2()) {
    linear_backward_weight(grad(w.qkv_w), grad_or_null(w.qkv_b), dwide, ln1, N, C, 3 * q, layout);
  } else {
    linear_backward_weight(grad(w.q_w), grad_or_null(w.q_b), dqkv.q, ln1, N, C, q, layout);
    linear_backward_weight(grad(w.k_w), grad_or_null(w.k_b), dqkv.k, ln1, N, C, kv, layout);
    linear_backward_weight(grad(w.v_w), grad_or_null(w.v_b), dqkv.v, ln1, N, C, kv, layout);
  }
  reduced_gemms(dnorm_whole, dnarrow, [&](int64_t r0, int64_t rows, T* into) {
    if (gpt2()) {
      linear_backward_input(into, dwide + r0 * 3 * q, param(w.qkv_w), rows, C, 3 * q, layout);
    } else {
      linear_backward_input(into, dqkv.q + r0 * q, param(w.q_w), rows, C, q, layout);
      linear_backward_input(into, dqkv.k + r0 * kv, param(w.k_w), rows, C, kv, layout, true);
      linear_backward_input(into, dqkv.v + r0 * kv, param(w.v_w), rows, C, kv, layout, true);
    }
  });
  norm_backward(dres, dnarrow, act(l, "block_input"), stats(l, "attn_norm_stats"), w.attn_norm_w, w.attn_norm_b);
}

// Adds this micro-batch's gradients into the flat buffer; with `reduce` (the
// step's last micro-batch) starts each bucket's all-reduce once its layers are done.
// A pipeline stage's backward of chunk `chunk` starts from the next virtual
// stage's `output_grad` (but on the last, which has the loss) and hands the
// gradient of its input to `input_grad` (but on the first, which ends in the embedding).
void GptTraining::State::backward(bool reduce, const T* output_grad, T* input_grad, int64_t chunk) {
  const planner::StageLayers& layers = chunks[static_cast<size_t>(chunk)];
  const int L = static_cast<int>(config.num_layers), begin = layers.first_layer, end = layers.first_layer + layers.num_layers;
  const bool sp = sequence_parallel();
  T* dres = outside("grad_residual");
  T* dnarrow = outside("grad_narrow");
  if (has_head(chunk)) {
    check(cudaMemsetAsync(dres, 0, static_cast<size_t>(Nl * C) * sizeof(T), nullptr), "zeroing grad_residual");
    // The head: dh = dlogits · W (partial: this rank's vocabulary rows give part
    // of it), dW += dlogitsᵀ · h (h gathered whole again under sequence parallelism), then the final norm.
    before_layer_backward(L);
    T* dh = sp ? gathered_grad() : dnarrow;
    linear_backward(dh, grad(slots.head), nullptr, outside("logits"), whole_values(outside("head_input")), param(slots.head), N,
                    C, V, cpu::WeightLayout::out_in);
    tp.reduce_rows(dh, dnarrow, N, C);
    norm_backward(dres, dnarrow, outside("final_norm_input"), outside<float>("final_norm_stats"), slots.final_norm_w, slots.final_norm_b);
    after_layer_backward(L, reduce);  // the head
  } else {
    check(cudaMemcpyAsync(dres, output_grad, static_cast<size_t>(boundary_numel()) * sizeof(T), cudaMemcpyDeviceToDevice, nullptr),
          "taking the gradient of the stage's output");
  }
  for (int l = end - 1; l >= begin; --l) {
    before_layer_backward(l);
    recompute_block(l, l - begin);
    block_backward(l);
    after_layer_backward(l, reduce);
  }
  if (!embeds(chunk)) {
    check(cudaMemcpyAsync(input_grad, dres, static_cast<size_t>(boundary_numel()) * sizeof(T), cudaMemcpyDeviceToDevice, nullptr),
          "handing back the gradient of the stage's input");
    return;
  }
  before_layer_backward(planner::kEmbeddingLayer);
  // Every token's gradient, for the lookups of this rank's vocabulary rows.
  const T* dembedded = whole_gradients(dres);
  check(embedding_backward(grad(slots.wte), dembedded, outside<int32_t>("tokens"), N, C, tp.vocab(), nullptr), "embedding backward");
  if (slots.wpe >= 0) check(position_embedding_backward(grad(slots.wpe), dembedded, B, Tn, C, nullptr, split), "position embedding backward");
  after_layer_backward(planner::kEmbeddingLayer, reduce);
}

}  // namespace tessera::engine::cuda
