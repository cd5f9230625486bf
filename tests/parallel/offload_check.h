// What the offload training tests (hybrid_offload_test.cpp,
// fsdp_offload_test.cpp) hold a run to: its committed checkpoint's tensor
// files against another run's, byte for byte, and the ledger's peaks of the
// model states' categories on the device and on the host against the
// planner's estimate of the same run.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"
#include "gpu_host_copy.h"
#include "training_check.h"

namespace tessera::training_check {

// The tensor files of A's committed checkpoint (the model, and the optimizer's
// whole or one shard per rank), against B's of the same name (the manifests
// differ by their run ids).
inline void expect_same_checkpoint(const std::string& a, const std::string& b, const std::string& what, int rank) {
  const auto tensor_files = [](const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir + "/checkpoint")) {
      if (entry.path().extension() == ".safetensors") names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> files = tensor_files(a);
  expect(files.size() >= 2 && files == tensor_files(b), what + ": the checkpoints hold other files", rank);
  for (const std::string& file : files) {
    expect(file_bytes(a + "/checkpoint/" + file) == file_bytes(b + "/checkpoint/" + file), what + ": " + file + " differs", rank);
  }
}

// The ledger's peaks of the model states (and the buffers they pass through)
// on both spaces against the planner's row of this rank's stage, for the
// CPU engine (the tessera profile: its offloaded buffers pageable, exact).
inline void expect_planners_estimate(const planner::Model& model, const engine::TrainOptions& o, const planner::ParallelLayout& layout, int64_t stage,
                                     const engine::MemoryLedger& ledger, const std::string& name, int rank) {
  planner::EstimateRequest request = estimate_request(o, layout);
  request.training.activation_profile = planner::ActivationProfile::tessera;
  auto estimate = planner::estimate_memory(model, planner::load_gpu("h100-80g").value(), request);
  expect(estimate.ok(), name + ": the planner's estimate" + (estimate.ok() ? "" : ", " + estimate.error().message), rank);
  if (!estimate.ok()) return;
  for (const planner::RankMemory& row : estimate->ranks) {
    if (stage < row.first_stage || stage > row.last_stage) continue;
    for (const MemoryCategory category : {MemoryCategory::parameters, MemoryCategory::gradients, MemoryCategory::master_weights,
                                          MemoryCategory::optimizer_states, MemoryCategory::comm_buffers, MemoryCategory::chunk_buffers}) {
      for (const auto& [space, where, planned] : {std::tuple{MemorySpace::device, "device", row.bytes[category].device},
                                                  std::tuple{MemorySpace::host, "host", row.bytes[category].host}}) {
        const int64_t booked = ledger.peak(category, space);
        expect(booked == planned, name + ": the ledger's " + std::string(to_string(category)) + " on the " + where + ", " +
                                      std::to_string(booked) + " bytes; the planner's " + std::to_string(planned),
               rank);
      }
    }
  }
}

}  // namespace tessera::training_check
