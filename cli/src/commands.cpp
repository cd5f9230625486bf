#include "commands.h"


#include <algorithm>
#include <cerrno>
#include <tuple>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <ostream>

#include <nlohmann/json.hpp>

#include "cli_app.h"
#include "cli_util.h"
#include "tessera/engine/file_io.h"
#include "tessera/planner/cpu_backend.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/report.h"
#include "tessera/planner/text_util.h"

namespace tessera::cli {
namespace {

using namespace tessera::planner;

std::string group_digits(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

Status write_file_atomically(const std::string& path, const std::string& text, const std::string& field) {
  auto written = engine::replace_file_atomically(path, field, [&](engine::DurableWriter& writer) { return writer.write(text.data(), text.size()); });
  return written ? Status::success() : Status(written.error());
}

int run_models(const ListOptions& options, std::ostream& out, std::ostream& err) {
  nlohmann::json list = nlohmann::json::array();
  std::vector<Model> models;
  size_t name_width = 4;
  for (const std::string& name : shipped_model_names()) {
    auto model = load_model(name);
    if (!model) return fail(err, model.error().message);
    models.push_back(std::move(model).value());
    name_width = std::max(name_width, name.size());
  }
  const int name_column = static_cast<int>(name_width) + 2;  // the longest name and two spaces
  if (options.format == "table") {
    out << std::left << std::setw(name_column) << "name" << std::setw(10) << "family" << std::right << std::setw(17) << "parameters"
        << std::setw(8) << "layers" << std::setw(8) << "hidden" << std::setw(10) << "heads/kv" << std::setw(9) << "vocab"
        << std::setw(9) << "context" << "\n";
  }
  // By family, then by size: the order people compare them in.
  std::sort(models.begin(), models.end(), [](const Model& a, const Model& b) {
    return std::tie(a.config.model_type, a.parameter_count) < std::tie(b.config.model_type, b.parameter_count);
  });
  for (const Model& model : models) {
    const std::string& name = model.config.name;
    const ModelConfig& c = model.config;
    if (options.format == "json") {
      list.push_back({{"name", name}, {"model_type", c.model_type}, {"parameter_count", model.parameter_count},
                      {"num_layers", c.num_layers}, {"hidden_size", c.hidden_size}, {"num_attention_heads", c.num_heads},
                      {"num_key_value_heads", c.num_kv_heads}, {"vocab_size", c.vocab_size}, {"max_position_embeddings", c.max_positions}});
      continue;
    }
    out << std::left << std::setw(name_column) << name << std::setw(10) << c.model_type << std::right << std::setw(17)
        << group_digits(model.parameter_count) << std::setw(8) << c.num_layers << std::setw(8) << c.hidden_size << std::setw(10)
        << (std::to_string(c.num_heads) + "/" + std::to_string(c.num_kv_heads)) << std::setw(9) << c.vocab_size << std::setw(9)
        << c.max_positions << "\n";
  }
  if (options.format == "json") out << nlohmann::json{{"schema", 1}, {"models", list}}.dump(2) << "\n";
  return kExitOk;
}

int run_gpus(const ListOptions& options, std::ostream& out, std::ostream& err) {
  if (!options.profile.empty()) {
    auto gpu = options.profile == "cpu" ? Result<GpuProfile>(host_cpu_profile()) : load_gpu(options.profile, "--profile");
    if (!gpu) return fail(err, gpu.error().message);
    out << nlohmann::json::parse(gpu_profile_to_json(gpu.value())).dump(2) << "\n";
    return kExitOk;
  }
  nlohmann::json list = nlohmann::json::array();
  if (options.format == "table") {
    out << std::left << std::setw(11) << "name" << std::setw(30) << "GPU" << std::right << std::setw(11) << "memory" << std::setw(8)
        << "fp16" << std::setw(8) << "bf16" << std::setw(8) << "HBM" << "   (dense TFLOP/s, GB/s)\n";
  }
  for (const std::string& name : shipped_gpu_names()) {
    auto gpu = load_gpu(name);
    if (!gpu) return fail(err, gpu.error().message);
    if (options.format == "json") {
      list.push_back({{"name", name}, {"display_name", gpu->display_name}, {"memory_bytes", gpu->memory_bytes},
                      {"bf16_tflops", gpu->peak_tflops.bf16}, {"hbm_gbps", gpu->hbm_gbps}});
      continue;
    }
    out << std::left << std::setw(11) << name << std::setw(30) << gpu->display_name << std::right << std::setw(11)
        << format_bytes(gpu->memory_bytes) << std::setw(8) << gpu->peak_tflops.fp16 << std::setw(8)
        << (gpu->peak_tflops.bf16 > 0 ? format_number(gpu->peak_tflops.bf16) : "-") << std::setw(8) << gpu->hbm_gbps << "\n";
  }
  if (options.format == "json") out << nlohmann::json{{"schema", 1}, {"gpus", list}}.dump(2) << "\n";
  return kExitOk;
}

int run_estimate(EstimateOptions& options, std::ostream& out, std::ostream& err) {
  if (Status s = options.finish(); !s) return fail(err, s.error().message);
  auto model = load_model(options.model);
  if (!model) return fail(err, model.error().message);
  auto gpu = load_gpu(options.gpu);
  if (!gpu) return fail(err, gpu.error().message);
  auto estimate = estimate_memory(model.value(), gpu.value(), options.request);
  if (!estimate) return fail(err, estimate.error().message);
  const EstimateReport report{model.value(), gpu.value(), options.request, estimate.value()};
  const std::string text = render_estimate(report, options.format_value);
  if (options.output.empty()) {
    out << text;
    return kExitOk;
  }
  if (Status s = write_file_atomically(options.output, text); !s) return fail(err, s.error().message);
  out << verdict_line(estimate.value()) << "\nwrote " << options.output << "\n";
  return kExitOk;
}

}  // namespace tessera::cli
