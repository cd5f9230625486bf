// `tessera export --to torchtitan`: a TOML job config for torchtitan's trainer
// (`python -m torchtitan.train --job.config_file FILE`, its run_train.sh), for
// plans made under --runtime torchtitan (FSDP2's model states).
//
// Sections, keys and their meaning as in pytorch/torchtitan v0.2.2
// (73a0e6979dd10b6b1904098eb3c8f62c18ab87ce), the last release read from TOML
// (the 0.3.0 wheel on PyPI takes Python config registries instead), checked
// against that release's own JobConfig, ConfigManager and ParallelDims by
// tools/ecosystem/torchtitan_config.py:
//   [model]        name "llama3" and the flavor of torchtitan/models/llama3/__init__.py
//                  (llama3_args) whose shape is the plan's model: torchtitan builds
//                  models from its flavors, not from a config.json
//   [parallelism]  data_parallel_shard_degree, data_parallel_replicate_degree (HSDP,
//                  the plan's --dp-replicate), context_parallel_degree (training
//                  gathers keys and values with torch's default all-gather rotater,
//                  not the ring the plan costs: utils.py create_context_parallel_ctx
//                  alone sets a rotate method, and only the validator calls it;
//                  torch's _templated_ring_attention_backward passes the key/value
//                  gradients round a ring either way. The same bytes; above cp 2 a
//                  rank holds every rank's keys and values at once, the ring two blocks),
//                  fsdp_reshard_after_forward: "default" for full_shard (every block
//                  reshards, the last layers do not, as model_states_fsdp2.cpp counts),
//                  "never" for shard_grad_op
//   [training]     local_batch_size is the micro-batch; train.py accumulates
//                  global_batch_size / (local_batch_size × dp) micro-batches a step,
//                  dp = replicate × shard (cp ranks share one sequence);
//                  mixed_precision_param bfloat16 or float32 over fp32 sharded
//                  parameters; enable_cpu_offload (FSDP2's CPUOffloadPolicy)
//   [activation_checkpoint]  none, full, or selective with selective_ac_option "op"
//   [compile]      enable for plans timed under torch.compile
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "export_internal.h"
#include "tessera/planner/export.h"
#include "tessera/planner/op_checkpoint_policy.h"
#include "tessera/planner/recompute_blocks.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/report.h"
#include "tessera/planner/runtime_models.h"

namespace tessera::planner {
namespace {

using export_detail::cannot_express;

// A flavor of torchtitan's llama3 model (v0.2.2, models/llama3/__init__.py,
// llama3_args; TransformerModelArgs's defaults in models/llama3/model/args.py:
// vocab_size 128256, norm_eps 1e-5; RMSNorm, SwiGLU, no biases, untied output).
// Every flavor applies Llama 3.1's RoPE scaling (RoPEScalingArgs, factor 8),
// whatever a config says: the same memory and speed.
struct LlamaFlavor {
  const char* name;
  int64_t dim, n_layers, n_heads, n_kv_heads;
  double ffn_dim_multiplier;
  int64_t multiple_of;
  const char* hf_repo;  // whose tokenizer scripts/download_hf_assets.py fetches
};
constexpr LlamaFlavor kLlamaFlavors[] = {
    {"8B", 4096, 32, 32, 8, 1.3, 1024, "meta-llama/Llama-3.1-8B"},
    {"70B", 8192, 80, 64, 8, 1.3, 4096, "meta-llama/Llama-3.1-70B"},
    {"405B", 16384, 126, 128, 8, 1.2, 4096, "meta-llama/Llama-3.1-405B"},
};
constexpr int64_t kFlavorVocab = 128256;
constexpr double kFlavorRopeTheta = 500000;
constexpr double kFlavorNormEps = 1e-5;

// FeedForward's hidden width (models/llama3/model/model.py): two thirds of 4·dim,
// times ffn_dim_multiplier, rounded up to a multiple of multiple_of; each step
// truncates as Python's int() does.
int64_t flavor_ffn_width(const LlamaFlavor& f) {
  auto hidden = static_cast<int64_t>(2.0 * static_cast<double>(4 * f.dim) / 3.0);
  hidden = static_cast<int64_t>(f.ffn_dim_multiplier * static_cast<double>(hidden));
  return f.multiple_of * ((hidden + f.multiple_of - 1) / f.multiple_of);
}

// What of the model differs from the flavor, or nothing.
std::optional<std::string> mismatch(const ModelConfig& c, const LlamaFlavor& f) {
  const auto differs = [&](const char* what, auto model_value, auto flavor_value) -> std::optional<std::string> {
    if (model_value == flavor_value) return std::nullopt;
    std::ostringstream s;
    s << what << " is " << model_value << " where the flavor's is " << flavor_value;
    return s.str();
  };
  for (auto d : {differs("its number of layers", c.num_layers, f.n_layers), differs("its number of attention heads", c.num_heads, f.n_heads),
                 differs("its number of key/value heads", c.num_kv_heads, f.n_kv_heads), differs("its head size", c.head_dim, f.dim / f.n_heads),
                 differs("its MLP width", c.intermediate_size, flavor_ffn_width(f)), differs("its vocabulary size", c.vocab_size, kFlavorVocab),
                 differs("its RoPE base", c.rope_theta, kFlavorRopeTheta), differs("its norm epsilon", c.norm_eps, kFlavorNormEps)}) {
    if (d) return d;
  }
  return std::nullopt;
}

// How to export a model torchtitan does not build: through ColossalAI, which
// builds any config.json (the plan's runtime must be ColossalAI's for that export).
constexpr const char* kOtherModelFix = "plan again with --runtime colossalai and export that --to colossalai";

// The Llama block torchtitan's llama3 builds (runtime_models.h); anything else is refused by name.
Status check_llama_block(const ModelConfig& c) {
  if (const std::optional<std::string> what = torchtitan_cannot_build(c)) {
    return cannot_express("torchtitan", c.name + " has " + *what + ", which torchtitan's llama3 model does not build; " + kOtherModelFix);
  }
  return Status::success();
}

Result<const LlamaFlavor*> flavor_of(const ModelConfig& c) {
  if (Status s = check_llama_block(c); !s) return s.error();
  for (const LlamaFlavor& f : kLlamaFlavors) {
    if (c.hidden_size != f.dim) continue;
    if (const std::optional<std::string> why = mismatch(c, f)) {
      return cannot_express("torchtitan", c.name + " is not torchtitan's llama3 flavor " + f.name + ": " + *why +
                                              "; torchtitan builds its flavors only, so " + kOtherModelFix);
    }
    return &f;
  }
  return cannot_express("torchtitan", c.name + " (hidden size " + std::to_string(c.hidden_size) +
                                          ") is none of torchtitan's llama3 flavors (8B, 70B, 405B: Llama 3's shapes), the models it builds; " + kOtherModelFix);
}

// What the plan does that the job config cannot say. The plan is valid
// (check_plan): under --runtime torchtitan it is FSDP2 (torch_fsdp, no tp or pp)
// over 2 or more shards, in bf16 or fp32 (FP8 is --runtime megatron's), without Korthikanti's selective
// recompute (validate_runtime.cpp), and its replicas divide dp (validate_request.cpp).
Status check_plan_for_torchtitan(const EstimateRequest& r) {
  if (r.plugin.runtime != Runtime::torchtitan) {
    return cannot_express("torchtitan", "the plan counts " + std::string(enum_name(r.plugin.runtime)) +
                                            "'s model states, not torchtitan's FSDP2; plan again with --runtime torchtitan");
  }
  if (r.training.activation_profile != ActivationProfile::flash) {
    return cannot_express("torchtitan", "the plan counts the activations of the " + std::string(enum_name(r.training.activation_profile)) +
                                            " profile, not torchtitan's SDPA; plan again with --activation-profile flash");
  }
  if (r.training.optimizer != OptimizerKind::adam && r.training.optimizer != OptimizerKind::adamw) {
    return cannot_express("torchtitan", "the plan uses " + std::string(enum_name(r.training.optimizer)) +
                                            ", and torchtitan's optimizers are Adam and AdamW; plan again with --optimizer adamw");
  }
  if (r.plugin.fused_rmsnorm) {
    return cannot_express("torchtitan", "the plan counts torchtitan's Triton RMSNorm (--fused-rmsnorm), which torchtitan removed in February 2025 "
                                        "(37c4b818); the exported release runs nn.RMSNorm, so plan again without --fused-rmsnorm");
  }
  return Status::success();
}

// A TOML basic string.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

const char* recompute_mode(RecomputeMode mode) {
  switch (mode) {
    case RecomputeMode::full: return "full";
    case RecomputeMode::op_selective: return "selective";
    case RecomputeMode::none:
    case RecomputeMode::selective: break;  // selective is not valid under --runtime torchtitan
  }
  return "none";
}

}  // namespace

Result<std::string> export_torchtitan(const PlanFile& file, size_t plan_index) {
  if (Status s = export_detail::check_plan(file, plan_index); !s) return s.error();
  const EstimateRequest& r = file.plans[plan_index];
  if (Status s = check_plan_for_torchtitan(r); !s) return s.error();
  auto model = load_model(file.model_source, "model.source");
  if (!model) return model.error();
  auto flavor = flavor_of(model->config);
  if (!flavor) return flavor.error();
  const LlamaFlavor& f = **flavor;
  const ParallelLayout& l = r.layout;
  const TrainingOptions& t = r.training;
  const ClusterSpec& cluster = file.cluster;
  const nlohmann::json& plan = export_detail::plan_json(file, plan_index);
  const std::string_view repo = f.hf_repo;
  const std::string assets = "./assets/hf/" + std::string(repo.substr(repo.find('/') + 1));  // where download_hf_assets.py puts it

  std::ostringstream toml;
  toml << "# torchtitan job config for plan " << plan_index + 1 << " of a plan.json (tessera export --to torchtitan):\n"
       << "#   " << describe_plan(r) << "\n"
       << "#   " << model->config.name << " as torchtitan's llama3 " << f.name << " on " << export_detail::describe_cluster(cluster) << ", sequences of "
       << t.seq_len << " tokens\n"
       << export_detail::predicted_comment(plan);
  if (model->config.rope_scaling != "llama3") {
    toml << "# torchtitan's flavor applies Llama 3.1's RoPE scaling (factor 8), which " << model->config.name << "'s config "
         << (model->config.rope_scaling.empty() ? std::string("does not") : "sets as " + model->config.rope_scaling + ", not as") << "; "
         << "memory and speed are the same.\n";
  }
  toml << "# For torchtitan 0.2.2, from its checkout" << (cluster.num_nodes > 1 ? " on every node (or a shared file system)" : "")
       << ": fetch the tokenizer once\n"
       << "# (a gated repository: add --hf_token TOKEN, or log in with `hf auth login` first) with\n"
       << "#   python scripts/download_hf_assets.py --repo_id " << f.hf_repo << " --assets tokenizer\n";
  if (cluster.num_nodes == 1) {
    toml << "# then run NGPU=" << cluster.gpus_per_node << " CONFIG_FILE=THIS_FILE ./run_train.sh 2>&1 | tee LOG (it shows rank 0's output).\n";
  } else {
    // run_train.sh's environment and rank filter, on every node.
    toml << "# then on each of the " << cluster.num_nodes << " nodes, HOST being one node's address:\n"
         << "#   PYTORCH_ALLOC_CONF=expandable_segments:True torchrun --nnodes " << cluster.num_nodes << " --nproc-per-node " << cluster.gpus_per_node
         << " \\\n"
         << "#     --rdzv-backend c10d --rdzv-endpoint $HOST:29500 --local-ranks-filter 0 -m torchtitan.train --job.config_file THIS_FILE 2>&1 | tee LOG\n";
  }
  toml << "# Then `tessera compare plan.json LOG` sets the metrics lines of one rank (every FSDP rank holds the same) against the plan.\n";
  if (l.cp > 1) {
    toml << "# torchtitan gathers keys and values among the cp ranks with an all-gather where the plan costs a ring: the same bytes,\n"
         << "# but above cp 2 a rank holds every rank's keys and values at once.\n";
  }
  toml << "\n"
       << "[job]\n"
       << "dump_folder = \"./outputs\"\n"
       << "description = " << quoted(describe_plan(r)) << "\n\n"
       << "[metrics]\n"
       << "log_freq = 5  # tessera compare reads each logged step's tps and memory\n\n"
       << "[model]\n"
       << "name = \"llama3\"\n"
       << "flavor = " << quoted(f.name) << "\n"
       << "hf_assets_path = " << quoted(assets) << "\n\n"
       << "[optimizer]\n"
       << "name = " << quoted(t.optimizer == OptimizerKind::adam ? "Adam" : "AdamW") << "\n"
       << "lr = 3e-4  # a placeholder: Tessera plans memory and speed, not the schedule\n"
       << "eps = 1e-8\n\n"
       << "[lr_scheduler]\n"
       << "warmup_steps = 10\n\n"
       << "[training]\n"
       << "local_batch_size = " << t.micro_batch_size << "  # the micro-batch\n"
       << "global_batch_size = " << export_detail::sequences_per_step(r) << "  # " << t.num_micro_batches << " micro-batch"
       << (t.num_micro_batches > 1 ? "es" : "") << " a step on each of the " << l.dp << " data-parallel ranks\n"
       << "seq_len = " << t.seq_len << "\n"
       << "max_norm = 1.0\n"
       << "steps = 30\n"
       << "dataset = \"c4_test\"  # the checkout's sample of C4; \"c4\" streams the whole set\n"
       << "mixed_precision_param = " << quoted(t.precision == Precision::bf16 ? "bfloat16" : "float32") << "\n";
  if (r.plugin.cpu_offload) toml << "enable_cpu_offload = true  # FSDP2's CPUOffloadPolicy, as planned\n";
  toml << "\n[parallelism]\n"
       << "data_parallel_replicate_degree = " << l.dp_replicate << "\n"
       << "data_parallel_shard_degree = " << l.dp / l.dp_replicate << "\n"
       << "fsdp_reshard_after_forward = " << quoted(r.plugin.fsdp_strategy == FsdpStrategy::shard_grad_op ? "never" : "default") << "\n"
       << "tensor_parallel_degree = 1\n"
       << "pipeline_parallel_degree = 1\n"
       << "context_parallel_degree = " << l.cp << "\n\n"
       << "[checkpoint]\n"
       << "enable = false\n\n"
       << "[activation_checkpoint]\n";
  if (t.recompute == RecomputeMode::full && t.recompute_num_layers > 0 && t.recompute_num_layers < model->config.num_layers) {
    // A count no selective_ac_option gives is refused (recompute_blocks.h), as estimate refuses it.
    if (const std::optional<std::string> refusal = torchtitan_count_refusal(model->config, r)) return cannot_express("torchtitan", *refusal);
    const std::optional<int64_t> n = layer_checkpoint_frequency(model->config.num_layers, t.recompute_num_layers);
    toml << "mode = \"selective\"\n"
         << "selective_ac_option = \"" << *n << "\"  # each n-th block recomputed whole, n = " << *n << ": " << t.recompute_num_layers << " of "
         << model->config.num_layers << " blocks, as planned\n";
  } else {
    toml << "mode = " << quoted(recompute_mode(t.recompute)) << "\n";
    if (t.recompute == RecomputeMode::op_selective) toml << "selective_ac_option = \"op\"\n";
  }
  toml << "\n[compile]\n"
       << "enable = " << (t.torch_compile ? "true" : "false") << "\n"
       << "components = " << (r.plugin.compile_model_only ? "[\"model\"]" : "[\"model\", \"loss\"]") << "\n";
  return toml.str();
}

}  // namespace tessera::planner
