// Shared helpers for planner tests: shipped models and GPUs by name.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"

namespace tessera::planner::testing {

inline Model shipped_model(const std::string& name) {
  auto model = load_model(name);
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().message);
  return model.value();
}

inline GpuProfile shipped_gpu(const std::string& name) {
  auto gpu = load_gpu(name);
  EXPECT_TRUE(gpu.ok()) << (gpu.ok() ? "" : gpu.error().message);
  return gpu.value();
}

inline MemoryEstimate estimate_or_fail(const Model& model, const GpuProfile& gpu, const EstimateRequest& request) {
  auto estimate = estimate_memory(model, gpu, request);
  EXPECT_TRUE(estimate.ok()) << (estimate.ok() ? "" : estimate.error().message);
  return estimate.value();
}

// torchtitan's FSDP2 over 8 ranks (--runtime torchtitan --plugin torch_fsdp --dp 8) at `seq` tokens.
inline EstimateRequest torchtitan_fsdp(int64_t seq, RecomputeMode recompute) {
  EstimateRequest r;
  r.plugin.kind = PluginKind::torch_fsdp;
  r.plugin.runtime = Runtime::torchtitan;
  r.layout.dp = 8;
  r.training.seq_len = seq;
  r.training.recompute = recompute;
  return r;
}

// Model states: what the ZeRO paper counts (weights, gradients, master weights, optimizer states).
inline int64_t model_state_bytes(const RankMemory& row) {
  int64_t total = 0;
  for (MemoryCategory c : {MemoryCategory::parameters, MemoryCategory::master_weights, MemoryCategory::gradients,
                           MemoryCategory::optimizer_states}) {
    total += row.bytes[c].device + row.bytes[c].host;
  }
  return total;
}

// Every tensor's totals: the embedding, the blocks and the head (a tied head once).
inline ParamTotals whole_model_totals(const Model& model) {
  ParamTotals all = model.embedding;
  for (const ParamTotals& block : model.blocks) all += block;
  all += model.head;
  return all;
}

}  // namespace tessera::planner::testing
