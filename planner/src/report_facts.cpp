#include "report_facts.h"

#include "tessera/planner/activations.h"
#include "tessera/planner/eager_elementwise.h"
#include "tessera/planner/fp8.h"
#include "tessera/planner/gradient_accumulation.h"
#include "tessera/planner/op_checkpoint_policy.h"
#include "tessera/planner/pinned_host_blocks.h"
#include "tessera/planner/recompute_blocks.h"
#include "tessera/planner/text_util.h"

#include <algorithm>
#include <cstdio>
#include <optional>

namespace tessera::planner {

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes < 0 ? -bytes : bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char text[48];
  if (unit == 0) {
    std::snprintf(text, sizeof text, "%s%lld B", bytes < 0 ? "-" : "", static_cast<long long>(value));
  } else {
    std::snprintf(text, sizeof text, value < 100 ? "%s%.2f %s" : "%s%.1f %s", bytes < 0 ? "-" : "", value, units[unit]);
  }
  return text;
}

std::string format_seconds(double s) {
  if (s == 0) return "0 s";  // nothing of that part, not a small amount of it
  char text[32];
  if (s < 1e-3) {
    std::snprintf(text, sizeof text, "%.1f µs", s * 1e6);
  } else {
    std::snprintf(text, sizeof text, s < 0.01 ? "%.2f ms" : (s < 1 ? "%.0f ms" : "%.2f s"), s < 1 ? s * 1000 : s);
  }
  return text;
}

std::string format_count(int64_t count) {
  const char* suffix[] = {"", "K", "M", "B", "T"};
  double value = static_cast<double>(count);
  int i = 0;
  while (value >= 1000.0 && i < 4) {
    value /= 1000.0;
    ++i;
  }
  char text[32];
  std::snprintf(text, sizeof text, i == 0 ? "%.0f%s" : "%.1f%s", value, suffix[i]);
  return text;
}

std::string rank_range(const RankMemory& row) {
  if (row.first_rank == row.last_rank) return "rank " + std::to_string(row.first_rank);
  return "ranks " + std::to_string(row.first_rank) + "-" + std::to_string(row.last_rank);
}

namespace {

// "3" for one layer, "0-7" for several.
std::string layer_span(int64_t first, int64_t last) { return first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last); }

}  // namespace

std::string layers_label(const RankMemory& row) {
  if (row.layer_chunks.empty()) {
    if (row.last_layer < row.first_layer) return "";
    return (row.first_layer == row.last_layer ? "layer " : "layers ") + layer_span(row.first_layer, row.last_layer);
  }
  std::string label = "layers ";
  for (size_t j = 0; j < row.layer_chunks.size(); ++j) {
    const StageLayers& chunk = row.layer_chunks[j];
    label += (j > 0 ? ", " : "") + layer_span(chunk.first_layer, chunk.first_layer + chunk.num_layers - 1);
  }
  return label;
}

std::string row_label(const RankMemory& row) {
  std::string label = rank_range(row);
  label += row.first_stage == row.last_stage ? " · stage " + std::to_string(row.first_stage)
                                             : " · stages " + std::to_string(row.first_stage) + "-" + std::to_string(row.last_stage);
  if (const std::string layers = layers_label(row); !layers.empty()) label += " · " + layers;
  if (row.has_embedding) label += " · embedding";
  if (row.has_head) label += " · head";
  return label;
}

std::string verdict_line(const MemoryEstimate& estimate) {
  const RankMemory& tight = estimate.tightest();
  if (tight.fits()) {
    return "FITS: every rank leaves at least " + format_bytes(tight.margin) + " of " + format_bytes(tight.gpu_capacity) + " free" +
           (tight.headroom > 0 ? " beyond the " + format_bytes(tight.headroom) + " headroom" : "") + " (tightest: " + rank_range(tight) + ", " +
           format_bytes(tight.device_total) + ")";
  }
  MemoryCategory largest = MemoryCategory::parameters;
  for (MemoryCategory c : kAllMemoryCategories) {
    if (tight.bytes[c].device > tight.bytes[largest].device) largest = c;
  }
  const bool one_rank = tight.first_rank == tight.last_rank;
  return "DOES NOT FIT: " + rank_range(tight) + (one_rank ? " needs " : " need ") + format_bytes(tight.device_total) + " of " +
         format_bytes(tight.gpu_capacity) + (tight.headroom > 0 ? " less " + format_bytes(tight.headroom) + " headroom" : "") + " (" +
         format_bytes(-tight.margin) + " over; largest category " +
         std::string(to_string(largest)) + " " + format_bytes(tight.bytes[largest].device) + ")";
}

std::string summary_line(const EstimateReport& r) {
  const auto& t = r.request.training;
  const auto& l = r.request.layout;
  std::string line = r.model.config.name + " (" + format_count(r.model.parameter_count) + " parameters) on " + r.gpu.name +
                     " (" + format_bytes(r.gpu.memory_bytes) + "): " + std::string(enum_name(r.request.plugin.kind));
  if (r.request.plugin.kind == PluginKind::low_level_zero || r.request.plugin.kind == PluginKind::hybrid_parallel) {
    line += " zero " + std::to_string(r.request.plugin.effective_zero_stage());
    if (r.request.plugin.cpu_offload) line += " + cpu offload";
  }
  if (r.request.plugin.kind == PluginKind::torch_fsdp) {
    line += " " + std::string(enum_name(r.request.plugin.fsdp_strategy));
    if (r.request.plugin.cpu_offload) line += " + cpu offload";
  }
  line += ", dp " + std::to_string(l.dp) + " × tp " + std::to_string(l.tp) + " × pp " + std::to_string(l.pp);
  if (l.cp > 1) line += " × cp " + std::to_string(l.cp);
  if (l.dp_replicate > 1) line += " (" + std::to_string(l.dp_replicate) + " replicas, states sharded over " + std::to_string(l.shard_ranks()) + ")";
  if (l.sequence_parallel) line += " + sp";
  line += ", " + std::string(enum_name(t.precision)) + ", " + std::string(enum_name(t.optimizer)) + ", recompute " +
          describe_recompute(r.request) + ", micro-batch " + std::to_string(t.micro_batch_size) + " × seq " +
          std::to_string(t.seq_len) + ", " + std::to_string(t.num_micro_batches) +
          (t.num_micro_batches == 1 ? " micro-batch" : " micro-batches");
  if (l.pp > 1) line += ", " + std::string(enum_name(r.request.plugin.pp_schedule));
  if (r.request.plugin.pp_schedule == PipelineSchedule::interleaved) line += " × " + std::to_string(r.request.plugin.num_model_chunks) + " chunks";
  if (r.request.plugin.runtime != Runtime::colossalai) line += ", runtime " + std::string(enum_name(r.request.plugin.runtime));
  return line;
}

namespace {

// Where each activation profile's terms come from (activations.h), for the report.
std::string activation_profile_source(ActivationProfile profile) {
  switch (profile) {
    case ActivationProfile::megatron: return "Korthikanti et al. 2022 §4: sbh(34 + 5as/h) per layer, dropout masks where the config has dropout";
    case ActivationProfile::flash:
      return "fused attention (PyTorch SDPA, FlashAttention-2): Korthikanti's terms without the s² scores, plus an fp32 log-sum-exp per row and head"
             " (--activation-profile to override)";
    case ActivationProfile::hf:
      return "Hugging Face transformers run eagerly with 16-bit weights (ColossalAI, DeepSpeed, FSDP mixed precision), SDPA attention: every "
             "tensor autograd saves, measured on an H100 (--activation-profile to override)";
    case ActivationProfile::hf_eager:
      return "Hugging Face transformers with attn_implementation=\"eager\" (16-bit weights): as hf, plus the s² softmax probabilities";
    case ActivationProfile::hf_autocast:
      return "Hugging Face transformers run eagerly with fp32 weights under torch.autocast (the Hugging Face Trainer), SDPA attention: fp32 "
             "norms, 16-bit casts of each matmul's input and weights kept for backward, measured on an H100";
    case ActivationProfile::tessera_gpu:
      return "what Tessera's engine keeps in its GPU step: the tessera profile's terms with 16-bit logits (its fused cross-entropy) and the "
             "device copies of the tokens and targets";
    case ActivationProfile::tessera: break;
  }
  return "what Tessera's engine keeps: no dropout, FlashAttention-2 attention (an fp32 log-sum-exp per row and head, no s² scores), fp32 norm statistics";
}

// How the element-wise ops run, where that is not the fused default the profile implies.
std::optional<AssumptionLine> execution_line(const ModelConfig& config, const PluginOptions& p, const TrainingOptions& t) {
  const ElementwiseExecution execution = elementwise_execution(config, p.runtime, t);
  switch (execution) {
    case ElementwiseExecution::torchtitan_llama_eager:
      return AssumptionLine{"execution",
                            std::string("eager: torchtitan's Llama block op by op, each op through HBM and keeping what autograd saves for it (") +
                                (p.fused_rmsnorm ? "its Triton RMSNorm, --fused-rmsnorm" : "the Python RMSNorm's fp32 copies") +
                                ", SiLU's output, repeat_kv's copies; --torch-compile to fuse)",
                            "eager_elementwise.h, activations_torchtitan.h; torchtitan 9dec370 models/llama/model.py, models/norms.py"};
    case ElementwiseExecution::hf_gpt2_eager:
    case ElementwiseExecution::hf_llama_eager: {
      const bool gpt2 = execution == ElementwiseExecution::hf_gpt2_eager;
      const bool autocast = t.activation_profile == ActivationProfile::hf_autocast;
      const TransformersBehaviour release =
          transformers_behaviour(t.transformers_version, config.family, t.activation_profile == ActivationProfile::hf_eager);
      const bool fp32_loss = release.loss_in_fp32 || autocast;
      return AssumptionLine{"execution",
                            std::string("eager: Hugging Face's ") + (gpt2 ? "GPT-2" : "Llama layer") + " op by op, each op through HBM" +
                                (autocast ? (gpt2 ? ", norms and GELU in fp32 under autocast" : ", norms and RoPE in fp32 under autocast") : "") +
                                (fp32_loss ? ", the loss on fp32 logits" : ", the loss on the 16-bit logits") +
                                (release.shifts_logits ? " shifted by a copy" : "") + " (--torch-compile to fuse)",
                            std::string("eager_elementwise.h; transformers ") +
                                (gpt2 ? "modeling_gpt2.py, activations.py NewGELUActivation" : "modeling_llama.py (LlamaRMSNorm, apply_rotary_pos_emb, LlamaMLP)") +
                                (release.shifts_logits ? (gpt2 ? ", GPT2LMHeadModel's CrossEntropyLoss" : ", LlamaForCausalLM's CrossEntropyLoss")
                                                       : ", loss_utils.py ForCausalLMLoss") +
                                "; torch.amp autocast op lists; saved tensors measured on an H100"};
    }
    case ElementwiseExecution::megatron_lm_kernels:
      return AssumptionLine{"execution",
                            "Megatron-LM's fused kernels (LayerNorm, bias-GELU, bias-dropout-add, the causal softmax, dropout), each through HBM",
                            "megatron_elementwise.h; Megatron-LM 79a3bb6b megatron/model/transformer.py, fused_softmax.py"};
    case ElementwiseExecution::fused: break;
  }
  if (!t.torch_compile) return std::nullopt;
  if (p.compile_model_only) {
    return AssumptionLine{"execution", "torch.compile on the blocks: element-wise ops fused, each tensor kept for backward once through HBM; "
                                       "memory as the activation profile counts it; the loss eager, its fp32 tensors as torchtitan's eager loss keeps them",
                          "--torch-compile --compile-model-only (torchtitan's [compile] components = [\"model\"])"};
  }
  return AssumptionLine{"execution", "torch.compile: element-wise ops fused, each tensor kept for backward once through HBM; memory as "
                                     "the activation profile counts it", "--torch-compile"};
}

}  // namespace

std::string model_states_source(const PluginOptions& p, Precision precision) {
  switch (p.runtime) {
    case Runtime::megatron: {
      const bool distributed = p.effective_zero_stage() == 1;
      const bool sixteen_bit_grads = megatron_main_grad_bytes(p, precision) == 2;  // fp16, or bf16 with --grad-reduce-in-bf16
      const char* per_param = !is_mixed_precision(precision) ? (distributed ? "8 + 8/d" : "16")
                              : sixteen_bit_grads            ? (distributed ? "4 + 16/d" : "20")
                                                             : (distributed ? "6 + 12/d" : "18");  // bf16 and fp8 with an fp32 buffer
      const char* buffer = p.grad_reduce_in_bf16 ? "bf16, --grad-reduce-in-bf16" : "fp32 under bf16";
      return std::string("Megatron-Core ") + (distributed ? "distributed optimizer" : "optimizer") + ": contiguous main-gradient buffer (" + buffer +
             "), fp32 main parameters; " + per_param + " bytes per parameter with Adam (Megatron-LM docs, dist_optimizer.md; d98e8a6)";
    }
    case Runtime::torchtitan:
      return "FSDP2 as torchtitan applies it: per-parameter dim-0 shards of fp32 weights and gradients, bf16 gathers of two "
             "units, fp32 reduce-scatter (torchtitan b5bcd76 distributed/fsdp.py; PyTorch _fully_shard)";
    case Runtime::deepspeed:
      if (p.deepspeed_pipeline() && precision == Precision::fp16) {
        return "DeepSpeed's pipeline engine with DeepSpeedZeroOptimizer at stage 1: fp16 parameters and gradients (added into across "
               "micro-batches), fp32 master partition and moments and an fp16 copy of the partition's gradients sharded over dp: "
               "4 + 14/d bytes per parameter with Adam; after the schedule every gradient goes through a " +
               std::to_string(p.deepspeed.reduce_bucket_size) + "-element fp16 bucket and is reduced to the rank that owns it "
               "(DeepSpeed v0.9.5, runtime/zero/stage_1_and_2.py, pipe/engine.py)";
      }
      if (p.deepspeed_pipeline()) {
        return "DeepSpeed's pipeline engine with its BF16_Optimizer: bf16 parameters and gradients, an fp32 buffer of every gradient "
               "(added into after each micro-batch, all-reduced in bf16 after the schedule), fp32 master partition and moments sharded "
               "over dp: 8 + 12/d bytes per parameter with Adam (DeepSpeed 36ad3119d, runtime/bf16_optimizer.py, pipe/engine.py)";
      }
      return "DeepSpeed ZeRO-3: per-parameter partitions, tensors up to " + std::to_string(p.deepspeed.param_persistence_threshold) +
             " elements kept whole, parameters gathered within " + std::to_string(p.deepspeed.max_reuse_distance) +
             " elements of reuse plus a " + std::to_string(p.deepspeed.prefetch_bucket_size) + "-element prefetch, a " +
             std::to_string(p.deepspeed.reduce_bucket_size) + "-element gradient bucket" +
             (p.cpu_offload ? "; the optimizer offloaded (offload_optimizer cpu): fp32 partitions and CPU Adam's moments on the host, "
                              "pageable, beside the 16-bit gradient partitions and an fp32 gradient buffer per " +
                                  std::to_string(p.deepspeed.sub_group_size) + "-element sub-group, " +
                                  (p.pin_memory ? "pinned at the allocator's powers of two" : "pageable (pin_memory false)")
                            : std::string()) +
             (p.deepspeed.offload_param ? "; the 16-bit partitions on the host too (offload_param cpu), one pinned buffer, fetched for every gather"
                                        : "") +
             " (DeepSpeed edaa722, runtime/zero)";
    case Runtime::colossalai: break;
  }
  const std::string states =
      p.kind == PluginKind::torch_fsdp
          // memory_model.cpp, add_fsdp_states: the flat shard is the optimizer's fp32 weight, its gradient fp32 too.
          ? "PyTorch FSDP (Zhao et al. 2023) under MixedPrecision: the sharded flat parameter stays fp32 (it is the optimizer's weight) and "
            "its gradient fp32, 4 + 4 + 8 bytes per parameter with Adam, the 16-bit copies gathered per unit (chunk_buffers)"
          : "ZeRO (Rajbhandari et al. 2020) §3.1: 2 + 2 + 12 bytes per parameter with Adam under mixed precision";
  return "ColossalAI's Booster plugins (Tessera's engine follows them); " + states + " (--runtime to change)";
}

std::vector<AssumptionLine> assumption_lines(const EstimateReport& r) {
  const Assumptions& a = r.request.assumptions;
  const auto& t = r.request.training;
  std::vector<AssumptionLine> lines;
  const bool torchtitan_eager = block_accounting(r.model.config, r.request.plugin, t) != BlockAccounting::profile;
  lines.push_back({"activation profile", std::string(enum_name(t.activation_profile)),
                   torchtitan_eager ? "fused attention (SDPA's flash kernel: no s² scores, an fp32 log-sum-exp per row and head) in torchtitan's "
                                      "eager block, which keeps what each PyTorch op saves (see execution)"
                                    : activation_profile_source(t.activation_profile)});
  if (runs_hugging_face_modules(t.activation_profile)) {
    lines.push_back({"transformers", to_string(t.transformers_version),
                     "the release running the model: the blocks as measured on " + to_string(kMeasuredTransformers) +
                         ", the logits, the loss and the attention mask as this release keeps them (transformers_version.h; --transformers-version)"});
  }
  lines.push_back({"model states", "runtime " + std::string(enum_name(r.request.plugin.runtime)),
                   model_states_source(r.request.plugin, t.precision)});
  if (const std::optional<AssumptionLine> line = execution_line(r.model.config, r.request.plugin, t)) lines.push_back(*line);
  if (t.recompute == RecomputeMode::op_selective) {
    lines.push_back({"recompute", "op_selective: " + op_policy_summary(r.model.config),
                     "torchtitan 01c79fd models/llama3/parallelize_llama.py (_save_list: every mm but the 2nd, 4th, ... of a block, SDPA); "
                     "PyTorch 006b3e6 Linear.cpp (a linear with a bias is addmm, neither saved nor counted)"});
  }
  if (t.recompute == RecomputeMode::full && t.recompute_num_layers > 0) {
    lines.push_back({"recompute", "full on the first " + std::to_string(t.recompute_num_layers) + " blocks of each model chunk; the others keep all they save",
                     "Megatron-LM core_v0.14.0 transformer_block.py (--recompute-method block); torchtitan's selective_ac_option n, every n-th "
                     "block, is the same count (activation_checkpoint.py, _apply_layer_sac)"});
  }
  if (is_fp8(t.precision)) {
    const RankMemory& tight = r.estimate.tightest();
    const std::vector<StageLayers> chunks =
        tight.layer_chunks.empty() ? std::vector<StageLayers>{{tight.first_layer, tight.last_layer - tight.first_layer + 1}} : tight.layer_chunks;
    const int64_t cache = fp8_state_bytes(r.model, chunks, r.request.layout.tp, r.request.plugin.fp8_param_gather);
    const double fp8_peak = r.gpu.peak_tflops.fp8, bf16_peak = r.gpu.peak_tflops.bf16;
    lines.push_back({"fp8", "blocks' GEMMs at " + format_number(fp8_peak) + " TFLOP/s (backward's split accumulator " +
                                format_number(kFp8SplitAccumulatorSlowdown) + "x slower), MFU on bf16's " + format_number(bf16_peak) +
                                "; GEMM inputs saved in FP8; " +
                                (r.request.plugin.fp8_param_gather ? std::string("FP8 weights as the parameters (--fp8-param-gather), scaling state ")
                                                                    : std::string("FP8 weight copies, transposes and scaling state ")) +
                                format_bytes(cache) + " on " + rank_range(tight) + " (in parameters)",
                     "Transformer Engine 0004dbd0 base.py set_fp8_weights, set_meta_tensor (amax history 1024), _2X_ACC_DGRAD/WGRAD, linear.py; "
                     "pytorch/ao#2377; GPU profile " + r.gpu.name});
  }
  if (const ParallelLayout& l = r.request.layout; l.dp_replicate > 1) {
    lines.push_back({"hybrid sharding", std::to_string(l.dp_replicate) + " replicas of " + std::to_string(l.shard_ranks()) +
                                            " ranks: model states sharded within a replica; gradients reduce-scattered there, each shard all-reduced across the replicas",
                     "PyTorch FSDP HYBRID_SHARD, FSDP2 2-D mesh (torchtitan data_parallel_replicate_degree), DeepSpeed MiCS, Megatron-Core "
                     "num_distributed_optimizer_instances"});
  }
  if (const int64_t cp = r.request.layout.cp; cp > 1) {
    const int64_t kv_bytes = 2 * t.micro_batch_size * r.request.local_seq_len() * r.model.config.kv_width() / r.request.layout.tp *
                             compute_bytes(t.precision);
    lines.push_back({"context parallelism", "cp " + std::to_string(cp) + ": each rank holds " + std::to_string(r.request.local_seq_len()) + " of the " +
                                                std::to_string(t.seq_len) + " tokens of every sequence; ring attention passes " + format_bytes(kv_bytes) +
                                                " of keys and values " + std::to_string(cp - 1) + " times per layer and micro-batch (twice that in backward), "
                                                "overlapped with attention",
                     "Megatron-Core context_parallel_size, Transformer Engine ring attention (AttnFuncWithCPAndKVP2P); ranks ordered tp-cp-dp-pp"});
  }
  lines.push_back({"CUDA context", format_bytes(r.estimate.cuda_context_bytes),
                   a.cuda_context_bytes >= 0 ? "--cuda-context-mib" : "GPU profile " + r.gpu.name + " (--cuda-context-mib to override)"});
  lines.push_back({"allocator reserve", std::to_string(static_cast<int>(a.allocator_reserve_fraction * 100 + 0.5)) + "% of the other device bytes",
                   "caching-allocator fragmentation (--fragmentation to override)"});
  lines.push_back({"NCCL buffers", format_bytes(a.nccl_bytes_per_group) + " per communicator with more than one rank",
                   "NCCL_BUFFSIZE 4 MiB per channel and direction, 16 channels (--nccl-mib to override)"});
  lines.push_back({"cuBLAS workspace", format_bytes(a.cublas_workspace_bytes), "cuBLAS docs, cublasSetWorkspace: 32 MiB on Hopper (--cublas-workspace-mib)"});
  if (const int64_t headroom = a.memory_headroom(r.gpu.memory_bytes); headroom > 0) {
    lines.push_back({"memory headroom", format_bytes(headroom) + " left free on every GPU", "--memory-headroom"});
  }
  if (r.request.plugin.kind == PluginKind::torch_ddp && !r.request.plugin.gradient_as_bucket_view) {
    lines.push_back({"DDP buckets", "a second copy of all gradients (" + format_bytes(r.request.plugin.bucket_bytes) + " buckets)",
                     "PyTorch DistributedDataParallel, gradient_as_bucket_view=False (--gradient-as-bucket-view removes it)"});
  }
  if (r.request.plugin.kind == PluginKind::torch_ddp && r.request.plugin.rank_order_reduction && r.request.layout.data_ranks() > 1) {
    lines.push_back({"rank-order reduction", "one bucket staged from every rank while it is summed (" + format_bytes(r.request.plugin.bucket_bytes) + " buckets)",
                     "Tessera's engine on GPUs (--rank-order-reduction)"});
  }
  if (r.estimate.gemini) {
    const GeminiSummary& g = *r.estimate.gemini;
    const auto own = std::count_if(g.chunk_capacity.begin(), g.chunk_capacity.end(), [&](int64_t c) { return c != g.chunk_size; });
    const std::string own_text = own > 0 ? " (" + std::to_string(own) + " of them a larger tensor's own)" : "";
    lines.push_back({"Gemini chunks", std::to_string(g.num_chunks) + " × " + std::to_string(g.chunk_size) + " elements" + own_text + ", " +
                                          format_count(g.waste_elements) + " padding, up to " +
                                          std::to_string(g.peak_gathered_chunks) + " gathered per layer",
                     "ColossalAI v0.5.0 search_chunk_configuration (search_range_m 32, min_chunk_size_m 32, sizes above mean + 3 sd left out)"});
    char fractions[128];
    std::snprintf(fractions, sizeof fractions, "shard_param_frac %.2f, offload_optim_frac %.2f, offload_param_frac %.2f",
                  g.shard_param_frac, g.offload_optim_frac, g.offload_param_frac);
    std::string placement = std::string(enum_name(r.request.plugin.gemini.placement_policy)) + ": " + fractions;
    std::string source = "ColossalAI GeminiPlugin placement_policy";
    if (r.request.plugin.gemini.placement_policy == GeminiPlacement::static_placement) {
      char asked[96];
      std::snprintf(asked, sizeof asked, " (asked %.3g: the fp32 states of %lld of %lld chunks)", r.request.plugin.gemini.offload_optim_frac,
                    static_cast<long long>(g.optimizer_chunks_on_host), static_cast<long long>(g.num_chunks));
      placement += asked;
      const std::vector<bool> kept = gathered_after_forward(g.chunk_set());
      char parameters[224];
      std::snprintf(parameters, sizeof parameters, "; the 16-bit shards of %lld chunks on the host (asked %.3g); %lld chunks gathered from forward into backward (asked %.3g)",
                    static_cast<long long>(std::count(g.parameters_on_host.begin(), g.parameters_on_host.end(), true)),
                    r.request.plugin.gemini.offload_param_frac, static_cast<long long>(std::count(kept.begin(), kept.end(), true)),
                    r.request.plugin.gemini.shard_param_frac);
      placement += parameters;
      source = "ColossalAI v0.5.0 StaticPlacementPolicy: whole chunks, against a total that counts a chunk once per tensor";
    }
    lines.push_back({"Gemini placement", placement, source});
    if (!is_tessera_engine(r.request.training.activation_profile)) {
      const bool pinned = colossalai_pins_every_chunk(r.request.plugin, r.request.training);
      lines.push_back({"Gemini host copies",
                       pinned ? "a pinned host copy of every chunk's 16-bit, gradient and fp32 shards, at the pinned allocator's powers of two"
                              : "only the offloaded chunks' shards, pageable (pin_memory off)",
                       "ColossalAI v0.5.0 GeminiPlugin pin_memory (set by enable_async_reduce=True, its default), chunk.py close_chunk"});
    }
  }
  return lines;
}

}  // namespace tessera::planner
