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

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"
#include "tessera/engine/tensor.h"
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
  double max_grad_norm = 1.0;  // 0 = no clipping
};

template <typename T>
class Optimizer {
 public:
  using W = compute_t<T>;
  static constexpr bool kKeepsMaster = !std::is_same_v<T, W>;

  // `decay[i]`: whether parameter i takes weight decay (matrices and embeddings, not norms or biases).
  Optimizer(MemoryLedger& ledger, const std::vector<Tensor<T>>& params, std::vector<bool> decay, OptimizerOptions options)
      : options_(options), decay_(std::move(decay)) {
    const int states = planner::optimizer_state_count(options.kind);
    for (const Tensor<T>& p : params) {
      for (int s = 0; s < states; ++s) states_.emplace_back(ledger, MemoryCategory::optimizer_states, p.numel());
      if constexpr (kKeepsMaster) {
        master_.emplace_back(ledger, MemoryCategory::master_weights, p.numel());
        for (int64_t i = 0; i < p.numel(); ++i) master_.back().data()[i] = widen(p.data()[i]);
      }
    }
  }

  // Updates and returns the norm of the unscaled gradients before clipping;
  // nullopt (and no update) when a gradient is inf or NaN.
  std::optional<double> step(std::vector<Tensor<T>>& params, std::vector<Tensor<T>>& grads, double loss_scale = 1.0) {
    const double unscale = 1.0 / loss_scale;
    double sum_squares = 0;
    for (const Tensor<T>& g : grads) sum_squares += sum_of_squares(g, unscale);
    if (!std::isfinite(sum_squares)) return std::nullopt;
    const double norm = std::sqrt(sum_squares);
    const double clip = options_.max_grad_norm > 0 && norm > options_.max_grad_norm ? options_.max_grad_norm / norm : 1.0;
    const auto gradient_factor = static_cast<W>(clip * unscale);
    ++step_;
    const W lr = static_cast<W>(options_.learning_rate);
    const W bias1 = static_cast<W>(1 - std::pow(options_.beta1, static_cast<double>(step_)));
    const W bias2 = static_cast<W>(1 - std::pow(options_.beta2, static_cast<double>(step_)));
    const int states = planner::optimizer_state_count(options_.kind);
    for (size_t p = 0; p < params.size(); ++p) {
      W* w = full_precision(params, p);
      const T* g = grads[p].data();
      const W wd = decay_[p] ? static_cast<W>(options_.weight_decay) : W(0);
      W* s0 = states > 0 ? states_[p * static_cast<size_t>(states)].data() : nullptr;
      W* s1 = states > 1 ? states_[p * static_cast<size_t>(states) + 1].data() : nullptr;
      // Element by element, independent: threads change nothing in the result.
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < params[p].numel(); ++i) {
        const W grad = widen(g[i]) * gradient_factor;
        switch (options_.kind) {
          case planner::OptimizerKind::adamw:
            math::adamw_update(w[i], s0[i], s1[i], grad, lr, W(options_.beta1), W(options_.beta2), W(options_.eps), wd, bias1, bias2);
            break;
          case planner::OptimizerKind::adam:
            math::adamw_update(w[i], s0[i], s1[i], grad + wd * w[i], lr, W(options_.beta1), W(options_.beta2), W(options_.eps), W(0), bias1, bias2);
            break;
          case planner::OptimizerKind::sgd_momentum:
            s0[i] = static_cast<W>(options_.momentum) * s0[i] + grad + wd * w[i];
            w[i] -= lr * s0[i];
            break;
          case planner::OptimizerKind::sgd: w[i] -= lr * (grad + wd * w[i]); break;
        }
      }
    }
    round_into(params);
    return norm;
  }

  // The weights in full precision: the master copy, or the parameters themselves in fp32.
  W* full_precision(std::vector<Tensor<T>>& params, size_t index) {
    if constexpr (kKeepsMaster) {
      return master_[index].data();
    } else {
      return params[index].data();
    }
  }

  // Rounds the master weights into the model's 16-bit parameters (after a
  // step, or after a checkpoint restored the master weights).
  void round_into(std::vector<Tensor<T>>& params) {
    if constexpr (kKeepsMaster) {
      for (size_t p = 0; p < params.size(); ++p) {
        T* w = params[p].data();
        const W* master = master_[p].data();
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < params[p].numel(); ++i) w[i] = narrow<T>(master[i]);
      }
    }
  }

  int64_t steps_taken() const { return step_; }
  std::vector<Tensor<W>>& states() { return states_; }
  void set_steps_taken(int64_t steps) { step_ = steps; }

 private:
  // Σ (g · unscale)² in double, over fixed blocks summed in order: the same
  // bits whatever the number of threads.
  static double sum_of_squares(const Tensor<T>& g, double unscale) {
    constexpr int64_t kBlock = int64_t{1} << 16;
    const int64_t blocks = (g.numel() + kBlock - 1) / kBlock;
    std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      double sum = 0;
      for (int64_t i = b * kBlock; i < std::min(g.numel(), (b + 1) * kBlock); ++i) {
        const double x = static_cast<double>(widen(g.data()[i])) * unscale;
        sum += x * x;
      }
      partial[static_cast<size_t>(b)] = sum;
    }
    double total = 0;
    for (double sum : partial) total += sum;
    return total;
  }

  OptimizerOptions options_;
  std::vector<bool> decay_;
  std::vector<Tensor<W>> states_;
  std::vector<Tensor<W>> master_;  // mixed precision only
  int64_t step_ = 0;
};

}  // namespace tessera::engine
