#include "attention_graphs.h"

namespace tessera::engine::cuda::attention_graphs {
namespace {

using cudnn::Dims;
using cudnn::Graph;
using Tensor = cudnnBackendDescriptor_t;

// Dimensions are (batch, head, row, column) throughout, as cuDNN's attention
// graphs expect; the engine's (B, T, heads·HS) rows give the strides. A ring
// block (ops/attention.h) has Sq query rows and Sk keys per sample, its
// samples still T rows apart, and the log-sum-exps of its rows within the
// (B, NH, T) statistics; a whole sequence has Sq = Sk = T.
struct Layout {
  Dims q, q_strides;    // (B, NH, Sq, HS)
  Dims kv, kv_strides;  // (B, KVH, Sk, HS)
  Dims kv_t, kv_t_strides;  // the same memory as (B, KVH, HS, Sk): Kᵀ, Vᵀ
  Dims out, out_strides;  // (B, NH, Sq, HS), rows of NH·HS
  Dims dq_strides, dkv_strides;  // the gradients' (of q's and of kv's dimensions)
  Dims stats, stats_strides, stats_packed;  // (B, NH, Sq, 1): the caller's, and an intermediate's
  Dims scores, scores_strides;  // (B, NH, Sq, Sk)
  Dims scores_t, scores_t_strides;  // the same memory read as (B, NH, Sk, Sq)
  Dims key_heads, key_heads_strides;  // (B, NH, Sk, HS) packed: a K/V gradient per query head before the group's sum
  Dims query_heads, query_heads_strides;  // (B, NH, Sq, HS) packed: dQ's fp32 accumulator

  explicit Layout(const cpu::AttentionShape& s)
      : q{s.B, s.NH, s.queries(), s.HS},
        q_strides{s.T * s.q_stride, s.HS, s.q_stride, 1},
        kv{s.B, s.KVH, s.keys(), s.HS},
        kv_strides{s.T * s.kv_stride, s.HS, s.kv_stride, 1},
        kv_t{s.B, s.KVH, s.HS, s.keys()},
        kv_t_strides{s.T * s.kv_stride, s.HS, 1, s.kv_stride},
        out{s.B, s.NH, s.queries(), s.HS},
        out_strides{s.T * s.NH * s.HS, s.HS, s.NH * s.HS, 1},
        dq_strides{s.T * s.dq_rows_apart(), s.HS, s.dq_rows_apart(), 1},
        dkv_strides{s.T * s.dkv_rows_apart(), s.HS, s.dkv_rows_apart(), 1},
        stats{s.B, s.NH, s.queries(), 1},
        stats_strides{s.NH * s.T, s.T, 1, 1},
        stats_packed(cudnn::packed_strides(stats)),
        scores{s.B, s.NH, s.queries(), s.keys()},
        scores_strides(cudnn::packed_strides(scores)),
        scores_t{s.B, s.NH, s.keys(), s.queries()},
        scores_t_strides{s.NH * s.queries() * s.keys(), s.queries() * s.keys(), 1, s.keys()},
        key_heads{s.B, s.NH, s.keys(), s.HS},
        key_heads_strides(cudnn::packed_strides(key_heads)),
        query_heads{s.B, s.NH, s.queries(), s.HS},
        query_heads_strides(cudnn::packed_strides(query_heads)) {}
};

// The graph's steps in the engine's layout, each making its output tensor.
struct Steps {
  Graph& g;
  const Layout& l;

  // A (B, NH, Sq, Sk) fp32 intermediate: mode(x[, b]).
  Tensor scores(cudnnPointwiseMode_t mode, Tensor x, Tensor b) {
    const Tensor y = g.virtual_tensor(l.scores, l.scores_strides, CUDNN_DATA_FLOAT);
    g.pointwise(mode, x, b, nullptr, y);
    return y;
  }
  // A (B, NH, Sq, Sk) fp32 product of two operands.
  Tensor product(Tensor a, Tensor b) {
    const Tensor y = g.virtual_tensor(l.scores, l.scores_strides, CUDNN_DATA_FLOAT);
    g.matmul(a, b, y);
    return y;
  }
  // A (B, NH, Sq, 1) fp32 row statistic: the rows of x reduced, or mode(x[, b]).
  Tensor rows(cudnnReduceTensorOp_t op, Tensor x) {
    const Tensor y = g.virtual_tensor(l.stats, l.stats_packed, CUDNN_DATA_FLOAT);
    g.reduction(op, x, y);
    return y;
  }
  Tensor rows(cudnnPointwiseMode_t mode, Tensor x, Tensor b) {
    const Tensor y = g.virtual_tensor(l.stats, l.stats_packed, CUDNN_DATA_FLOAT);
    g.pointwise(mode, x, b, nullptr, y);
    return y;
  }
  // (B, NH, Sq, Sk) scores read transposed, rounded to the storage type: a matmul's operand.
  Tensor transposed(Tensor x, cudnnDataType_t io_type) {
    const Tensor y = g.virtual_tensor(l.scores_t, l.scores_t_strides, io_type);
    g.reshape(x, y);
    return y;
  }

  // The causal mask, top-left aligned: a score is kept where its query row is
  // at or after its key column and is −∞ elsewhere (diagonal_band_mask.h's
  // composite form: two index tensors, CMP_GE, BINARY_SELECT).
  Tensor causal(Tensor x, Tensor negative_infinity) {
    const Tensor row = g.virtual_tensor(l.scores, l.scores_strides, CUDNN_DATA_INT32);
    const Tensor column = g.virtual_tensor(l.scores, l.scores_strides, CUDNN_DATA_INT32);
    g.index(x, 2, row);
    g.index(x, 3, column);
    const Tensor keep = g.virtual_tensor(l.scores, l.scores_strides, CUDNN_DATA_BOOLEAN);
    g.pointwise(CUDNN_POINTWISE_CMP_GE, row, column, nullptr, keep, CUDNN_DATA_BOOLEAN);
    const Tensor masked = g.virtual_tensor(l.scores, l.scores_strides, CUDNN_DATA_FLOAT);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, x, negative_infinity, keep, masked);
    return masked;
  }

  // A gradient of K or V: written straight to `result` where every query
  // head has its own K/V head, else per query head and summed over each group.
  void key_value_gradient(Tensor a, Tensor b, Tensor result, const cpu::AttentionShape& s, cudnnDataType_t io_type) {
    if (s.NH == s.KVH) {
      g.matmul(a, b, result);
      return;
    }
    const Tensor per_head = g.virtual_tensor(l.key_heads, l.key_heads_strides, io_type);
    g.matmul(a, b, per_head);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, per_head, result);
  }
};

}  // namespace

// S = Q Kᵀ · scale, causal if the shape says so; M = rowmax S; E = exp(S − M); Z = rowsum E;
// lse = M + log Z; P = E / Z in the storage type; out = P V.
cudnn::Graph forward(const cpu::AttentionShape& s, cudnnDataType_t io_type) {
  const Layout l(s);
  Graph g;
  Steps step{g, l};
  const Tensor q_in = g.tensor(Uid::q, l.q, l.q_strides, io_type);
  const Tensor k_t = g.tensor(Uid::k, l.kv_t, l.kv_t_strides, io_type);
  const Tensor v_in = g.tensor(Uid::v, l.kv, l.kv_strides, io_type);
  const Tensor scale_in = g.scalar(Uid::scale);
  const Tensor minus_inf = g.scalar(Uid::negative_infinity);

  const Tensor scaled = step.scores(CUDNN_POINTWISE_MUL, step.product(q_in, k_t), scale_in);
  const Tensor scores = s.causal ? step.causal(scaled, minus_inf) : scaled;
  const Tensor row_max = step.rows(CUDNN_REDUCE_TENSOR_MAX, scores);
  const Tensor exps = step.scores(CUDNN_POINTWISE_EXP, step.scores(CUDNN_POINTWISE_SUB, scores, row_max), nullptr);
  const Tensor row_sum = step.rows(CUDNN_REDUCE_TENSOR_ADD, exps);
  const Tensor lse_out = g.tensor(Uid::lse, l.stats, l.stats_strides, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_ADD, row_max, step.rows(CUDNN_POINTWISE_LOG, row_sum, nullptr), nullptr, lse_out);
  const Tensor probabilities = g.virtual_tensor(l.scores, l.scores_strides, io_type);
  g.pointwise(CUDNN_POINTWISE_DIV, exps, row_sum, nullptr, probabilities);
  g.matmul(probabilities, v_in, g.tensor(Uid::out, l.out, l.out_strides, io_type));
  return g;
}

// FlashAttention-2's backward (Algorithm 2) as cuDNN's graph: D = rowsum(dO ∘ O)
// (kept in softmax_sum); P = exp(Q Kᵀ · scale − lse), causal if the shape
// says so (a ring block's probabilities from the merged lse); dV = Pᵀ dO;
// dS = P ∘ (dO Vᵀ − D) · scale; dK = dSᵀ Q; dQ = dS K, accumulated in fp32
// (dq_accumulator) and then stored in the storage type.
cudnn::Graph backward(const cpu::AttentionShape& s, cudnnDataType_t io_type) {
  const Layout l(s);
  Graph g;
  Steps step{g, l};
  const Tensor q_in = g.tensor(Uid::q, l.q, l.q_strides, io_type);
  const Tensor k_t = g.tensor(Uid::k, l.kv_t, l.kv_t_strides, io_type);
  const Tensor v_t = g.tensor(Uid::v, l.kv_t, l.kv_t_strides, io_type);
  const Tensor out_in = g.tensor(Uid::out, l.out, l.out_strides, io_type);
  const Tensor dout_in = g.tensor(Uid::dout, l.out, l.out_strides, io_type);
  const Tensor lse_in = g.tensor(Uid::lse, l.stats, l.stats_strides, CUDNN_DATA_FLOAT);
  const Tensor scale_in = g.scalar(Uid::scale);
  const Tensor minus_inf = g.scalar(Uid::negative_infinity);
  const Tensor one_in = g.scalar(Uid::one);

  const Tensor dout_out = g.virtual_tensor(l.out, l.out_strides, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, dout_in, out_in, nullptr, dout_out);
  const Tensor softmax_sum_t = g.tensor(Uid::softmax_sum, l.stats, l.stats_packed, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, step.rows(CUDNN_REDUCE_TENSOR_ADD, dout_out), one_in, nullptr, softmax_sum_t);

  const Tensor scaled = step.scores(CUDNN_POINTWISE_MUL, step.product(q_in, k_t), scale_in);
  const Tensor centered = step.scores(CUDNN_POINTWISE_SUB, scaled, lse_in);
  const Tensor probabilities = step.scores(CUDNN_POINTWISE_EXP, s.causal ? step.causal(centered, minus_inf) : centered, nullptr);
  step.key_value_gradient(step.transposed(probabilities, io_type), dout_in, g.tensor(Uid::dv, l.kv, l.dkv_strides, io_type), s, io_type);

  const Tensor dcentered = step.scores(CUDNN_POINTWISE_SUB, step.product(dout_in, v_t), softmax_sum_t);
  const Tensor dscaled = step.scores(CUDNN_POINTWISE_MUL, step.scores(CUDNN_POINTWISE_MUL, dcentered, probabilities), scale_in);
  step.key_value_gradient(step.transposed(dscaled, io_type), q_in, g.tensor(Uid::dk, l.kv, l.dkv_strides, io_type), s, io_type);

  const Tensor k_in = g.virtual_tensor(l.kv, l.kv_strides, io_type);
  g.reshape(k_t, k_in);
  const Tensor dq_sum = g.tensor(Uid::dq_accumulator, l.query_heads, l.query_heads_strides, CUDNN_DATA_FLOAT);
  g.matmul(dscaled, k_in, dq_sum);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, dq_sum, nullptr, nullptr, g.tensor(Uid::dq, l.q, l.dq_strides, io_type));
  return g;
}

}  // namespace tessera::engine::cuda::attention_graphs
