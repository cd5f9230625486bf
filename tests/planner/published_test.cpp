// The simulator against published training throughput
// (data/measurements/published.json): each result within 25%.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tessera/planner/registry.h"
#include "tessera/planner/simulate.h"

namespace tessera::planner {
namespace {

using nlohmann::json;

json published() {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/data/measurements/published.json");
  return json::parse(in);
}

// A Hugging Face config of the result's shape, read like any other.
Model model_of(const json& m) {
  json config{{"model_type", m["model_type"]},     {"hidden_size", m["hidden_size"]},   {"num_hidden_layers", m["num_layers"]},
              {"num_attention_heads", m["num_attention_heads"]}, {"vocab_size", m["vocab_size"]}, {"n_positions", m["seq_len"]}};
  auto parsed = parse_model_config(config.dump(), "published");
  EXPECT_TRUE(parsed.ok());
  return make_model(parsed.value());
}

struct Outcome {
  double simulated_tflops = 0;
  double reported_tflops = 0;
};

Outcome simulate(const json& result) {
  const Model model = model_of(result["model"]);
  const json& c = result["cluster"];
  const json& l = result["layout"];
  const json& t = result["training"];
  auto cluster = make_cluster(load_gpu(c["gpu"]).value(), c["num_gpus"], c["gpus_per_node"], c["inter_node_gbps"].get<double>());
  EXPECT_TRUE(cluster.ok());
  EstimateRequest r;
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.plugin.zero_stage = t.value("zero_stage", 0);
  r.layout = ParallelLayout{l["dp"], l["tp"], l["pp"], false};
  r.training.precision = parse_enum<Precision>(t["precision"].get<std::string>()).value();
  r.training.recompute = parse_enum<RecomputeMode>(t["recompute"].get<std::string>()).value();
  r.training.optimizer = OptimizerKind::adam;
  // Megatron-LM (2021) and Megatron-DeepSpeed (BLOOM, 2022) ran an unfused
  // attention core that keeps the softmax: Korthikanti's accounting.
  r.training.activation_profile = ActivationProfile::megatron;
  r.training.seq_len = result["model"]["seq_len"];
  r.training.micro_batch_size = l["micro_batch_size"];
  r.training.num_micro_batches = t["global_batch_size"].get<int64_t>() / (r.training.micro_batch_size * r.layout.dp);
  // The runs with virtual pipeline stages used Megatron-LM's interleaved schedule.
  if (const int64_t chunks = l.value("virtual_pipeline_chunks", 1); chunks > 1) {
    r.plugin.pp_schedule = PipelineSchedule::interleaved;
    r.plugin.num_model_chunks = chunks;
  }
  // Throughput does not depend on whether it fits: simulate with the estimate's chunk-free plugins.
  MemoryEstimate memory;
  auto sim = simulate_step(model, cluster.value(), r, memory, SimulationSettings{}, false);
  EXPECT_TRUE(sim.ok()) << (sim.ok() ? "" : sim.error().message);
  return Outcome{sim->hardware_tflops_per_gpu, result["reported"]["tflops_per_gpu"].get<double>()};
}

TEST(Published, SimulatorLandsWithin25PercentOfEachResult) {
  const json doc = published();
  ASSERT_GE(doc["results"].size(), 3u);
  for (const json& result : doc["results"]) {
    const Outcome o = simulate(result);
    const double error = o.simulated_tflops / o.reported_tflops - 1;
    std::printf("%-28s reported %6.1f TFLOP/s/GPU, simulated %6.1f (%+.1f%%)\n", result["id"].get<std::string>().c_str(), o.reported_tflops,
                o.simulated_tflops, 100 * error);
    EXPECT_LT(std::abs(error), 0.25) << result["id"];
  }
}

}  // namespace
}  // namespace tessera::planner
