// One GPU's training step's state on the host (cuda/gpt_training.h): the
// optimizer state saved into and restored from a checkpoint's flat host state
// (this rank's shard under ZeRO, Gemini or FSDP), and the parameters and
// gradients copied back in flat order (what the GPU tests compare with the
// CPU engine's).
#include "gpt_training_state.h"

#include <exception>
#include <string>
#include <vector>

namespace tessera::engine::cuda {

bool GptTraining::sharded() const {
  return state_->zero != nullptr || ((state_->gemini != nullptr || state_->fsdp != nullptr) && state_->group != nullptr);
}

FlatAdamWState GptTraining::host_state(const planner::Model& model) const {
  if (state_->zero) return FlatAdamWState(state_->zero->layout());
  if (state_->fsdp && sharded()) return FlatAdamWState(state_->fsdp->layout());
  return state_->gemini && sharded() ? FlatAdamWState(state_->gemini->layout()) : FlatAdamWState(model);
}

Status GptTraining::save_state(FlatAdamWState& state) const {
  const State& s = *state_;
  if (s.zero) {
    if (Status saved = s.zero->save(state); !saved) return make_error(ErrorCode::io_error, "GPU checkpoint: " + saved.error().message);
    return Status::success();
  }
  if (s.gemini) {
    if (Status saved = s.gemini->save(state); !saved) return make_error(ErrorCode::io_error, "GPU checkpoint: " + saved.error().message);
    return Status::success();
  }
  if (s.fsdp) {
    if (Status saved = s.fsdp->save(state); !saved) return make_error(ErrorCode::io_error, "GPU checkpoint: " + saved.error().message);
    return Status::success();
  }
  const auto bytes = static_cast<size_t>(s.numel) * sizeof(float);
  try {
    check(cudaMemcpy(state.weights(), s.master.as<float>(), bytes, cudaMemcpyDeviceToHost), "copying the master weights");
    check(cudaMemcpy(state.state(0), s.m.as<float>(), bytes, cudaMemcpyDeviceToHost), "copying AdamW's exp_avg");
    check(cudaMemcpy(state.state(1), s.v.as<float>(), bytes, cudaMemcpyDeviceToHost), "copying AdamW's exp_avg_sq");
  } catch (const std::exception& e) {
    return make_error(ErrorCode::io_error, std::string("GPU checkpoint: ") + e.what());
  }
  state.set_steps_taken(s.steps);
  return Status::success();
}

Status GptTraining::restore_state(FlatAdamWState& state) {
  State& s = *state_;
  if (s.zero) {
    if (Status restored = s.zero->restore(state); !restored) return make_error(ErrorCode::io_error, "GPU checkpoint: " + restored.error().message);
    return Status::success();
  }
  if (s.gemini) {
    if (Status restored = s.gemini->restore(state); !restored) return make_error(ErrorCode::io_error, "GPU checkpoint: " + restored.error().message);
    return Status::success();
  }
  if (s.fsdp) {
    if (Status restored = s.fsdp->restore(state); !restored) return make_error(ErrorCode::io_error, "GPU checkpoint: " + restored.error().message);
    return Status::success();
  }
  const auto bytes = static_cast<size_t>(s.numel) * sizeof(float);
  std::vector<T> rounded(static_cast<size_t>(s.numel));
  for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = narrow<T>(state.weights()[i]);
  try {
    check(cudaMemcpy(s.master.as<float>(), state.weights(), bytes, cudaMemcpyHostToDevice), "copying the master weights");
    check(cudaMemcpy(s.m.as<float>(), state.state(0), bytes, cudaMemcpyHostToDevice), "copying AdamW's exp_avg");
    check(cudaMemcpy(s.v.as<float>(), state.state(1), bytes, cudaMemcpyHostToDevice), "copying AdamW's exp_avg_sq");
    check(cudaMemcpy(s.params.as<T>(), rounded.data(), rounded.size() * sizeof(T), cudaMemcpyHostToDevice), "copying the parameters");
  } catch (const std::exception& e) {
    return make_error(ErrorCode::io_error, std::string("GPU checkpoint: ") + e.what());
  }
  s.steps = state.steps_taken();
  return Status::success();
}

std::vector<bf16> GptTraining::parameters() const {
  std::vector<bf16> host(static_cast<size_t>(state_->numel)), gradients;
  if (state_->gemini) {
    check(state_->gemini->copy_shards(host, gradients));
    return host;
  }
  if (state_->fsdp) {
    check(state_->fsdp->copy_shards(host, gradients));
    return host;
  }
  check(cudaMemcpy(host.data(), state_->params.as<T>(), host.size() * sizeof(T), cudaMemcpyDeviceToHost), "copying the parameters");
  return host;
}

std::vector<bf16> GptTraining::gradients() const {
  std::vector<bf16> host(static_cast<size_t>(state_->numel));
  if (state_->zero) {
    check(state_->zero->copy_gradient_shard(host));
    return host;
  }
  if (state_->gemini || state_->fsdp) {
    std::vector<bf16> weights;
    check(state_->gemini ? state_->gemini->copy_shards(weights, host) : state_->fsdp->copy_shards(weights, host));
    return host;
  }
  check(cudaMemcpy(host.data(), state_->grads.as<T>(), host.size() * sizeof(T), cudaMemcpyDeviceToHost), "copying the gradients");
  return host;
}

}  // namespace tessera::engine::cuda
