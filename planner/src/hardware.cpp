#include "tessera/planner/hardware.h"

#include <nlohmann/json.hpp>

#include "tessera/planner/json_io.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner {
namespace {

using nlohmann::json;

Result<double> positive_number(const json& object, const char* key, const std::string& source, bool allow_zero) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) {
    return make_error(ErrorCode::parse_error, source + ": field '" + key + "' must be a number");
  }
  const double value = it->get<double>();
  if (value < 0 || (!allow_zero && value == 0) || value > 1e18) {
    return make_error(ErrorCode::parse_error, source + ": field '" + key + "' must be " + (allow_zero ? "non-negative" : "positive") +
                                                  " and at most 1e18, got " + format_number(value));
  }
  return value;
}

// The optional fields the simulator's kernel models read (absent: 0, none measured).
Result<GpuProfile> parse_kernel_fields(const json& root, const std::string& source, GpuProfile gpu) {
  if (auto it = root.find("sm_count"); it != root.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 1'000'000) {
      return make_error(ErrorCode::parse_error, source + ": field 'sm_count' must be a whole number from 0 to 1000000");
    }
    gpu.sm_count = it->get<int64_t>();
  }
  for (auto [key, target] : {std::pair{"matmul_efficiency", &gpu.matmul_efficiency},
                             std::pair{"matmul_efficiency_fp8", &gpu.matmul_efficiency_fp8},
                             std::pair{"fused_attention_efficiency", &gpu.fused_attention_efficiency}}) {
    if (root.find(key) == root.end()) continue;
    auto value = positive_number(root, key, source, true);
    if (!value) return value.error();
    if (value.value() > 1) return make_error(ErrorCode::parse_error, source + ": field '" + key + "' is a fraction of the peak: at most 1, got " + format_number(value.value()));
    *target = value.value();
  }
  return gpu;
}

}  // namespace

Result<GpuProfile> parse_gpu_profile(std::string_view json_text, const std::string& source) {
  auto parsed = parse_json(json_text, source);
  if (!parsed) return parsed.error();
  const json& root = parsed.value();
  if (!root.is_object()) return make_error(ErrorCode::parse_error, source + ": expected a JSON object (a GPU profile)");
  GpuProfile gpu;
  auto name = root.find("name");
  if (name == root.end() || !name->is_string()) return make_error(ErrorCode::parse_error, source + ": field 'name' must be a string");
  gpu.name = name->get<std::string>();
  auto display = root.find("display_name");
  gpu.display_name = (display != root.end() && display->is_string()) ? display->get<std::string>() : gpu.name;

  struct Field {
    const char* key;
    double* target;
    bool allow_zero;
  };
  double memory = 0, context = 0, usable = 0;
  for (const Field& f : {Field{"memory_bytes", &memory, false}, Field{"cuda_context_bytes", &context, true},
                         Field{"usable_memory_bytes", &usable, false}, Field{"hbm_gbps", &gpu.hbm_gbps, false},
                         Field{"nvlink_gbps", &gpu.nvlink_gbps, true}, Field{"pcie_gbps", &gpu.pcie_gbps, false}}) {
    auto value = positive_number(root, f.key, source, f.allow_zero);
    if (!value) return value.error();
    *f.target = value.value();
  }
  gpu.memory_bytes = static_cast<int64_t>(memory);
  gpu.cuda_context_bytes = static_cast<int64_t>(context);
  gpu.usable_memory_bytes = static_cast<int64_t>(usable);
  if (gpu.usable_memory_bytes + gpu.cuda_context_bytes != gpu.memory_bytes) {
    return make_error(ErrorCode::parse_error, source + ": usable_memory_bytes must equal memory_bytes - cuda_context_bytes");
  }

  auto peaks = root.find("peak_tflops");
  if (peaks == root.end() || !peaks->is_object()) return make_error(ErrorCode::parse_error, source + ": field 'peak_tflops' must be an object");
  for (const Field& f : {Field{"fp32", &gpu.peak_tflops.fp32, false}, Field{"tf32", &gpu.peak_tflops.tf32, false},
                         Field{"bf16", &gpu.peak_tflops.bf16, true}, Field{"fp16", &gpu.peak_tflops.fp16, false}}) {
    auto value = positive_number(*peaks, f.key, source + " peak_tflops", f.allow_zero);
    if (!value) return value.error();
    *f.target = value.value();
  }
  // Optional: GPUs without FP8 tensor cores (before Ada and Hopper) leave it out or give 0.
  if (peaks->contains("fp8")) {
    auto value = positive_number(*peaks, "fp8", source + " peak_tflops", true);
    if (!value) return value.error();
    gpu.peak_tflops.fp8 = value.value();
  }
  return parse_kernel_fields(root, source, gpu);
}

std::string gpu_profile_to_json(const GpuProfile& gpu) {
  const PeakTflops& peak = gpu.peak_tflops;
  return json{{"name", gpu.name},
              {"display_name", gpu.display_name},
              {"memory_bytes", gpu.memory_bytes},
              {"cuda_context_bytes", gpu.cuda_context_bytes},
              {"usable_memory_bytes", gpu.usable_memory_bytes},
              {"peak_tflops", json{{"fp32", peak.fp32}, {"tf32", peak.tf32}, {"bf16", peak.bf16}, {"fp16", peak.fp16}, {"fp8", peak.fp8}}},
              {"hbm_gbps", gpu.hbm_gbps},
              {"nvlink_gbps", gpu.nvlink_gbps},
              {"pcie_gbps", gpu.pcie_gbps},
              {"sm_count", gpu.sm_count},
              {"matmul_efficiency", gpu.matmul_efficiency},
              {"matmul_efficiency_fp8", gpu.matmul_efficiency_fp8},
              {"fused_attention_efficiency", gpu.fused_attention_efficiency}}
      .dump();
}

}  // namespace tessera::planner
