// `tessera export --to megatron`: the launch script carries the plan's layout,
// states, recompute and precision in Megatron-LM's argument names, and refuses
// what Megatron-Core would not run as planned. (tools/ecosystem/megatron_args.py
// runs the scripts through Megatron-LM's own parser.)
#include <gtest/gtest.h>

#include <string>

#include "planned.h"
#include "tessera/planner/export.h"

namespace tessera::planner {
namespace {

TEST(ExportMegatron, TensorPipelineAndDistributedOptimizerOfAnInterleavedPlan) {
  const Planned planned = megatron_llama_70b_tp4_pp4(PipelineSchedule::interleaved);
  const size_t index = find_plan(planned, [](const EstimateRequest& r) { return r.plugin.effective_zero_stage() == 1; });
  const EstimateRequest& r = planned.file.plans[index];
  const std::string script = exported(export_megatron, planned, index);
  expect_lines(script, {"export CUDA_DEVICE_MAX_CONNECTIONS=1\n", "  --tensor-model-parallel-size 4\n", "  --pipeline-model-parallel-size 4\n",
                        "  --sequence-parallel\n", "  --use-distributed-optimizer  # ZeRO stage 1\n", "  --group-query-attention\n",
                        "  --num-query-groups 8\n", "  --normalization RMSNorm\n", "  --swiglu\n", "  --disable-bias-linear\n",
                        "  --untie-embeddings-and-output-weights\n", "--nproc-per-node 8 --nnodes \"${NNODES:-8}\"", "  --vocab-size 31999"});
  expect_lines(script, {("  --num-virtual-stages-per-pipeline-rank " + std::to_string(r.plugin.num_model_chunks)).c_str(),
                        ("  --micro-batch-size " + std::to_string(r.training.micro_batch_size) + "\n").c_str(),
                        "  --global-batch-size 256\n"});
  // 32,000 rows are a multiple of tp 4 but not of Megatron's 128 × 4, which would pad them to 32,256.
  expect_lines(script, {"  --make-vocab-size-divisible-by 1"});
  // The interleaved sends run under the passes, Megatron-LM's default: nothing to write.
  EXPECT_EQ(script.find("overlap-p2p"), std::string::npos);
  Planned waiting = planned;
  waiting.file.plans[index].plugin.no_overlap_p2p_comm = true;
  expect_lines(exported(export_megatron, waiting, index), {"  --no-overlap-p2p-communication  # pipeline sends wait, as planned\n"});
  EXPECT_EQ(script.find("gradient-accumulation-fusion"), std::string::npos) << "Megatron-LM fuses by default";
  waiting.file.plans[index].plugin.no_gradient_accumulation_fusion = true;
  expect_lines(exported(export_megatron, waiting, index),
               {"  --no-gradient-accumulation-fusion  # gradients added to the main-gradient buffer on their own, as planned\n"});
}

// Llama 3 8B's 32 layers on 3 stages: Megatron's layout string, one stage per
// virtual stage with the embedding first and the loss last.
TEST(ExportMegatron, AnUnevenSplitIsMegatronsPipelineLayout) {
  const Planned planned = plan_for("llama-3-8b", [](PlanRequest& r) {
    r.runtime = Runtime::megatron;
    r.pp = 3;
    r.recompute = {RecomputeMode::full};
    r.global_batch_size = 48;
  }, 24);
  const std::string script = exported(export_megatron, planned, 0);
  EXPECT_EQ(script.find("--make-vocab-size-divisible-by"), std::string::npos) << "128,256 is a multiple of 128 × tp";
  expect_lines(script, {"  --pipeline-model-parallel-layout 'Et*11|t*11|t*10L'", "  --recompute-granularity full\n", "  --recompute-method uniform\n",
                        "  --recompute-num-layers 1  # every block\n", "  --rotary-base 500000\n"});
}

// GPT-2's learned positions, tanh GELU, biases and tied head; its 50,257-entry
// vocabulary padded to a multiple of tp as the plan counts it.
TEST(ExportMegatron, Gpt2KeepsItsArchitectureAndThePlansVocabularyPadding) {
  const Planned planned = plan_for("gpt2-large", [](PlanRequest& r) {
    r.runtime = Runtime::megatron;
    r.tp = 2;
    r.activation_profile = ActivationProfile::megatron;
  });
  const std::string script = exported(export_megatron, planned, 0);
  expect_lines(script, {"  --position-embedding-type learned_absolute\n", "  --max-position-embeddings 1024\n", "  --openai-gelu",
                        "  --normalization LayerNorm\n", "  --attention-dropout 0.1\n", "  --hidden-dropout 0.1\n",
                        "  --attention-backend unfused", "  --vocab-size 50256", "  --make-vocab-size-divisible-by 1"});
  for (const char* absent : {"--swiglu", "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--group-query-attention"}) {
    EXPECT_EQ(script.find(absent), std::string::npos) << absent;
  }
}

TEST(ExportMegatron, Fp8AndContextParallelism) {
  const Planned planned = plan_for("qwen2-7b", [](PlanRequest& r) {
    r.runtime = Runtime::megatron;
    r.cp = 2;
    r.precision = Precision::fp8;
    r.seq_len = 16384;
    r.global_batch_size = 32;
  }, 16);
  const std::string script = exported(export_megatron, planned, 0);
  expect_lines(script, {"  --context-parallel-size 2\n", "  --bf16\n", "  --fp8-format hybrid", "  --fp8-amax-history-len 1024",
                        "  --add-qkv-bias\n", "  --disable-bias-linear\n", "  --rotary-base 1000000\n", "export CUDA_DEVICE_MAX_CONNECTIONS=1\n"});
  for (const char* absent : {"--grad-reduce-in-bf16", "--fp8-param-gather"}) EXPECT_EQ(script.find(absent), std::string::npos) << absent;
  // NeMo's bf16 gradient synchronization and FP8 weights, as a plan carries them.
  Planned nemo_like = planned;
  EstimateRequest& plan = nemo_like.file.plans[0];
  plan.plugin.zero_stage = 1;
  plan.plugin.grad_reduce_in_bf16 = true;
  plan.plugin.fp8_param_gather = true;
  expect_lines(exported(export_megatron, nemo_like, 0), {"  --use-distributed-optimizer", "  --grad-reduce-in-bf16  # the main-gradient buffer in bf16, as planned\n",
                                                         "  --fp8-param-gather  # the weights kept and all-gathered in FP8, as planned\n"});
}

// Hybrid sharding of the distributed optimizer: Megatron's optimizer instances.
TEST(ExportMegatron, ReplicasAreDistributedOptimizerInstances) {
  const Planned planned = plan_for("llama-2-7b", [](PlanRequest& r) {
    r.runtime = Runtime::megatron;
    r.dp_replicate = 2;
    r.zero_stage = 1;
  }, 16);
  expect_lines(exported(export_megatron, planned, 0), {"  --use-distributed-optimizer", "  --num-distributed-optimizer-instances 2  # hybrid sharding"});
}

TEST(ExportMegatron, RefusesWhatMegatronCoreWouldNotRunAsPlanned) {
  const Planned colossalai = plan_for("llama-2-7b", [](PlanRequest& r) { r.tp = 2; });
  auto refused = export_megatron(colossalai.file, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::unsupported);
  EXPECT_NE(refused.error().message.find("--to megatron: the plan counts colossalai's model states, not Megatron-Core's; plan again with --runtime megatron"),
            std::string::npos)
      << refused.error().message;
  // A model Megatron-Core does not build is not a --runtime megatron plan: the search refuses it (validate_runtime.cpp).
  EXPECT_EQ(search_refusal("bloom-176b", [](PlanRequest& r) { r.runtime = Runtime::megatron; }, 64),
            "--runtime megatron: bloom-176b has a LayerNorm after the embedding (BLOOM's word_embeddings_layernorm), which "
            "Megatron-Core's GPT model does not build; plan it under --runtime colossalai");
  // Megatron overlaps the parameter all-gather only with the gradients' reduction under backward.
  Planned after_backward = plan_for("llama-2-7b", [](PlanRequest& r) {
    r.runtime = Runtime::megatron;
    r.zero_stage = 1;
  }, 16);
  after_backward.file.plans[0].plugin.overlap_param_gather = true;
  after_backward.file.plans[0].plugin.grad_reduce_after_backward = true;
  refused = export_megatron(after_backward.file, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("which Megatron requires of --overlap-param-gather"), std::string::npos) << refused.error().message;
  // Megatron-LM's scatter/gather of pipeline sends went with Megatron-Core.
  Planned scattered = megatron_llama_70b_tp4_pp4(PipelineSchedule::one_f_one_b);
  scattered.file.plans[0].plugin.pipeline_scatter_gather = true;
  scattered.file.plans[0].layout.sequence_parallel = false;  // which the scatter/gather needs
  scattered.file.plans[0].plugin.tp_comm_overlap = false;
  refused = export_megatron(scattered.file, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("Megatron-LM dropped with Megatron-Core"), std::string::npos) << refused.error().message;
  // Without a tensor or context split there is nothing for CUDA_DEVICE_MAX_CONNECTIONS to order.
  const Planned plain = plan_for("llama-2-7b", [](PlanRequest& r) {
    r.runtime = Runtime::megatron;
    r.tp = 1;
    r.pp = 1;
  });
  EXPECT_EQ(exported(export_megatron, plain, 0).find("CUDA_DEVICE_MAX_CONNECTIONS"), std::string::npos);
}

}  // namespace
}  // namespace tessera::planner
