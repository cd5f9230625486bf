// Optimizers over the model's parameters: AdamW (decoupled weight decay,
// Loshchilov & Hutter 2019), Adam (L2 decay folded into the gradient, as
// torch.optim.Adam) and SGD with or without momentum. States live in the
// ledger's `optimizer_states`, in the compute type.
//
// Mixed precision (Micikevicius et al. 2018, §3.1): with 16-bit parameters the
// optimizer keeps fp32 master weights (`master_weights`), updates them from the
// 16-bit gradients and rounds them back into the model's parameters.
//
// Each step unscales the gradients (1 / loss scale), and skips the update when
// any gradient is inf or NaN (the fp16 loss scaler's overflow check); else it
// clips the global gradient norm to `max_grad_norm` (Pascanu et al. 2013).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "tessera/engine/adamw_step.h"
#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"
#include "tessera/engine/tensor.h"
#include "tessera/planner/sharding.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

struct OptimizerOptions {
  planner::OptimizerKind kind = planner::OptimizerKind::adamw;
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;     // GPT-3's Adam beta2 (Brown et al. 2020, App. B)
  double eps = 1e-8;
  double weight_decay = 0.1;
  double momentum = 0.9;   // sgd_momentum
  double max_grad_norm = planner::kMaxGradNorm;  // 0 = no clipping
};

// Weight decay on matrices and embeddings (2-D) only, not on norms and biases
// (1-D), as in GPT-2/3 training practice: one flag per parameter shape.
inline std::vector<bool> decay_mask(const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<bool> mask;
  for (const auto& shape : shapes) mask.push_back(shape.size() >= 2);
  return mask;
}

// What checkpoints and checks read and restore of an optimizer, whatever the
// type of the parameters it updates: the pieces of its shard, its fp32
// weights (the master copy, or fp32 parameters themselves) and states.
class OptimizerShard {
 public:
  virtual ~OptimizerShard() = default;
  virtual const std::vector<planner::ShardPiece>& pieces() const = 0;
  virtual int64_t numel() const = 0;
  virtual float* weights() = 0;
  // State s (0: Adam's exp_avg or the momentum, 1: exp_avg_sq) of the whole shard.
  virtual float* state(int s) = 0;
  virtual int64_t steps_taken() const = 0;
  virtual void set_steps_taken(int64_t steps) = 0;
  // After weights() were restored: rounds them into 16-bit parameters.
  virtual void weights_restored() = 0;
};

// The optimizer of one range of the model's flat parameters: all of them on
// one rank, the rank's shard under ZeRO (planner/sharding.h). Its states (and
// fp32 master weights) are flat buffers of the shard's length; `pieces` say
// which parameter each part of the shard belongs to, for weight decay and for
// the checkpoint's tensor names.
template <typename T>
class Optimizer final : public OptimizerShard {
 public:
  using W = compute_t<T>;
  static_assert(std::is_same_v<W, float>, "optimizers keep fp32 weights and states");
  static constexpr bool kKeepsMaster = !std::is_same_v<T, W>;

  // `params`: the shard of the flat parameters it updates (shard_numel
  // elements), whose values the master weights start from. `decay[p]`:
  // whether parameter p (flat order) takes weight decay. States are booked in
  // `space`, or their first `host.elements` on the host and the rest on the device.
  Optimizer(MemoryLedger& ledger, T* params, int64_t shard_numel, std::vector<planner::ShardPiece> pieces, std::vector<bool> decay,
            OptimizerOptions options, MemorySpace space = MemorySpace::device)
      : Optimizer(ledger, params, shard_numel, std::move(pieces), std::move(decay), options,
                  HostPrefix{space == MemorySpace::host ? shard_numel : 0}) {}
  Optimizer(MemoryLedger& ledger, T* params, int64_t shard_numel, std::vector<planner::ShardPiece> pieces, std::vector<bool> decay,
            OptimizerOptions options, HostPrefix host)
      : options_(options), pieces_(std::move(pieces)), decay_(std::move(decay)), numel_(shard_numel), params_(params) {
    const int states = planner::optimizer_state_count(options.kind);
    for (int s = 0; s < states; ++s) states_.emplace_back(ledger, MemoryCategory::optimizer_states, numel_, host);
    if constexpr (kKeepsMaster) {
      master_ = Tensor<W>(ledger, MemoryCategory::master_weights, numel_, host);
      if (params != nullptr) {  // null in a dry run
        for (int64_t i = 0; i < numel_; ++i) master_.data()[i] = widen(params[i]);
      }
    }
  }

  // The optimizer of every parameter, whole: one rank's, or a replicated one's.
  static Optimizer whole(MemoryLedger& ledger, T* flat_params, const std::vector<planner::FlatParameter>& order, std::vector<bool> decay,
                         OptimizerOptions options) {
    const int64_t numel = order.empty() ? 0 : order.back().offset + order.back().numel;
    return Optimizer(ledger, flat_params, numel, planner::shard_pieces(order, 1, 0), std::move(decay), options);
  }

  // Σ (g · unscale)² over the shard's gradients, in double, over fixed blocks
  // summed in order: the same bits whatever the number of threads. Under ZeRO
  // the ranks' sums are added to make the global norm.
  template <typename G>
  double sum_of_squares(const G* grads, double unscale) const { return sum_of_squares(grads, numel_, unscale); }
  template <typename G>
  static double sum_of_squares(const G* grads, int64_t numel, double unscale) {
    constexpr int64_t kBlock = int64_t{1} << 16;
    const int64_t blocks = (numel + kBlock - 1) / kBlock;
    std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      double sum = 0;
      for (int64_t i = b * kBlock; i < std::min(numel, (b + 1) * kBlock); ++i) {
        sum += math::unscaled_square(static_cast<double>(widen(grads[i])), unscale);
      }
      partial[static_cast<size_t>(b)] = sum;
    }
    double total = 0;
    for (double sum : partial) total += sum;
    return total;
  }

  // The shard's part of the gradient norm's square under tensor and pipeline
  // parallelism: sum_of_squares over the pieces whose parameter `counted`
  // marks (parallel/strategy.h, set_model_parallel), piece by piece; over the
  // whole shard where it marks every parameter or is empty. The CPU engine's
  // strategies and the GPU step's offloaded shard (cuda/zero_offload.h) sum the same way.
  template <typename G>
  double counted_sum_of_squares(const G* grads, const std::vector<bool>& counted, double unscale) const {
    if (std::find(counted.begin(), counted.end(), false) == counted.end()) return sum_of_squares(grads, unscale);
    double sum = 0;
    for (const planner::ShardPiece& piece : pieces_) {
      if (counted[static_cast<size_t>(piece.parameter)]) sum += sum_of_squares(grads + piece.offset_in_shard, piece.numel, unscale);
    }
    return sum;
  }

  // One update of the shard from its gradients, given the global sum of
  // squares of the unscaled gradients; returns the norm before clipping, or
  // nullopt (and no update) when it is not finite: a gradient is inf or NaN
  // (the fp16 loss scaler's overflow check).
  // `grads`: the shard's gradients, in the model's type or (offloaded) in fp32.
  template <typename G>
  std::optional<double> apply(const G* grads, double global_sum_of_squares, double loss_scale) {
    return apply_by_piece([grads](const planner::ShardPiece& piece) { return grads + piece.offset_in_shard; }, global_sum_of_squares, loss_scale);
  }

  // apply() where each piece's gradients are elsewhere: gradients_of(piece)
  // points at the piece's first gradient (Gemini keeps them chunk by chunk).
  template <typename GradientsOf>
  std::optional<double> apply_by_piece(GradientsOf&& gradients_of, double global_sum_of_squares, double loss_scale) {
    if (!std::isfinite(global_sum_of_squares)) return std::nullopt;
    const double norm = std::sqrt(global_sum_of_squares);
    const double clip = clip_coefficient(norm, options_.max_grad_norm);
    ++step_;
    const AdamWScalars scalars = adamw_scalars(options_.learning_rate, options_.beta1, options_.beta2, options_.eps, step_, clip / loss_scale);
    const W gradient_factor = scalars.gradient_factor, lr = scalars.lr, bias1 = scalars.bias1, bias2 = scalars.bias2;
    W* weights = full_precision();
    W* s0 = states_.size() > 0 ? states_[0].data() : nullptr;
    W* s1 = states_.size() > 1 ? states_[1].data() : nullptr;
    for (const planner::ShardPiece& piece : pieces_) {
      const W wd = decay_[static_cast<size_t>(piece.parameter)] ? static_cast<W>(options_.weight_decay) : W(0);
      const int64_t begin = piece.offset_in_shard, end = begin + piece.numel;
      const auto* grads = gradients_of(piece);  // the piece's, from its first element
      // Element by element, independent: threads change nothing in the result.
#pragma omp parallel for schedule(static)
      for (int64_t i = begin; i < end; ++i) {
        const W grad = widen(grads[i - begin]) * gradient_factor;
        W& w = weights[i];
        switch (options_.kind) {
          case planner::OptimizerKind::adamw:
            math::adamw_update(w, s0[i], s1[i], grad, lr, scalars.beta1, scalars.beta2, scalars.eps, wd, bias1, bias2);
            break;
          case planner::OptimizerKind::adam:
            math::adamw_update(w, s0[i], s1[i], grad + wd * w, lr, scalars.beta1, scalars.beta2, scalars.eps, W(0), bias1, bias2);
            break;
          case planner::OptimizerKind::sgd_momentum:
            s0[i] = static_cast<W>(options_.momentum) * s0[i] + grad + wd * w;
            w -= lr * s0[i];
            break;
          case planner::OptimizerKind::sgd: w -= lr * (grad + wd * w); break;
        }
      }
    }
    round_into();
    return norm;
  }

  // apply() with this shard's own sum of squares: the one-rank step.
  std::optional<double> step(const T* grads, double loss_scale = 1.0) { return apply(grads, sum_of_squares(grads, 1.0 / loss_scale), loss_scale); }

  // The shard's weights in full precision: the master copy, or the parameters themselves in fp32.
  W* full_precision() {
    if constexpr (kKeepsMaster) {
      return master_.data();
    } else {
      return params_;
    }
  }

  // Rounds the master weights into the model's 16-bit parameters (after a
  // step, or after a checkpoint restored the master weights).
  void round_into() {
    if (params_ == nullptr) return;  // the caller keeps the parameters elsewhere (Gemini's chunks) and rounds them itself
    if constexpr (kKeepsMaster) {
      const W* master = master_.data();
      T* params = params_;
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < numel_; ++i) params[i] = narrow<T>(master[i]);
    }
  }

  const std::vector<planner::ShardPiece>& pieces() const override { return pieces_; }
  int64_t numel() const override { return numel_; }
  float* weights() override { return full_precision(); }
  float* state(int s) override { return states_[static_cast<size_t>(s)].data(); }
  int64_t steps_taken() const override { return step_; }
  void set_steps_taken(int64_t steps) override { step_ = steps; }
  void weights_restored() override { round_into(); }

 private:
  OptimizerOptions options_;
  std::vector<planner::ShardPiece> pieces_;
  std::vector<bool> decay_;
  int64_t numel_ = 0;
  T* params_ = nullptr;
  std::vector<Tensor<W>> states_;
  Tensor<W> master_;  // mixed precision only
  int64_t step_ = 0;
};

}  // namespace tessera::engine
