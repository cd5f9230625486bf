#include "fuzz_entries.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "estimate_options.h"
#include "tessera/engine/checkpoint_manifest.h"
#include "tessera/engine/data.h"
#include "tessera/engine/safetensors.h"
#include "tessera/planner/export.h"
#include "tessera/planner/measured_run.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/plan_file.h"
#include "tessera/planner/model_config.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/report.h"

namespace tessera::fuzz {
namespace {

using namespace tessera::planner;

// An invariant of the library that no input may break: report and abort, so
// that the fuzzer (or the replay test) stops on it.
void require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
  std::abort();
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = shipped_model_names();
  return names;
}

const std::vector<std::string>& gpu_names() {
  static const std::vector<std::string> names = shipped_gpu_names();
  return names;
}

// Renders `format` and checks what every format promises: non-empty text; for
// JSON, a document of schema 1.
void render_and_check(const EstimateReport& report, ReportFormat format) {
  const std::string text = render_estimate(report, format);
  require(!text.empty(), "render_estimate returned empty text");
  if (format == ReportFormat::json) {
    const nlohmann::json document = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    require(!document.is_discarded(), "the JSON report is not valid JSON");
    require(document.is_object() && document.value("schema", 0) == 1, "the JSON report lacks \"schema\": 1");
  }
}

void check_estimate(const MemoryEstimate& estimate) {
  require(!estimate.ranks.empty(), "an estimate has no rank rows");
  (void)verdict_line(estimate);
}

}  // namespace

void fuzz_model_config_once(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = parse_model_config(text, "fuzz");
  if (!config) {
    require(!config.error().message.empty(), "parse_model_config failed with an empty message");
    return;
  }
  const Model model = make_model(std::move(config).value());
  // Estimating is linear in the layers and tensors: keep each run cheap.
  if (!(model.parameter_count < 2'000'000'000 && model.config.num_layers <= 200)) return;
  static const Result<GpuProfile> gpu = load_gpu("h100-80g");
  require(gpu.ok(), "the shipped GPU h100-80g does not load");
  const EstimateRequest request{};
  auto estimate = estimate_memory(model, gpu.value(), request);
  if (!estimate) {
    require(!estimate.error().message.empty(), "estimate_memory failed with an empty message");
    return;
  }
  check_estimate(estimate.value());
  const EstimateReport report{model, gpu.value(), request, estimate.value()};
  for (const auto& entry : kReportFormatNames) render_and_check(report, entry.value);
}

std::vector<std::string> split_arguments(const uint8_t* data, size_t size) {
  std::vector<std::string> arguments;
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    const char ch = static_cast<char>(data[i]);
    if (ch == '\n' || ch == '\0') {
      arguments.push_back(std::move(current));
      current.clear();
    } else {
      current += ch;
    }
  }
  if (!current.empty()) arguments.push_back(std::move(current));  // a final separator adds no empty argument
  return arguments;
}

void fuzz_estimate_options_once(const uint8_t* data, size_t size) {
  auto options = cli::parse_estimate_arguments(split_arguments(data, size));
  if (!options) {
    require(!options.error().message.empty(), "parse_estimate_arguments failed with an empty message");
    return;
  }
  // Only shipped names: a path could name any file (or a FIFO, or /dev/zero).
  if (!contains(model_names(), options->model) || !contains(gpu_names(), options->gpu)) return;
  auto model = load_model(options->model);
  require(model.ok(), "a shipped model does not load");
  auto gpu = load_gpu(options->gpu);
  require(gpu.ok(), "a shipped GPU does not load");
  // Gemini's chunk search costs (chunk sizes to try) x (tensors); a valid request
  // may ask for a million sizes, about a second unsanitized. Check such requests
  // but do not run them: the fuzzer would report them as hangs.
  const GeminiOptions& gemini = options->request.plugin.gemini;
  if (options->request.plugin.kind == PluginKind::gemini && gemini.chunk_size == 0 && gemini.search_interval > 0 &&
      gemini.search_range_m * 1048576.0 / static_cast<double>(gemini.search_interval) > 65536) {
    (void)validate_request(model.value(), gpu.value(), options->request);
    return;
  }
  auto estimate = estimate_memory(model.value(), gpu.value(), options->request);
  if (!estimate) {
    require(!estimate.error().message.empty(), "estimate_memory failed with an empty message");
    return;
  }
  check_estimate(estimate.value());
  const EstimateReport report{model.value(), gpu.value(), options->request, estimate.value()};
  render_and_check(report, ReportFormat::table);
  render_and_check(report, ReportFormat::json);
  if (options->format_value != ReportFormat::table && options->format_value != ReportFormat::json) {
    render_and_check(report, options->format_value);
  }
}

void fuzz_plan_file_once(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Only shipped names: the model source and the cluster's GPU could name any
  // file (or a FIFO, or /dev/zero). Looked at in a plain JSON parse first.
  const nlohmann::json document = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto named = [&](const char* object, const char* key, const std::vector<std::string>& names) {
    if (!document.is_object() || !document.contains(object) || !document[object].is_object()) return true;  // the parser reports it
    const nlohmann::json& value = document[object].value(key, nlohmann::json());
    return !value.is_string() || contains(names, value.get<std::string>());
  };
  if (!named("model", "source", model_names()) || !named("cluster", "gpu", gpu_names())) return;
  auto plan = parse_plan_file(text, "fuzz");
  if (!plan) {
    require(!plan.error().message.empty(), "parse_plan_file failed with an empty message");
    return;
  }
  // A few plans at most, and none whose Gemini chunk search would be the slow part (see above).
  for (size_t i = 0; i < std::min<size_t>(plan->plans.size(), 3); ++i) {
    const GeminiOptions& gemini = plan->plans[i].plugin.gemini;
    if (plan->plans[i].plugin.kind == PluginKind::gemini && gemini.chunk_size == 0 && gemini.search_interval > 0 &&
        gemini.search_range_m * 1048576.0 / static_cast<double>(gemini.search_interval) > 65536) {
      continue;
    }
    for (const auto& target : kExportTargetNames) {
      auto exported = export_plan(plan.value(), i, target.value);
      require(exported ? !exported->empty() : !exported.error().message.empty(), "an export returned neither text nor a message");
    }
  }
}

void fuzz_checkpoint_once(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto file = engine::parse_safetensors(bytes, "fuzz");
  if (file) {
    for (const auto& [name, tensor] : file->tensors) {
      int64_t numel = 1;
      for (int64_t d : tensor.shape) {
        require(d >= 0, "a tensor has a negative dimension");
        numel *= d;
      }
      require(static_cast<int64_t>(tensor.data.size()) == numel, "a tensor's data does not match its shape");
    }
  } else {
    require(!file.error().message.empty(), "parse_safetensors failed with an empty message");
  }
  auto manifest = engine::parse_manifest(bytes, "fuzz");
  if (manifest) {
    auto again = engine::parse_manifest(engine::manifest_to_json(manifest.value()), "fuzz");
    require(again.ok() && again->step == manifest->step && again->files.size() == manifest->files.size(), "a manifest does not round-trip");
  } else {
    require(!manifest.error().message.empty(), "parse_manifest failed with an empty message");
  }
}

void fuzz_token_shard_once(const uint8_t* data, size_t size) {
  auto tokens = engine::parse_token_data(std::string_view(reinterpret_cast<const char*>(data), size), /*shard=*/true, "fuzz.bin");
  if (!tokens) {
    require(!tokens.error().message.empty(), "parse_token_data failed with an empty message");
    return;
  }
  require(tokens->tokens.size() * 2 + 1024 == size, "a shard's token count does not match its size");
  for (int32_t token : tokens->tokens) require(token >= 0 && token < tokens->vocab_size, "a token id lies outside the vocabulary");
}

void fuzz_metrics_file_once(const uint8_t* data, size_t size) {
  auto run = parse_measured_run(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!run) {
    require(!run.error().message.empty(), "parse_measured_run failed with an empty message");
    return;
  }
  auto ranks = compare_memory(run->ranks, "fuzz", run->ranks, "fuzz");
  require(ranks.ok(), "a run's ranks are not covered by the same ranks");
  require(ranks->size() == run->ranks.size(), "a metrics row does not hold exactly one rank");
  require(max_abs_error_pct(ranks.value()) == 0.0, "a run compared with itself shows an error");
}

}  // namespace tessera::fuzz
