// The model states of one GPU's training step (gpt_training_state.h), by the
// data-parallel plugin: the flat parameters, gradients, master weights and
// AdamW states (whole, or the parameters padded for ZeRO's shards), Gemini's
// chunks or FSDP's units, each started from the planner's initial weights.
#include "gpt_training_state.h"

#include <memory>
#include <vector>

#include "tessera/engine/device/tensor_parallel_part.h"
#include "tessera/engine/parallel/zero_buckets.h"

namespace tessera::engine::cuda {

// The parameters of this rank's part `model` of `whole` (from the planner's
// initialization, in flat order, as the CPU model's rank of the same tensor-
// parallel group starts from), their gradients and AdamW's fp32 master
// weights and states: whole, or under ZeRO (`zero_plugin`) the parameters
// padded to dp shards and the rest kept by the shards (zero_shards.h).
void GptTraining::State::allocate_model_states(const planner::Model& whole, const planner::Model& model, uint64_t seed,
                                               const planner::PluginOptions* zero_plugin) {
  const int64_t n = numel, padded = zero_plugin != nullptr ? zero_buffers(model, *zero_plugin, group->size()).parameters : n;
  const std::vector<T> host = initial_part_parameters(whole, seed, tp.size(), tp.rank(), padded, stage);
  std::vector<float> weights(static_cast<size_t>(n));
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = widen(host[i]);
  params = take(padded * 2, MemoryCategory::parameters);
  check(cudaMemcpy(params.as<T>(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "copying the parameters");
  if (zero_plugin != nullptr) {
    zero = std::make_unique<ZeroShards>(*allocator, *ledger, *group, model, *zero_plugin, decay, options, params.as<T>(), tp.group(), pipeline);
    check(zero->start_from(weights));
  } else {
    grads = take(n * 2, MemoryCategory::gradients);
    master = take(n * 4, MemoryCategory::master_weights);
    m = take(n * 4, MemoryCategory::optimizer_states);
    v = take(n * 4, MemoryCategory::optimizer_states);
    check(cudaMemcpy(master.as<float>(), weights.data(), weights.size() * sizeof(float), cudaMemcpyHostToDevice), "copying the master weights");
    check(cudaMemset(m.as<void>(), 0, static_cast<size_t>(n) * 4), "zeroing the optimizer states");
    check(cudaMemset(v.as<void>(), 0, static_cast<size_t>(n) * 4), "zeroing the optimizer states");
  }
  T* flat = zero ? zero->full_gradients() : grads.as<T>();  // null: ZeRO-2's bucket binds them layer by layer
  for (const planner::FlatParameter& p : order) {
    parameter_of.push_back(params.as<T>() + p.offset);
    gradient_of.push_back(flat != nullptr ? flat + p.offset : nullptr);
  }
}

// Gemini: no flat buffers; the parameters live in chunk shards, and each
// layer's are bound into its gathered chunks before it runs (gemini_shards.h).
void GptTraining::State::allocate_gemini(const planner::Model& model, uint64_t seed, const GpuDataParallel& data_parallel) {
  const std::vector<T> host = initial_part_parameters(model, seed, 1, 0, numel);
  std::vector<float> weights(host.size());  // rounded to bf16 first, as the flat start
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = widen(host[i]);
  parameter_of.assign(order.size(), nullptr);
  gradient_of.assign(order.size(), nullptr);
  gemini = std::make_unique<GeminiShards>(*allocator, *ledger, group, model, data_parallel.plugin, data_parallel.gemini_parameter_chunks_on_host, decay, options,
                                          parameter_of, gradient_of);
  check(gemini->start_from(weights));
}

// FSDP: no flat buffers; every unit's fp32 shard, from the model's initial
// fp32 values as the CPU engine's FSDP starts, is cast into its gathered unit
// before the unit runs (fsdp_shards.h).
void GptTraining::State::allocate_fsdp(const planner::Model& model, uint64_t seed, const planner::PluginOptions& plugin) {
  parameter_of.assign(order.size(), nullptr);
  gradient_of.assign(order.size(), nullptr);
  fsdp = std::make_unique<FsdpShards>(*allocator, *ledger, group, model, plugin, decay, options, parameter_of, gradient_of);
  check(fsdp->start_from(model, seed));
}

}  // namespace tessera::engine::cuda
