#include "tessera/planner/plan_file.h"

#include "tessera/planner/json_io.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner {

using nlohmann::json;

json plan_document(const Model& model, const std::string& model_source, const PlanRequest& request, const PlanSearchResult& result,
                   int top_k) {
  json model_json = model_to_json(model);
  model_json["source"] = model_source;
  json plans = json::array();
  for (size_t i = 0; i < result.plans.size() && static_cast<int>(i) < top_k; ++i) {
    const Candidate& c = result.plans[i];
    json plan = request_to_json(c.request);
    plan["rank"] = i + 1;
    plan["description"] = describe_plan(c.request);
    plan["gradient_accumulation_steps"] = c.request.layout.pp > 1 ? 1 : c.request.training.num_micro_batches;
    plan["fits"] = c.memory.fits();
    plan["max_micro_batch_that_fits"] = c.max_micro_batch_that_fits;
    plan["peak_device_bytes"] = c.peak_device_bytes();
    plan["memory"] = json{{"ranks", ranks_to_json(c.memory)}};
    plan["step_time_s"] = c.simulation.step_time_s;
    plan["tokens_per_s"] = c.simulation.tokens_per_s;
    plan["mfu"] = c.simulation.mfu;
    plan["model_tflops_per_gpu"] = c.simulation.model_tflops_per_gpu;
    plan["step_breakdown"] = breakdown_to_json(c.simulation.breakdown);
    plans.push_back(plan);
  }
  json rejected = json::object();
  int64_t rejected_count = 0;
  for (const auto& [reason, rejection] : result.rejected) {
    rejected[reason] = json{{"count", rejection.count}, {"closest", rejection.closest}};
    rejected_count += rejection.count;
  }
  return json{{"schema", 1},
              {"kind", "plan"},
              {"model", model_json},
              {"cluster", cluster_to_json(request.cluster)},
              {"global_batch_size", request.global_batch_size},
              {"seq_len", request.seq_len},
              {"search", json{{"runtime", enum_name(request.runtime)},  // whose plugins were searched, also when none fits
                              {"candidates_evaluated", result.candidates_evaluated},
                              {"fitting", result.candidates_fitting},
                              {"distinct_plans_fitting", result.plans.size()},
                              {"rejected_count", rejected_count},
                              {"rejected_by_reason", rejected}}},
              {"explanation", result.explanation},
              {"suggestions", result.suggestions},
              {"plans", plans}};
}

Result<PlanFile> parse_plan_file(std::string_view text, const std::string& source) {
  PlanFile plan;
  auto document = parse_json(text, source);
  if (!document) return document.error();
  plan.document = std::move(document).value();
  const json& doc = plan.document;
  if (doc.is_object() && value_or(doc, "kind", std::string()) == "estimate") {
    // What `tessera estimate --format json` and `tessera train` (its DIR/plan.json) write.
    return make_error(ErrorCode::parse_error, source + ": an estimate of one set-up (tessera estimate, or tessera train's DIR/plan.json), not a "
                                              "plan file; write one with `tessera plan`, or give that set-up's options instead");
  }
  if (!doc.is_object() || value_or(doc, "schema", 0) != 1 || value_or(doc, "kind", std::string()) != "plan") {
    return make_error(ErrorCode::parse_error, source + ": not a plan file (expected \"schema\": 1 and \"kind\": \"plan\"; write one with `tessera plan`)");
  }
  try {
    plan.model_source = doc.at("model").at("source").get<std::string>();
    // Whole numbers only: a float such as 1e30 converted to int64 would be undefined behaviour.
    for (auto [key, target] : {std::pair{"global_batch_size", &plan.global_batch_size}, std::pair{"seq_len", &plan.seq_len}}) {
      if (!doc.at(key).is_number_integer()) throw json::type_error::create(302, "not a whole number", nullptr);
      *target = doc.at(key).get<int64_t>();
    }
  } catch (const json::exception&) {
    return make_error(ErrorCode::parse_error, source + ": missing or mistyped 'model.source', 'global_batch_size' or 'seq_len'");
  }
  auto cluster = parse_cluster(doc.contains("cluster") ? doc["cluster"].dump() : "null", source + " cluster");
  if (!cluster) return cluster.error();
  plan.cluster = std::move(cluster).value();
  const json& plans = doc.contains("plans") ? doc["plans"] : json();
  if (!plans.is_array()) return make_error(ErrorCode::parse_error, source + ": 'plans' must be an array");
  for (size_t i = 0; i < plans.size(); ++i) {
    auto request = request_from_json(plans[i], source + " plans[" + std::to_string(i) + "]");
    if (!request) return request.error();
    plan.plans.push_back(std::move(request).value());
  }
  return plan;
}

Result<PlanFile> read_plan_file(const std::string& path) {
  auto text = read_text_file(path, "plan file", kMaxJsonFileBytes);
  if (!text) return text.error();
  return parse_plan_file(text.value(), path);
}

}  // namespace tessera::planner
