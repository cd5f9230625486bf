// Optimizers over the model's parameters: AdamW (decoupled weight decay,
// Loshchilov & Hutter 2019), Adam (L2 decay folded into the gradient, as
// torch.optim.Adam) and SGD with or without momentum. States live in the
// ledger's `optimizer_states`. Before the update, the global gradient norm is
// clipped to `max_grad_norm` (Pascanu et al. 2013).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "tessera/engine/elementwise_math.h"
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
  // `decay[i]`: whether parameter i takes weight decay (matrices and embeddings, not norms or biases).
  Optimizer(MemoryLedger& ledger, const std::vector<Tensor<T>>& params, std::vector<bool> decay, OptimizerOptions options)
      : options_(options), decay_(std::move(decay)) {
    const int states = planner::optimizer_state_count(options.kind);
    for (const Tensor<T>& p : params) {
      for (int s = 0; s < states; ++s) states_.emplace_back(ledger, MemoryCategory::optimizer_states, p.numel());
    }
  }

  // Clips, updates, and returns the gradient norm before clipping.
  double step(std::vector<Tensor<T>>& params, std::vector<Tensor<T>>& grads) {
    double sum_squares = 0;
    for (const Tensor<T>& g : grads) {
      for (int64_t i = 0; i < g.numel(); ++i) sum_squares += static_cast<double>(g.data()[i]) * static_cast<double>(g.data()[i]);
    }
    const double norm = std::sqrt(sum_squares);
    const double clip = options_.max_grad_norm > 0 && norm > options_.max_grad_norm ? options_.max_grad_norm / norm : 1.0;
    ++step_;
    const T lr = static_cast<T>(options_.learning_rate);
    const T bias1 = static_cast<T>(1 - std::pow(options_.beta1, static_cast<double>(step_)));
    const T bias2 = static_cast<T>(1 - std::pow(options_.beta2, static_cast<double>(step_)));
    const int states = planner::optimizer_state_count(options_.kind);
    for (size_t p = 0; p < params.size(); ++p) {
      T* w = params[p].data();
      const T* g = grads[p].data();
      const T wd = decay_[p] ? static_cast<T>(options_.weight_decay) : T(0);
      T* s0 = states > 0 ? states_[p * static_cast<size_t>(states)].data() : nullptr;
      T* s1 = states > 1 ? states_[p * static_cast<size_t>(states) + 1].data() : nullptr;
      for (int64_t i = 0; i < params[p].numel(); ++i) {
        T grad = g[i] * static_cast<T>(clip);
        switch (options_.kind) {
          case planner::OptimizerKind::adamw:
            math::adamw_update(w[i], s0[i], s1[i], grad, lr, T(options_.beta1), T(options_.beta2), T(options_.eps), wd, bias1, bias2);
            break;
          case planner::OptimizerKind::adam:
            math::adamw_update(w[i], s0[i], s1[i], grad + wd * w[i], lr, T(options_.beta1), T(options_.beta2), T(options_.eps), T(0), bias1, bias2);
            break;
          case planner::OptimizerKind::sgd_momentum:
            s0[i] = static_cast<T>(options_.momentum) * s0[i] + grad + wd * w[i];
            w[i] -= lr * s0[i];
            break;
          case planner::OptimizerKind::sgd: w[i] -= lr * (grad + wd * w[i]); break;
        }
      }
    }
    return norm;
  }

  int64_t steps_taken() const { return step_; }
  std::vector<Tensor<T>>& states() { return states_; }
  void set_steps_taken(int64_t steps) { step_ = steps; }

 private:
  OptimizerOptions options_;
  std::vector<bool> decay_;
  std::vector<Tensor<T>> states_;
  int64_t step_ = 0;
};

}  // namespace tessera::engine
