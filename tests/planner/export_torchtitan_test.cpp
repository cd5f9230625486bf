// `tessera export --to torchtitan`: the job config carries the plan's FSDP2
// layout, batch, recompute and precision under torchtitan 0.2.2's keys, names
// the llama3 flavor of the model's shape, and refuses what torchtitan would not
// run as planned. (tools/ecosystem/torchtitan_config.py reads the files with
// torchtitan's own JobConfig, ConfigManager and ParallelDims.)
#include <gtest/gtest.h>

#include <string>

#include "planned.h"
#include "tessera/planner/export.h"

namespace tessera::planner {
namespace {

std::string refusal(const Planned& planned, size_t index) {
  auto text = export_plan(planned.file, index, ExportTarget::torchtitan);
  EXPECT_FALSE(text.ok());
  return text.ok() ? std::string() : text.error().message;
}

Planned torchtitan_llama_3_8b(const std::function<void(PlanRequest&)>& restrict = [](PlanRequest&) {}, int64_t gpus = 16) {
  return plan_for("llama-3-8b", [&](PlanRequest& r) {
    r.runtime = Runtime::torchtitan;
    r.seq_len = 8192;
    restrict(r);
  }, gpus);
}

TEST(ExportTorchtitan, TheBestPlanAsAJobConfig) {
  const Planned planned = torchtitan_llama_3_8b();
  const EstimateRequest& r = planned.file.plans[0];
  const std::string config = exported(export_torchtitan, planned, 0);
  // 64 sequences a step: micro-batch × micro-batches × 16 data-parallel ranks, as train.py divides them.
  ASSERT_EQ(r.training.micro_batch_size * r.training.num_micro_batches * 16, 64);
  expect_lines(config, {"[model]\nname = \"llama3\"\nflavor = \"8B\"\nhf_assets_path = \"./assets/hf/Llama-3.1-8B\"\n",
                        "local_batch_size = " + std::to_string(r.training.micro_batch_size) + "  # the micro-batch\n",
                        "global_batch_size = 64  # " + std::to_string(r.training.num_micro_batches) + " micro-batch",
                        "seq_len = 8192\n", "mixed_precision_param = \"bfloat16\"\n", "data_parallel_replicate_degree = 1\n",
                        "data_parallel_shard_degree = 16\n", "context_parallel_degree = 1\n", "tensor_parallel_degree = 1\n",
                        "[optimizer]\nname = \"AdamW\"\n", "log_freq = 5", "[checkpoint]\nenable = false\n",
                        "--repo_id meta-llama/Llama-3.1-8B --assets tokenizer", "on every node (or a shared file system)",
                        "# torchtitan's flavor applies Llama 3.1's RoPE scaling (factor 8), which llama-3-8b's config does not; memory and speed are the same.\n",
                        "torchrun --nnodes 2 --nproc-per-node 8 \\\n#     --rdzv-backend c10d --rdzv-endpoint $HOST:29500 --local-ranks-filter 0 "
                        "-m torchtitan.train --job.config_file THIS_FILE 2>&1 | tee LOG\n"});
  EXPECT_EQ(config.find("enable_cpu_offload"), std::string::npos);
}

// Resharding, op-level checkpointing, offload, hybrid sharding, context
// parallelism and compilation each reach their key.
TEST(ExportTorchtitan, EverySettingReachesItsKey) {
  const Planned planned = torchtitan_llama_3_8b([](PlanRequest& r) {
    r.recompute = {RecomputeMode::op_selective};
    r.dp_replicate = 2;
    r.torch_compile = true;
    r.optimizer = OptimizerKind::adam;
  });
  const size_t never = find_plan(planned, [](const EstimateRequest& r) { return r.plugin.fsdp_strategy == FsdpStrategy::shard_grad_op; });
  expect_lines(exported(export_torchtitan, planned, never), {"fsdp_reshard_after_forward = \"never\"\n", "mode = \"selective\"\nselective_ac_option = \"op\"\n",
                                           "data_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 8\n",
                                           "[compile]\nenable = true\n", "name = \"Adam\"\n"});
  const size_t full_shard = find_plan(planned, [](const EstimateRequest& r) { return r.plugin.fsdp_strategy == FsdpStrategy::full_shard; });
  expect_lines(exported(export_torchtitan, planned, full_shard), {"fsdp_reshard_after_forward = \"default\"\n"});

  const Planned offloaded = torchtitan_llama_3_8b([](PlanRequest& r) { r.recompute = {RecomputeMode::full}; }, 8);
  const size_t offload = find_plan(offloaded, [](const EstimateRequest& r) { return r.plugin.cpu_offload; });
  expect_lines(exported(export_torchtitan, offloaded, offload), {"enable_cpu_offload = true", "mode = \"full\"\n", "NGPU=8 CONFIG_FILE=THIS_FILE ./run_train.sh"});

  const Planned ring = torchtitan_llama_3_8b([](PlanRequest& r) {
    r.seq_len = 32768;
    r.cp = 2;
    r.global_batch_size = 16;
  });
  // 16 GPUs, cp 2: 8 data-parallel ranks, each sequence over 2; torchtitan's rotation is said to differ from the plan's.
  expect_lines(exported(export_torchtitan, ring, 0), {"context_parallel_degree = 2\n", "data_parallel_shard_degree = 8\n", "seq_len = 32768\n",
                                                      "# torchtitan gathers keys and values among the cp ranks with an all-gather"});
  // fp32: the parameters gathered in float32.
  const Planned fp32 = torchtitan_llama_3_8b([](PlanRequest& r) {
    r.precision = Precision::fp32;
    r.recompute = {RecomputeMode::full};
  });
  expect_lines(exported(export_torchtitan, fp32, 0), {"mixed_precision_param = \"float32\"\n"});
}

// torchtitan before April 2025 compiled the blocks only: such a plan, through its
// plan file, says so in [compile]. Its Triton RMSNorm is gone from the exported
// release, so a plan that counts it is refused.
TEST(ExportTorchtitan, CompiledBlocksOnlyAndTheRemovedTritonNorm) {
  const Planned model_only = torchtitan_llama_3_8b([](PlanRequest& r) {
    r.torch_compile = true;
    r.compile_model_only = true;
  });
  EXPECT_TRUE(model_only.file.plans[0].plugin.compile_model_only);  // read back from the plan document
  expect_lines(exported(export_torchtitan, model_only, 0), {"[compile]\nenable = true\ncomponents = [\"model\"]\n"});
  const Planned triton = torchtitan_llama_3_8b([](PlanRequest& r) { r.fused_rmsnorm = true; });
  EXPECT_TRUE(triton.file.plans[0].plugin.fused_rmsnorm);
  EXPECT_EQ(refusal(triton, 0), "--to torchtitan: the plan counts torchtitan's Triton RMSNorm (--fused-rmsnorm), which torchtitan removed in February "
                                "2025 (37c4b818); the exported release runs nn.RMSNorm, so plan again without --fused-rmsnorm");
}

TEST(ExportTorchtitan, TheFlavorsFfnWidthIsTorchtitansRounding) {
  // Llama 3 70B: 2/3 of 4 × 8192 is 21,845, × 1.3 is 28,398, rounded up to a multiple of 4,096: 28,672.
  const Planned planned = plan_for("llama-3-70b", [](PlanRequest& r) {
    r.runtime = Runtime::torchtitan;
    r.recompute = {RecomputeMode::full};
    r.seq_len = 4096;
    r.global_batch_size = 64;
  }, 64);
  EXPECT_EQ(planned.model.config.intermediate_size, 28672);
  expect_lines(exported(export_torchtitan, planned, 0), {"flavor = \"70B\"\n", "hf_assets_path = \"./assets/hf/Llama-3.1-70B\"\n"});
}

TEST(ExportTorchtitan, RefusesWhatTorchtitanWouldNotRunAsPlanned) {
  // Another runtime's plan.
  const Planned colossalai = plan_for("llama-3-8b", [](PlanRequest& r) { r.plugins = {PluginKind::torch_fsdp}; });
  EXPECT_EQ(refusal(colossalai, 0), "--to torchtitan: the plan counts colossalai's model states, not torchtitan's FSDP2; plan again with --runtime torchtitan");
  // Llama 2 has Llama's block but not a flavor's shape: it is named, field by field.
  const Planned llama2 = plan_for("llama-2-7b", [](PlanRequest& r) { r.runtime = Runtime::torchtitan; });
  EXPECT_EQ(refusal(llama2, 0), "--to torchtitan: llama-2-7b is not torchtitan's llama3 flavor 8B: its number of key/value heads is 32 where the "
                                "flavor's is 8; torchtitan builds its flavors only, so plan again with --runtime colossalai and export that --to colossalai");
  const Planned qwen = plan_for("qwen2-0.5b", [](PlanRequest& r) { r.runtime = Runtime::torchtitan; });
  EXPECT_EQ(refusal(qwen, 0), "--to torchtitan: qwen2-0.5b has biases on its linear layers, which torchtitan's llama3 model does not build; plan again "
                              "with --runtime colossalai and export that --to colossalai");
  const Planned tiny = plan_for("tiny-llama", [](PlanRequest& r) { r.runtime = Runtime::torchtitan; });
  EXPECT_EQ(refusal(tiny, 0), "--to torchtitan: tiny-llama (hidden size 128) is none of torchtitan's llama3 flavors (8B, 70B, 405B: Llama 3's shapes), "
                              "the models it builds; plan again with --runtime colossalai and export that --to colossalai");
}

TEST(ExportTorchtitan, RefusesFp8SgdAndOtherActivationProfiles) {
  // FP8 as the planner counts it is Transformer Engine's under Megatron-Core: the search refuses it here (validate_runtime.cpp).
  EXPECT_EQ(search_refusal("llama-3-8b", [](PlanRequest& r) {
              r.runtime = Runtime::torchtitan;
              r.precision = Precision::fp8;
            }, 16),
            "--precision fp8 counts Transformer Engine's FP8 layers as Megatron-Core runs them: add --runtime megatron "
            "(torchtitan's own FP8 is not modelled; use --precision bf16 there)");
  const Planned sgd = torchtitan_llama_3_8b([](PlanRequest& r) { r.optimizer = OptimizerKind::sgd_momentum; });
  EXPECT_EQ(refusal(sgd, 0), "--to torchtitan: the plan uses sgd_momentum, and torchtitan's optimizers are Adam and AdamW; plan again with --optimizer adamw");
  const Planned unfused = torchtitan_llama_3_8b([](PlanRequest& r) {
    r.activation_profile = ActivationProfile::megatron;
    r.recompute = {RecomputeMode::full};
  });
  EXPECT_EQ(refusal(unfused, 0),
            "--to torchtitan: the plan counts the activations of the megatron profile, not torchtitan's SDPA; plan again with --activation-profile flash");
}

}  // namespace
}  // namespace tessera::planner
