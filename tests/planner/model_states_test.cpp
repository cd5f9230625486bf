// Model states per runtime (--runtime megatron | torchtitan | deepspeed), each
// byte count worked out by hand from the formula cited in model_states_*.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_models.h"
#include "tessera/planner/pinned_host_blocks.h"
#include "tessera/planner/report.h"

namespace tessera::planner {
namespace {

using testing::estimate_or_fail;
using testing::model_state_bytes;
using testing::shipped_gpu;
using testing::shipped_model;
using Cat = MemoryCategory;

EstimateRequest runtime_request(Runtime runtime, PluginKind plugin, int64_t dp) {
  EstimateRequest r;
  r.plugin.runtime = runtime;
  r.plugin.kind = plugin;
  r.layout.dp = dp;
  r.training.seq_len = 1024;
  return r;
}

RankMemory only_row(const Model& model, const EstimateRequest& r) {
  const MemoryEstimate e = estimate_or_fail(model, shipped_gpu("h100-80g"), r);
  EXPECT_EQ(e.ranks.size(), 1u);
  return e.ranks.front();
}

int64_t device(const RankMemory& row, Cat c) { return row.bytes[c].device; }

// estimate_memory's error for GPT-2 on an H100, or "" where it accepts the request.
std::string error(const EstimateRequest& r) {
  auto e = estimate_memory(shipped_model("gpt2"), shipped_gpu("h100-80g"), r);
  return e.ok() ? std::string() : e.error().message;
}

// Llama 3 8B: 8,030,261,248 parameters, every tensor a multiple of 64
// elements and the total a multiple of 128, so Megatron's buffer has no padding.
constexpr int64_t kLlama3_8b = 8030261248;

TEST(MegatronStates, EighteenBytesPerParameterUnderBf16WithAdam) {
  const Model model = shipped_model("llama-3-8b");
  ASSERT_EQ(model.parameter_count, kLlama3_8b);
  const RankMemory row = only_row(model, runtime_request(Runtime::megatron, PluginKind::hybrid_parallel, 8));
  EXPECT_EQ(device(row, Cat::parameters), 2 * kLlama3_8b);
  EXPECT_EQ(device(row, Cat::gradients), 4 * kLlama3_8b);  // the fp32 main-gradient buffer
  EXPECT_EQ(device(row, Cat::master_weights), 4 * kLlama3_8b);
  EXPECT_EQ(device(row, Cat::optimizer_states), 8 * kLlama3_8b);
  EXPECT_EQ(model_state_bytes(row), 18 * kLlama3_8b);  // 144,544,702,464 B
  EXPECT_EQ(device(row, Cat::comm_buffers), 0);        // DDP reduces the buffer in place
}

TEST(MegatronStates, DistributedOptimizerIsSixPlusTwelveOverD) {
  const Model model = shipped_model("llama-3-8b");
  EstimateRequest r = runtime_request(Runtime::megatron, PluginKind::hybrid_parallel, 8);
  r.plugin.zero_stage = 1;
  const RankMemory row = only_row(model, r);
  EXPECT_EQ(model_state_bytes(row), 6 * kLlama3_8b + 12 * kLlama3_8b / 8);  // 7.5 B/param: 60,226,959,360 B
  r.training.precision = Precision::fp16;  // 4 + 16/d
  EXPECT_EQ(model_state_bytes(only_row(model, r)), 4 * kLlama3_8b + 16 * kLlama3_8b / 8);
  r.training.precision = Precision::fp32;  // 8 + 8/d
  EXPECT_EQ(model_state_bytes(only_row(model, r)), 8 * kLlama3_8b + 8 * kLlama3_8b / 8);
  r.plugin.zero_stage = 0;
  r.training.precision = Precision::fp16;  // 20
  EXPECT_EQ(model_state_bytes(only_row(model, r)), 20 * kLlama3_8b);
}

// --grad-reduce-in-bf16: the main-gradient buffer in bf16, and the distributed
// optimizer's fp32 copy of its shard: 2 + 2 + (4 + 4 + 8)/d, fp16's figures.
TEST(MegatronStates, GradReduceInBf16HalvesTheBufferAndCastsTheShard) {
  const Model model = shipped_model("llama-3-8b");
  EstimateRequest r = runtime_request(Runtime::megatron, PluginKind::hybrid_parallel, 8);
  r.plugin.zero_stage = 1;
  r.plugin.grad_reduce_in_bf16 = true;
  const RankMemory row = only_row(model, r);
  EXPECT_EQ(device(row, Cat::gradients), 2 * kLlama3_8b + 4 * kLlama3_8b / 8);
  EXPECT_EQ(model_state_bytes(row), 4 * kLlama3_8b + 16 * kLlama3_8b / 8);  // 6 B/param: 48,181,567,488 B
  r.plugin.zero_stage = 0;
  EXPECT_EQ(model_state_bytes(only_row(model, r)), 20 * kLlama3_8b);
  for (Precision refused : {Precision::fp16, Precision::fp32}) {
    r.training.precision = refused;
    EXPECT_EQ(error(r), "--grad-reduce-in-bf16 keeps Megatron's main-gradient buffer in bf16 instead of fp32: it needs --runtime megatron and "
                        "--precision bf16 or fp8");
  }
  r.training.precision = Precision::bf16;
  r.plugin.runtime = Runtime::colossalai;
  EXPECT_NE(error(r).find("needs --runtime megatron"), std::string::npos);
}

// --tp-comm-overlap: Transformer Engine's 10 userbuffers of (s · b / cp, h),
// bf16, the 6 all-gather ones in one byte under FP8 (model_states_megatron.cpp).
TEST(MegatronStates, TpCommOverlapHoldsTenUserbuffersOfTheMicroBatch) {
  const Model model = shipped_model("llama-3-8b");  // h = 4096
  EstimateRequest r = runtime_request(Runtime::megatron, PluginKind::hybrid_parallel, 2);
  r.layout.tp = 4;
  r.layout.sequence_parallel = true;
  r.training.micro_batch_size = 2;
  const int64_t without = device(only_row(model, r), Cat::comm_buffers);
  r.plugin.tp_comm_overlap = true;
  const int64_t elements = int64_t{2} * 1024 * 4096;
  EXPECT_EQ(device(only_row(model, r), Cat::comm_buffers) - without, 10 * 2 * elements);  // 167,772,160 B
  r.training.precision = Precision::fp8;
  r.plugin.tp_comm_overlap = false;
  const int64_t fp8_without = device(only_row(model, r), Cat::comm_buffers);
  r.plugin.tp_comm_overlap = true;
  EXPECT_EQ(device(only_row(model, r), Cat::comm_buffers) - fp8_without, (6 * 1 + 4 * 2) * elements);
}

TEST(MegatronStates, BucketEndPadsToLcmOfDpAnd128) {
  // GPT-2 (124,439,808 parameters, every tensor a multiple of 64) at dp 5:
  // lcm(5, 128) = 640, so the buffer pads to 194,438 · 640 = 124,440,320
  // elements and each rank's shard is 24,888,064.
  const Model model = shipped_model("gpt2");
  ASSERT_EQ(model.parameter_count, 124439808);
  EstimateRequest r = runtime_request(Runtime::megatron, PluginKind::hybrid_parallel, 5);
  r.plugin.zero_stage = 1;
  const RankMemory row = only_row(model, r);
  EXPECT_EQ(device(row, Cat::parameters), 2 * 124440320);
  EXPECT_EQ(device(row, Cat::gradients), int64_t{4} * 124440320);
  EXPECT_EQ(device(row, Cat::master_weights), 4 * 24888064);
  EXPECT_EQ(device(row, Cat::optimizer_states), 8 * 24888064);
}

TEST(Fsdp2States, PerParameterDim0ShardsTwoUnitsGatheredFp32Reduce) {
  // GPT-2 at dp 8: only wte's 50,257 rows do not divide; it pads to 50,264
  // rows, 7 · 768 = 5,376 elements, so a rank's shard is (124,439,808 + 5,376) / 8
  // = 15,555,648 elements of fp32 weight, fp32 gradient and 8 bytes of Adam.
  const Model model = shipped_model("gpt2");
  const RankMemory row = only_row(model, runtime_request(Runtime::torchtitan, PluginKind::torch_fsdp, 8));
  EXPECT_EQ(device(row, Cat::parameters), 4 * 15555648);
  EXPECT_EQ(device(row, Cat::gradients), 4 * 15555648);
  EXPECT_EQ(device(row, Cat::master_weights), 0);
  EXPECT_EQ(device(row, Cat::optimizer_states), 8 * 15555648);
  // Tied: one unit of wte, wpe and ln_f (39,385,344 elements, 39,390,720 padded)
  // gathered throughout, beside two 7,087,872-element blocks, in bf16.
  EXPECT_EQ(device(row, Cat::chunk_buffers), 2 * (39390720 + 2 * 7087872));
  // The tied unit reduces last: its bf16 gradients and its fp32 reduce-scatter input.
  EXPECT_EQ(device(row, Cat::comm_buffers), 2 * 39385344 + int64_t{4} * 39390720);
}

TEST(Fsdp2States, UntiedHeadUnitAndBlockPrefetched) {
  // Llama 3 8B at dp 8 (every dim-0 divides): the norm-and-head unit
  // (4,096 + 128,256 · 4,096 = 525,340,672 elements) gathered with the last
  // block (218,112,000), bf16; its bf16 gradients and fp32 reduce-scatter input.
  const Model model = shipped_model("llama-3-8b");
  const RankMemory row = only_row(model, runtime_request(Runtime::torchtitan, PluginKind::torch_fsdp, 8));
  EXPECT_EQ(model_state_bytes(row), 16 * kLlama3_8b / 8);
  EXPECT_EQ(device(row, Cat::chunk_buffers), int64_t{2} * (525340672 + 218112000));
  EXPECT_EQ(device(row, Cat::comm_buffers), int64_t{6} * 525340672);
}

// torchtitan's eager cross entropy (components/loss.py): forward holds the
// model's bf16 logits, their .float() copy and log_softmax's fp32 output (10
// bytes a logit); backward's start, after `del pred`, three fp32 tensors (12
// bytes), in bf16 and fp32 alike, where the flash profile counts the one fp32
// copy. A compiled loss is left to the profile; compiled blocks beside an eager
// loss (--compile-model-only) hold the eager loss's.
TEST(Fsdp2States, TorchtitansEagerLossHoldsThreeFp32TensorsOfTheLogits) {
  const Model model = shipped_model("llama-3-8b");
  const auto logits = [&](Precision precision, bool compiled, bool model_only = false) {
    EstimateRequest r = runtime_request(Runtime::torchtitan, PluginKind::torch_fsdp, 8);
    r.training.precision = precision;
    r.training.torch_compile = compiled;
    r.plugin.compile_model_only = model_only;
    return device(only_row(model, r), Cat::logits);
  };
  const int64_t logit_count = int64_t{1024} * 128256;  // a micro-batch of 1 × 1024 tokens
  EXPECT_EQ(logits(Precision::bf16, true), 4 * logit_count);
  EXPECT_EQ(logits(Precision::bf16, true, true), 12 * logit_count);
  EXPECT_EQ(logits(Precision::bf16, false), 12 * logit_count);
  EXPECT_EQ(logits(Precision::fp32, false), 12 * logit_count);
}

TEST(DeepSpeedZero3States, PersistentTensorsStayWholeAndSmallModelsStayGathered) {
  // GPT-2 at dp 8: every tensor divides by 8, so the partitions are 15,554,976
  // elements. Tensors of at most 100,000 elements persist: the 50 norm weights
  // and biases (768 each) and each block's four linear biases (2,304 + 768 +
  // 3,072 + 768), 121,344 elements whole on every rank.
  const Model model = shipped_model("gpt2");
  EstimateRequest r = runtime_request(Runtime::deepspeed, PluginKind::low_level_zero, 8);
  const RankMemory row = only_row(model, r);
  EXPECT_EQ(device(row, Cat::parameters), 2 * (15554976 + 121344));
  EXPECT_EQ(device(row, Cat::gradients), 2 * 15554976);
  EXPECT_EQ(device(row, Cat::master_weights), 4 * 15554976);
  EXPECT_EQ(device(row, Cat::optimizer_states), 8 * 15554976);
  // The whole model is within stage3_max_reuse_distance (1e9) of its reuse, so
  // nothing is released before backward: every non-persistent tensor gathered.
  EXPECT_EQ(device(row, Cat::chunk_buffers), 2 * (124439808 - 121344));
  EXPECT_EQ(device(row, Cat::comm_buffers), int64_t{2} * 500000000);  // reduce_bucket_size, bf16
  // With no reuse window: the head (tied wte, 38,597,376) in use plus the 5e7 prefetch.
  r.plugin.deepspeed.max_reuse_distance = 0;
  EXPECT_EQ(device(only_row(model, r), Cat::chunk_buffers), 2 * (38597376 + 50000000));
}

// ZeRO-Offload under ZeRO-3: the same GPT-2 partitions (15,554,976 elements),
// the 16-bit ones still on the device; on the host the flat bf16 gradient
// partitions (31,109,952 bytes, pinned in 2^25) and the one sub-group's fp32
// gradients (62,219,904, pinned in 2^26), the fp32 partitions and CPU Adam's
// moments, pageable.
TEST(DeepSpeedZero3States, OffloadedOptimizerKeepsOnlyTheSixteenBitPartitionsOnTheDevice) {
  const Model model = shipped_model("gpt2");
  EstimateRequest r = runtime_request(Runtime::deepspeed, PluginKind::low_level_zero, 8);
  r.plugin.cpu_offload = true;
  const RankMemory row = only_row(model, r);
  EXPECT_EQ(device(row, Cat::parameters), 2 * (15554976 + 121344));
  for (Cat c : {Cat::gradients, Cat::master_weights, Cat::optimizer_states}) EXPECT_EQ(device(row, c), 0) << to_string(c);
  EXPECT_EQ(row.bytes[Cat::gradients].host, (int64_t{1} << 25) + (int64_t{1} << 26));
  EXPECT_EQ(row.bytes[Cat::master_weights].host, 4 * 15554976);
  EXPECT_EQ(row.bytes[Cat::optimizer_states].host, 8 * 15554976);
  r.plugin.pin_memory = false;
  EXPECT_EQ(only_row(model, r).bytes[Cat::gradients].host, (2 + 4) * 15554976);
}

// offload_param: only the persistent tensors (121,344 elements) stay on the
// device; the partitions are one pinned host buffer (31,109,952 bytes in 2^25).
TEST(DeepSpeedZero3States, OffloadedParametersLeaveOnlyThePersistentTensorsOnTheDevice) {
  const Model model = shipped_model("gpt2");
  EstimateRequest r = runtime_request(Runtime::deepspeed, PluginKind::low_level_zero, 8);
  r.plugin.deepspeed.offload_param = true;
  r.plugin.pin_memory = false;  // offload_param's flat buffer is pinned regardless
  const RankMemory row = only_row(model, r);
  EXPECT_EQ(device(row, Cat::parameters), 2 * 121344);
  EXPECT_EQ(row.bytes[Cat::parameters].host, int64_t{1} << 25);
  EXPECT_EQ(device(row, Cat::gradients), 2 * 15554976);  // the optimizer is not offloaded
}

// Sub-groups take parameters in order until they reach sub_group_size.
TEST(DeepSpeedZero3States, OffloadedFp32GradientsComeOneBufferPerSubGroup) {
  const std::vector<PinnedHostBlock> blocks = deepspeed_offload_gradient_blocks({3, 5, 2, 7}, 8, 2);
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].bytes, 17 * 2);  // the bf16 partitions, flat
  EXPECT_EQ(blocks[1].bytes, 8 * 4);   // 3 + 5 reach 8
  EXPECT_EQ(blocks[2].bytes, 9 * 4);   // 2 + 7, the last
  EXPECT_EQ(deepspeed_offload_gradient_blocks({3, 5, 2, 7}, 100, 2).size(), 2u);
  EXPECT_EQ(deepspeed_offload_gradient_blocks({3, 5, 2, 7}, 0, 2).size(), 5u);  // every parameter its own
}

// The sub-groups follow model.parameters(), where a Llama layer's norms come
// after its MLP. tiny-llama's partitions at dp 2, sub_group_size 30,000:
// [embed 16,384, q 8,192, k 4,096, v 4,096] 32,768 | [o 8,192, gate 16,384,
// up 16,384] 40,960 | [down 16,384, 2 norms of 64, q, k, v] 32,896 | [o, gate,
// up] 40,960 | [down, 2 norms, final norm, head 16,384] 32,960. Their fp32
// buffers pin at 2^17 + 4 × 2^18, beside the bf16 flat buffer's 2^19
// (361,088 bytes): 1,703,936, what DeepSpeed 0.19.8 makes
// (tools/ecosystem/deepspeed_offload.py). In execution order it would be 1,835,008.
TEST(DeepSpeedZero3States, SubGroupsFollowTheModulesRegistrationOrder) {
  EstimateRequest r = runtime_request(Runtime::deepspeed, PluginKind::low_level_zero, 2);
  r.plugin.cpu_offload = true;
  r.plugin.deepspeed.sub_group_size = 30000;
  EXPECT_EQ(only_row(shipped_model("tiny-llama"), r).bytes[Cat::gradients].host, (1 << 17) + 4 * (1 << 18) + (1 << 19));
}

// DeepSpeed's pipeline engine with its BF16_Optimizer (deepspeed_pipeline.h):
// bf16 parameters and gradients, the fp32 buffer of every gradient, the fp32
// partition and moments over dp, and the all-reduce's bf16 copy of the buffer
// where it exceeds the activations and logits it outlives.
// Llama 3 8B's count is a multiple of 2 · dp = 16: no padding.
TEST(DeepSpeedPipelineStates, EightPlusTwelveOverDBytesPerParameter) {
  const Model model = shipped_model("llama-3-8b");
  EstimateRequest r = runtime_request(Runtime::deepspeed, PluginKind::hybrid_parallel, 8);
  ASSERT_EQ(r.plugin.effective_zero_stage(), 1) << "its own ZeRO-1, the default there";
  const RankMemory row = only_row(model, r);
  EXPECT_EQ(device(row, Cat::parameters), 2 * kLlama3_8b);
  EXPECT_EQ(device(row, Cat::gradients), (2 + 4) * kLlama3_8b);
  EXPECT_EQ(device(row, Cat::master_weights), 4 * kLlama3_8b / 8);
  EXPECT_EQ(device(row, Cat::optimizer_states), 8 * kLlama3_8b / 8);
  EXPECT_EQ(model_state_bytes(row), 8 * kLlama3_8b + 12 * kLlama3_8b / 8);  // 9.5 B/param: 76,287,481,856 B
  // The all-reduce's bf16 copy of the buffer, after the schedule: only what exceeds the freed activations and logits.
  EXPECT_EQ(device(row, Cat::comm_buffers), 2 * kLlama3_8b - device(row, Cat::activations) - device(row, Cat::logits));
  EXPECT_GT(device(row, Cat::comm_buffers), 0);
  // GPT-2's 124,439,808 parameters at dp 5 pad to a multiple of 2 · 5: 124,439,810.
  const Model gpt2 = shipped_model("gpt2");
  r.layout.dp = 5;
  EXPECT_EQ(device(only_row(gpt2, r), Cat::parameters), 2 * 124439810);
}

// Under fp16 DeepSpeedZeroOptimizer at stage 1: fp16 parameters and gradients,
// its fp16 copy of the partition's gradients, the fp32 partition and moments;
// after the schedule the 500,000,000-element fp16 bucket (1 GB) or, at the
// step, the partition's flattened gradients and their fp32 cast, where that
// exceeds the activations and logits. 6 + 14/d bytes per parameter with Adam.
TEST(DeepSpeedPipelineStates, Fp16IsDeepSpeedZeroOptimizersStageOne) {
  const Model model = shipped_model("llama-3-8b");
  EstimateRequest r = runtime_request(Runtime::deepspeed, PluginKind::hybrid_parallel, 8);
  r.training.precision = Precision::fp16;
  const RankMemory row = only_row(model, r);
  EXPECT_EQ(device(row, Cat::parameters), 2 * kLlama3_8b);
  EXPECT_EQ(device(row, Cat::gradients), 2 * kLlama3_8b + 2 * kLlama3_8b / 8);
  EXPECT_EQ(device(row, Cat::master_weights), 4 * kLlama3_8b / 8);
  EXPECT_EQ(device(row, Cat::optimizer_states), 8 * kLlama3_8b / 8);
  EXPECT_EQ(model_state_bytes(row), 4 * kLlama3_8b + 14 * kLlama3_8b / 8);
  const int64_t step_buffers = std::max<int64_t>(1000000000, 6 * kLlama3_8b / 8);
  EXPECT_EQ(device(row, Cat::comm_buffers), std::max<int64_t>(0, step_buffers - device(row, Cat::activations) - device(row, Cat::logits)));
  r.plugin.deepspeed.reduce_bucket_size = 8000000000;  // a bucket as large as the model: 16 GB, beyond what the passes freed
  EXPECT_EQ(device(only_row(model, r), Cat::comm_buffers), 16000000000 - device(row, Cat::activations) - device(row, Cat::logits));
}

TEST(RuntimeChecks, DeepSpeedsPipelineEngineIsBf16OrFp16OneFOneBAtItsOwnZeroOne) {
  const std::string engine = "--runtime deepspeed --plugin hybrid_parallel (DeepSpeed's pipeline engine)";
  EstimateRequest r = runtime_request(Runtime::deepspeed, PluginKind::hybrid_parallel, 8);
  EXPECT_EQ(error(r), "");
  r.training.precision = Precision::fp16;
  EXPECT_EQ(error(r), "");
  r.training.precision = Precision::fp32;
  EXPECT_EQ(error(r), engine + " is modelled in bf16 (its BF16_Optimizer) and fp16 (DeepSpeedZeroOptimizer): use --precision bf16 or fp16, "
                               "or --runtime colossalai for fp32");
  r.training.precision = Precision::bf16;
  r.plugin.zero_stage = 0;
  EXPECT_EQ(error(r), engine + " is modelled at ZeRO stage 1, the fp32 states sharded over dp: use --zero-stage 1 (its default there), not 0");
  r.plugin.zero_stage = 1;
  r.plugin.pp_schedule = PipelineSchedule::interleaved;
  r.plugin.num_model_chunks = 2;
  EXPECT_EQ(error(r), engine + " runs its 1F1B TrainSchedule: use --pp-schedule 1f1b");
  r.plugin.pp_schedule = PipelineSchedule::one_f_one_b;
  r.plugin.overlap_param_gather = true;
  EXPECT_EQ(error(r), "--tp-comm-overlap and --overlap-param-gather are Megatron-Core's: drop them under " + engine);
  r.plugin.overlap_param_gather = false;
  r.layout.dp_replicate = 2;
  EXPECT_EQ(error(r), engine + " shards over every data-parallel rank: use --dp-replicate 1");
}

TEST(RuntimeChecks, EachRuntimeNamesItsPluginAndStage) {
  EXPECT_EQ(error(runtime_request(Runtime::megatron, PluginKind::torch_fsdp, 8)),
            "--runtime megatron models Megatron-Core's data, tensor and pipeline parallelism: use --plugin hybrid_parallel (got torch_fsdp)");
  EstimateRequest megatron = runtime_request(Runtime::megatron, PluginKind::hybrid_parallel, 8);
  megatron.plugin.zero_stage = 2;
  EXPECT_EQ(error(megatron), "--zero-stage 2 under --runtime megatron: Megatron-Core shards only the optimizer; use --zero-stage 1 (its distributed optimizer) or 0");
  EstimateRequest titan = runtime_request(Runtime::torchtitan, PluginKind::torch_fsdp, 8);
  titan.training.precision = Precision::fp16;
  EXPECT_EQ(error(titan), "--precision fp16 under --runtime torchtitan: its mixed_precision_param is bfloat16 or float32; use --precision bf16 or fp32");
  // One shard per replica is DDP in torchtitan; a context-parallel pair is still sharded.
  EstimateRequest replicated = runtime_request(Runtime::torchtitan, PluginKind::torch_fsdp, 8);
  replicated.layout.dp_replicate = 8;
  EXPECT_EQ(error(replicated), "--runtime torchtitan shards over 2 ranks or more per replica (FSDP2; with one, torchtitan runs DDP, which is not modelled): "
                               "use --dp 2 or more, or a --dp-replicate that leaves 2 ranks or more in each replica");
  replicated.layout.cp = 2;
  EXPECT_EQ(error(replicated), "");
  EstimateRequest deepspeed = runtime_request(Runtime::deepspeed, PluginKind::low_level_zero, 8);
  deepspeed.plugin.zero_stage = 2;
  EXPECT_EQ(error(deepspeed), "--runtime deepspeed models ZeRO-3: use --zero-stage 3 (its default there), --plugin hybrid_parallel for its pipeline "
                              "engine at stage 1, or --runtime colossalai for stages 1 and 2");
  deepspeed.plugin.zero_stage = 3;
  deepspeed.plugin.cpu_offload = true;
  deepspeed.training.optimizer = OptimizerKind::sgd_momentum;
  EXPECT_EQ(error(deepspeed), "--cpu-offload under --runtime deepspeed steps with DeepSpeedCPUAdam: use --optimizer adam or adamw (got sgd_momentum)");
  EstimateRequest offload_param = runtime_request(Runtime::colossalai, PluginKind::low_level_zero, 8);
  offload_param.plugin.deepspeed.offload_param = true;
  EXPECT_EQ(error(offload_param),
            "--offload-param is DeepSpeed ZeRO-3's offload_param: use it with --runtime deepspeed (gemini: --offload-param-frac; torch_fsdp: --cpu-offload)");
  EstimateRequest colossalai = runtime_request(Runtime::colossalai, PluginKind::low_level_zero, 8);
  colossalai.plugin.zero_stage = 3;
  EXPECT_EQ(error(colossalai), "--zero-stage 3: use --plugin gemini or --plugin torch_fsdp for ZeRO-3");
}

TEST(RuntimeReports, EveryFormatNamesTheRuntime) {
  const Model model = shipped_model("llama-3-8b");
  const GpuProfile gpu = shipped_gpu("h100-80g");
  EstimateRequest r = runtime_request(Runtime::megatron, PluginKind::hybrid_parallel, 8);
  r.plugin.zero_stage = 1;
  const MemoryEstimate estimate = estimate_or_fail(model, gpu, r);
  const EstimateReport report{model, gpu, r, estimate};
  const nlohmann::json json = estimate_to_json(report);
  EXPECT_EQ(json["runtime"], "megatron");
  EXPECT_EQ(json["model_states"]["runtime"], "megatron");
  EXPECT_NE(json["model_states"]["source"].get<std::string>().find("6 + 12/d"), std::string::npos);
  for (ReportFormat format : {ReportFormat::table, ReportFormat::md, ReportFormat::html}) {
    const std::string text = render_estimate(report, format);
    EXPECT_NE(text.find("runtime megatron"), std::string::npos) << enum_name(format);
    EXPECT_NE(text.find("distributed optimizer"), std::string::npos) << enum_name(format);
  }
}

}  // namespace
}  // namespace tessera::planner
