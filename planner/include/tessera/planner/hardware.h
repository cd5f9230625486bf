// GPU profiles (data/hardware/gpus/*.json): memory, peak throughput per dtype,
// and link bandwidths, each field sourced in its file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/planner/status.h"

namespace tessera::planner {

struct PeakTflops {
  double fp32 = 0;
  double tf32 = 0;
  double bf16 = 0;
  double fp16 = 0;
  double fp8 = 0;  // FP8 tensor cores (E4M3/E5M2, fp32 accumulate); 0 where the GPU has none
  bool operator==(const PeakTflops&) const = default;
};

struct GpuProfile {
  std::string name;               // registry name, e.g. "h100-80g"
  std::string display_name;       // e.g. "NVIDIA H100 SXM5 80GB"
  int64_t memory_bytes = 0;       // total device memory (nvidia-smi memory.total)
  int64_t cuda_context_bytes = 0; // lost to the CUDA context and kernel images
  int64_t usable_memory_bytes = 0;
  PeakTflops peak_tflops;         // dense (no sparsity)
  double hbm_gbps = 0;
  double nvlink_gbps = 0;         // per GPU, 0 where there is none
  double pcie_gbps = 0;           // host link, per direction
  // What the step-time simulator's kernel models read (gemm_model.h); each is
  // optional in a profile file, 0 where none was measured for the GPU.
  int64_t sm_count = 0;                   // streaming multiprocessors (wave quantization)
  double matmul_efficiency = 0;           // fraction of the dense peak cuBLAS sustains on large GEMMs
  double matmul_efficiency_fp8 = 0;       // the same for FP8 GEMMs (torch._scaled_mm, its default split accumulator), of the FP8 peak
  double fused_attention_efficiency = 0;  // fraction of it a fused (flash) attention kernel sustains, forward + backward
  bool operator==(const GpuProfile&) const = default;
};

Result<GpuProfile> parse_gpu_profile(std::string_view json_text, const std::string& source);

// The profile as the JSON text parse_gpu_profile reads back (without its sources).
std::string gpu_profile_to_json(const GpuProfile& gpu);

}  // namespace tessera::planner
