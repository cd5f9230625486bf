// `tessera export --to megatron`: a bash script that launches Megatron-LM's
// pretrain_gpt.py under torchrun with the plan, for plans made under
// --runtime megatron (Megatron-Core's model states).
//
// Argument names and semantics as in NVIDIA/Megatron-LM megatron/training/arguments.py
// at core_v0.14.0 (the names are unchanged at d98e8a64, the commit model_states_megatron.cpp
// reads), checked by running that parser on the script (tools/ecosystem/megatron_args.py):
//   parallelism   --tensor-model-parallel-size, --pipeline-model-parallel-size,
//                 --context-parallel-size (ring attention, cp_comm_type p2p),
//                 --num-virtual-stages-per-pipeline-rank, --sequence-parallel;
//                 an uneven split is --pipeline-model-parallel-layout, one "E…|t…|…L"
//                 stage per virtual stage (core/transformer/pipeline_parallel_layer_layout.py)
//   states        --use-distributed-optimizer (ZeRO stage 1), --overlap-grad-reduce
//                 (off by default; the plan reduces under backward unless
//                 grad_reduce_after_backward), --overlap-param-gather, --tp-comm-overlap,
//                 --cross-entropy-loss-fusion
//   recompute     selective: --recompute-granularity selective (core attention);
//                 full: --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
//   precision     --bf16 / --fp16; fp8: --bf16 with Transformer Engine's delayed scaling,
//                 --fp8-format hybrid and the 1024-row amax history fp8.h counts
//                 (Megatron's own --fp8-amax-history-len default is 1)
//   data          --mock-data with the NullTokenizer: its vocabulary is --vocab-size + 1
//                 (the end-of-document token; training/tokenizer/tokenizer.py _NullTokenizer),
//                 padded to a multiple of --make-vocab-size-divisible-by × tp (_vocab_size_with_padding)
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "export_internal.h"
#include "tessera/planner/export.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/report.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner {
namespace {

using export_detail::cannot_express;

std::string str(int64_t v) { return std::to_string(v); }


// "Et*5|t*6|…|t*5L": one "|"-separated stage per pipeline rank, the embedding
// on the first, the loss on the last. Uneven splits are never interleaved: their
// stages hold q and q + 1 blocks, which no chunk count divides (interleaved_chunk_counts).
std::string pipeline_layout(const ModelConfig& c, int64_t pp) {
  const std::vector<StageLayers> stages = split_layers(static_cast<int>(c.num_layers), static_cast<int>(pp));
  std::string layout;
  for (size_t s = 0; s < stages.size(); ++s) {
    if (s > 0) layout += "|";
    if (s == 0) layout += "E";
    layout += "t*" + std::to_string(stages[s].num_layers);
    if (s + 1 == stages.size()) layout += "L";
  }
  return layout;
}

// One bash array: its name and its lines, each "--flag value" with an optional comment.
class ArgsArray {
 public:
  explicit ArgsArray(std::string name) : name_(std::move(name)) {}
  void add(const std::string& flag, const std::string& value = "", const std::string& comment = "") {
    lines_.push_back("  " + flag + (value.empty() ? "" : " " + value) + (comment.empty() ? "" : "  # " + comment));
  }
  std::string text() const {
    std::string out = name_ + "=(\n";
    for (const std::string& line : lines_) out += line + "\n";
    return out + ")\n";
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::vector<std::string> lines_;
};

ArgsArray model_args(const ModelConfig& c, int64_t seq_len) {
  ArgsArray a("MODEL_ARGS");
  a.add("--num-layers", str(c.num_layers));
  a.add("--hidden-size", str(c.hidden_size));
  a.add("--ffn-hidden-size", str(c.intermediate_size));
  a.add("--num-attention-heads", str(c.num_heads));
  if (c.head_dim * c.num_heads != c.hidden_size) a.add("--kv-channels", str(c.head_dim));
  if (c.num_kv_heads != c.num_heads) {
    a.add("--group-query-attention");
    a.add("--num-query-groups", str(c.num_kv_heads));
  }
  a.add("--seq-length", str(seq_len));
  if (c.learned_positions) {
    a.add("--position-embedding-type", "learned_absolute");
    a.add("--max-position-embeddings", str(c.max_positions));
  } else {
    a.add("--position-embedding-type", "rope");
    a.add("--rotary-base", str(static_cast<int64_t>(c.rope_theta)));  // an integer to Megatron's parser
    if (c.rotary_pct != 1.0) a.add("--rotary-percent", format_number(c.rotary_pct));
    a.add("--max-position-embeddings", str(std::max(c.max_positions, seq_len)));
  }
  a.add("--normalization", c.norm == NormKind::rms_norm ? "RMSNorm" : "LayerNorm");
  a.add("--norm-epsilon", format_number(c.norm_eps));
  if (c.mlp == MlpKind::swiglu) a.add("--swiglu");
  if (c.activation == "gelu_new" || c.activation == "gelu_pytorch_tanh") a.add("--openai-gelu", "", "GELU's tanh approximation, as " + c.activation);
  if (!c.mlp_bias) a.add("--disable-bias-linear");
  if (c.qkv_bias && !c.mlp_bias) a.add("--add-qkv-bias");
  if (!c.tie_word_embeddings) a.add("--untie-embeddings-and-output-weights");
  a.add("--attention-dropout", format_number(c.attention_dropout));
  a.add("--hidden-dropout", format_number(c.hidden_dropout));
  a.add("--init-method-std", "0.02");
  return a;
}

ArgsArray parallel_args(const ModelConfig& c, const EstimateRequest& r) {
  const ParallelLayout& l = r.layout;
  const PluginOptions& p = r.plugin;
  ArgsArray a("PARALLEL_ARGS");
  a.add("--tensor-model-parallel-size", str(l.tp));
  a.add("--pipeline-model-parallel-size", str(l.pp));
  a.add("--context-parallel-size", str(l.cp));
  if (l.sequence_parallel) a.add("--sequence-parallel");
  const int64_t chunks = p.model_chunks();
  if (l.pp > 1 && c.num_layers % l.pp != 0) {
    a.add("--pipeline-model-parallel-layout", "'" + pipeline_layout(c, l.pp) + "'",
          "the plan's uneven split: " + describe_layer_split(static_cast<int>(c.num_layers), static_cast<int>(l.pp), 1));
  } else if (chunks > 1) {
    a.add("--num-virtual-stages-per-pipeline-rank", str(chunks), "the interleaved schedule");
  }
  if (p.effective_zero_stage() == 1) a.add("--use-distributed-optimizer", "", "ZeRO stage 1");
  if (l.dp_replicate > 1) {
    a.add("--num-distributed-optimizer-instances", str(l.dp_replicate), "hybrid sharding: the optimizer sharded within each of the replicas");
  }
  if (!p.grad_reduce_after_backward && l.dp * l.cp > 1) a.add("--overlap-grad-reduce", "", "gradients reduced under backward, as planned");
  // tp_comm_overlap needs sequence parallelism and tp > 1, which validate_request holds it to.
  if (p.overlap_param_gather) a.add("--overlap-param-gather");
  if (p.no_overlap_p2p_comm) a.add("--no-overlap-p2p-communication", "", "pipeline sends wait, as planned");
  if (p.no_gradient_accumulation_fusion) a.add("--no-gradient-accumulation-fusion", "", "gradients added to the main-gradient buffer on their own, as planned");
  if (p.grad_reduce_in_bf16) a.add("--grad-reduce-in-bf16", "", "the main-gradient buffer in bf16, as planned");
  if (p.fp8_param_gather) a.add("--fp8-param-gather", "", "the weights kept and all-gathered in FP8, as planned");
  if (p.tp_comm_overlap) a.add("--tp-comm-overlap", "", "Transformer Engine's userbuffers");
  return a;
}

ArgsArray training_args(const EstimateRequest& r) {
  const TrainingOptions& t = r.training;
  ArgsArray a("TRAINING_ARGS");
  a.add("--micro-batch-size", str(t.micro_batch_size));
  a.add("--global-batch-size", str(export_detail::sequences_per_step(r)));
  switch (t.precision) {
    case Precision::fp32: break;
    case Precision::fp16: a.add("--fp16"); break;
    case Precision::bf16: a.add("--bf16"); break;
    case Precision::fp8:
      a.add("--bf16");
      a.add("--fp8-format", "hybrid", "Transformer Engine: E4M3 forward, E5M2 gradients");
      a.add("--fp8-amax-history-len", "1024", "the amax history the plan counts (fp8.h)");
      a.add("--fp8-amax-compute-algo", "max");
      break;
  }
  switch (t.recompute) {
    case RecomputeMode::none:
    case RecomputeMode::op_selective: break;  // op_selective is torchtitan's: refused before
    case RecomputeMode::selective: a.add("--recompute-granularity", "selective", "the attention core"); break;
    case RecomputeMode::full:
      a.add("--recompute-granularity", "full");
      if (t.recompute_num_layers > 0) {
        a.add("--recompute-method", "block", "the first blocks of each model chunk recomputed whole, the others keeping all");
        a.add("--recompute-num-layers", std::to_string(t.recompute_num_layers));
      } else {
        a.add("--recompute-method", "uniform");
        a.add("--recompute-num-layers", "1", "every block");
      }
      break;
  }
  a.add("--attention-backend", t.activation_profile == ActivationProfile::megatron ? "unfused" : "flash",
        t.activation_profile == ActivationProfile::megatron ? "the plan keeps the attention scores (Korthikanti et al. 2022)" : "no scores kept");
  if (r.plugin.cross_entropy_loss_fusion) a.add("--cross-entropy-loss-fusion");
  // The learning rate is a placeholder: Tessera plans memory and speed, not the schedule.
  switch (t.optimizer) {
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
      a.add("--optimizer", "adam", "Megatron's adam decouples weight decay (AdamW)");
      a.add("--weight-decay", t.optimizer == OptimizerKind::adamw ? "0.01" : "0");
      a.add("--adam-beta1", "0.9");
      a.add("--adam-beta2", "0.999");
      a.add("--adam-eps", "1e-08");
      break;
    case OptimizerKind::sgd:
    case OptimizerKind::sgd_momentum:
      a.add("--optimizer", "sgd");
      a.add("--sgd-momentum", t.optimizer == OptimizerKind::sgd_momentum ? "0.9" : "0");
      break;
  }
  a.add("--lr", "1e-4");
  a.add("--clip-grad", "1.0");
  a.add("--train-iters", "${TRAIN_ITERS:-30}");
  // Megatron reports memory once, after the first logged interval: 5 iterations
  // in, the optimizer's states exist and the peak is the steady one.
  a.add("--log-interval", "5", "tessera compare plan.json LOG reads the intervals and the memory report");
  a.add("--eval-iters", "0");
  return a;
}

// Megatron pads the output layer's rows to a multiple of
// make_vocab_size_divisible_by × tp; the plan counts them padded to a multiple
// of tp. Its default, 128, is kept where the two agree.
ArgsArray data_args(const ModelConfig& c, int64_t tp) {
  ArgsArray a("DATA_ARGS");
  a.add("--mock-data", "", "replace with --data-path PREFIX and your tokenizer for real data");
  a.add("--tokenizer-type", "NullTokenizer");
  a.add("--vocab-size", str(c.vocab_size - 1), "the NullTokenizer adds the end-of-document token: " + str(c.vocab_size) + " in all");
  if (c.vocab_size % (128 * tp) != 0) {
    a.add("--make-vocab-size-divisible-by", "1", "rows padded to a multiple of tp, as the plan counts them (Megatron's 128 × tp would add more)");
  }
  return a;
}

}  // namespace

Result<std::string> export_megatron(const PlanFile& file, size_t plan_index) {
  // A valid plan (check_plan) of --runtime megatron is of a model Megatron-Core
  // builds, with its attention's activations, not compiled (validate_runtime.cpp).
  if (Status s = export_detail::check_plan(file, plan_index); !s) return s.error();
  const EstimateRequest& r = file.plans[plan_index];
  if (r.plugin.runtime != Runtime::megatron) {
    return cannot_express("megatron", "the plan counts " + std::string(enum_name(r.plugin.runtime)) +
                                          "'s model states, not Megatron-Core's; plan again with --runtime megatron");
  }
  // Megatron's validate_args: --overlap-param-gather needs the distributed optimizer and --overlap-grad-reduce.
  const bool grads_overlapped = !r.plugin.grad_reduce_after_backward && r.layout.dp * r.layout.cp > 1;
  if (r.plugin.overlap_param_gather && (r.plugin.effective_zero_stage() != 1 || !grads_overlapped)) {
    return cannot_express("megatron", "the plan overlaps the parameter all-gather without reducing gradients under backward over the "
                                          "distributed optimizer, which Megatron requires of --overlap-param-gather; plan again without it");
  }
  if (r.plugin.pipeline_scatter_gather) {
    return cannot_express("megatron", "the plan splits pipeline sends over the tp ranks (--scatter-gather-tensors-in-pipeline), which "
                                          "Megatron-LM dropped with Megatron-Core; plan again without it");
  }
  auto model = load_model(file.model_source, "model.source");
  if (!model) return model.error();
  const ModelConfig& c = model->config;

  const ClusterSpec& cluster = file.cluster;
  const nlohmann::json& plan = export_detail::plan_json(file, plan_index);
  const std::vector<ArgsArray> arrays = {model_args(c, r.training.seq_len), parallel_args(c, r), training_args(r), data_args(c, r.layout.tp)};
  std::ostringstream sh;
  sh << "#!/usr/bin/env bash\n"
     << "# Megatron-LM launch of plan " << plan_index + 1 << " of a plan.json (tessera export --to megatron):\n"
     << "#   " << describe_plan(r) << "\n"
     << "#   " << c.name << " on " << export_detail::describe_cluster(cluster) << ", sequences of " << r.training.seq_len << " tokens\n"
     << export_detail::predicted_comment(plan);
  sh << "# Run it from a Megatron-LM checkout (or set MEGATRON_LM) on every node, with NNODES,\n"
     << "# NODE_RANK and MASTER_ADDR set there; TRAIN_ITERS steps (30 by default) of mock data. Then\n"
     << "# `tessera compare plan.json LOG` sets the log (this script's output) against the plan.\n"
     << "set -euo pipefail\n";
  if (r.layout.tp > 1 || r.layout.cp > 1) {
    sh << "# Megatron requires it with tensor or context parallelism before Blackwell (validate_args).\n"
       << "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
  }
  sh << "\n";
  for (const ArgsArray& a : arrays) sh << a.text() << "\n";
  sh << "exec torchrun --nproc-per-node " << cluster.gpus_per_node << " --nnodes \"${NNODES:-" << cluster.num_nodes
     << "}\" --node-rank \"${NODE_RANK:-0}\" \\\n"
     << "  --master-addr \"${MASTER_ADDR:-localhost}\" --master-port \"${MASTER_PORT:-6000}\" \\\n"
     << "  \"${MEGATRON_LM:-.}/pretrain_gpt.py\"";
  for (const ArgsArray& a : arrays) sh << " \"${" << a.name() << "[@]}\"";
  sh << "\n";
  return sh.str();
}

}  // namespace tessera::planner
