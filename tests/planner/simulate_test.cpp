#include <gtest/gtest.h>

#include <algorithm>

#include "tessera/planner/collectives.h"
#include "tessera/planner/fp8.h"
#include "tessera/planner/gradient_accumulation.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/optimizer_step.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/simulate.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

TEST(PipelineSchedules, OneFOneBWarmsUpThenAlternates) {
  const auto stages = pipeline_schedule(PipelineSchedule::one_f_one_b, 4, 6);
  ASSERT_EQ(stages.size(), 4u);
  std::string first, last;
  for (const PipelineOp& op : stages[0]) first += (op.pass == PipelinePass::forward ? "F" : "B") + std::to_string(op.micro_batch) + " ";
  for (const PipelineOp& op : stages[3]) last += (op.pass == PipelinePass::forward ? "F" : "B") + std::to_string(op.micro_batch) + " ";
  EXPECT_EQ(first, "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5 ");
  EXPECT_EQ(last, "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 ");
  const auto gpipe = pipeline_schedule(PipelineSchedule::gpipe, 2, 3);
  EXPECT_EQ(gpipe[1].back().micro_batch, 0);
}

class Simulator : public ::testing::Test {
 protected:
  const Model model = testing::shipped_model("llama-2-7b");
  StepSimulation run(const EstimateRequest& r, double inter_node_gbit_s = 400, bool events = false) const {
    const ClusterSpec cluster = make_cluster(testing::shipped_gpu("h100-80g"), r.layout.world_size(), 8, inter_node_gbit_s).value();
    const MemoryEstimate memory = testing::estimate_or_fail(model, cluster.gpu, r);
    auto sim = simulate_step(model, cluster, r, memory, SimulationSettings{}, events);
    EXPECT_TRUE(sim.ok()) << (sim.ok() ? "" : sim.error().message);
    return sim.value();
  }
  static EstimateRequest pipeline(int64_t pp, int64_t m, PipelineSchedule schedule) {
    EstimateRequest r;
    r.plugin.kind = PluginKind::hybrid_parallel;
    r.plugin.pp_schedule = schedule;
    r.layout = ParallelLayout{1, 1, pp, false};
    r.training.num_micro_batches = m;
    r.training.seq_len = 2048;
    return r;
  }
};

TEST_F(Simulator, BreakdownAddsUpToTheStepAndTokensFollow) {
  EstimateRequest r = pipeline(4, 8, PipelineSchedule::one_f_one_b);
  r.layout.dp = 2;
  r.plugin.zero_stage = 1;
  const StepSimulation s = run(r);
  const StepBreakdown& b = s.breakdown;
  EXPECT_NEAR(b.forward_s + b.backward_s + b.recompute_s + b.communication_s + b.offload_s + b.optimizer_s + b.bubble_s, s.step_time_s, 1e-9 * s.step_time_s);
  EXPECT_NEAR(s.tokens_per_s, 8 * 2 * 2048 / s.step_time_s, 1e-6 * s.tokens_per_s);
  EXPECT_LE(s.mfu, testing::shipped_gpu("h100-80g").matmul_efficiency) << "no faster than the GPU's large GEMMs";
  EXPECT_NEAR(b.backward_s, 2 * b.forward_s, 0.05 * b.forward_s) << "element-wise traffic is 2x in backward too";
}

// DeepSpeed's offload_param brings each rank's 16-bit partitions (842,301,952
// elements of Llama 2 7B at dp 8, bf16) up over PCIe for every forward and
// backward; what the passes' compute does not cover shows, at most all of it.
TEST_F(Simulator, DeepSpeedParameterOffloadFetchesThePartitionsEveryPass) {
  EstimateRequest r;
  r.plugin.runtime = Runtime::deepspeed;
  r.plugin.kind = PluginKind::low_level_zero;
  r.layout.dp = 8;
  r.training.precision = Precision::bf16;
  r.training.seq_len = 1024;
  const double resident = run(r).breakdown.offload_s;
  r.plugin.deepspeed.offload_param = true;
  const double fetched = run(r).breakdown.offload_s;
  const double pcie = 842301952.0 * 2 / (testing::shipped_gpu("h100-80g").pcie_gbps * 1e9);
  EXPECT_EQ(resident, 0);
  EXPECT_GT(fetched, 0);
  EXPECT_LE(fetched, 2 * pcie * (1 + 1e-9));
}

// Megatron-Core's --tp-comm-overlap hides the tensor-parallel calls under the
// GEMMs, --overlap-param-gather the distributed optimizer's all-gather under the
// next step's forward; both are refused where the runtime cannot do them.
TEST_F(Simulator, CommunicationOverlapsHideTensorParallelCallsAndTheParameterGather) {
  EstimateRequest r = pipeline(1, 2, PipelineSchedule::one_f_one_b);  // hybrid_parallel, 2 micro-batches
  r.plugin.zero_stage = 1;
  r.layout = ParallelLayout{4, 8, 1, true};
  r.training.seq_len = 4096;
  const StepSimulation plain = run(r);
  r.plugin.tp_comm_overlap = true;
  const StepSimulation tp_overlap = run(r);
  EXPECT_LT(tp_overlap.breakdown.communication_s, 0.5 * plain.breakdown.communication_s);
  EXPECT_LT(tp_overlap.step_time_s, plain.step_time_s);
  r.plugin.overlap_param_gather = true;
  const StepSimulation both = run(r);
  EXPECT_LT(both.step_time_s, tp_overlap.step_time_s);
  EXPECT_DOUBLE_EQ(both.breakdown.forward_s, plain.breakdown.forward_s) << "overlap moves communication, not compute";

  const GpuProfile gpu = testing::shipped_gpu("h100-80g");
  r.layout.sequence_parallel = false;
  EXPECT_NE(validate_request(model, gpu, r).error().message.find("--tp-comm-overlap"), std::string::npos);
  r.layout.sequence_parallel = true;
  r.plugin.zero_stage = 0;
  EXPECT_NE(validate_request(model, gpu, r).error().message.find("--overlap-param-gather"), std::string::npos);
}

// Megatron-Core reduce-scatters its main-gradient buffer in the buffer's dtype and
// all-gathers the updated parameters: 16 data ranks on two nodes, both charged in
// full (after the backward, no --overlap-param-gather). --grad-reduce-in-bf16
// halves the reduce-scatter and adds the optimizer's cast of its shard to fp32
// (2 + 4 B an element); under FP8, --fp8-param-gather sends the blocks' GEMM
// weights in a byte.
TEST_F(Simulator, MegatronMovesItsBufferAndParametersInTheirDtypes) {
  EstimateRequest r = pipeline(1, 1, PipelineSchedule::one_f_one_b);
  r.layout = ParallelLayout{16, 1, 1, false};
  r.plugin.runtime = Runtime::megatron;
  r.plugin.zero_stage = 1;
  r.plugin.grad_reduce_after_backward = true;
  const ClusterSpec cluster = make_cluster(testing::shipped_gpu("h100-80g"), 16, 8, 400).value();
  const CollectiveGroup two_nodes{16, 2, cluster.intra_node_bytes_per_s(), cluster.inter_node_bytes_per_s(), true};
  const auto n = static_cast<double>(model.parameter_count);
  const auto reduce = [&](double bytes) { return collective_seconds(Collective::reduce_scatter, bytes, two_nodes); };
  const auto gather = [&](double bytes) { return collective_seconds(Collective::all_gather, bytes, two_nodes); };
  const StepSimulation fp32 = run(r);
  EXPECT_NEAR(fp32.breakdown.communication_s, reduce(4 * n) + gather(2 * n), 1e-9);
  r.plugin.grad_reduce_in_bf16 = true;
  const StepSimulation bf16 = run(r);
  EXPECT_NEAR(bf16.breakdown.communication_s, reduce(2 * n) + gather(2 * n), 1e-9);
  const double hbm = cluster.gpu.hbm_gbps * 1e9 * SimulationSettings{}.memory_efficiency;
  EXPECT_NEAR(bf16.breakdown.optimizer_s - fp32.breakdown.optimizer_s, n / 16 * (2 + 4) / hbm, 1e-12);

  r.training.precision = Precision::fp8;
  const StepSimulation cast = run(r);
  r.plugin.fp8_param_gather = true;
  const StepSimulation gathered_in_fp8 = run(r);
  const auto fp8 = static_cast<double>(fp8_weight_elements(model, std::vector<StageLayers>{{0, 32}}, 1));
  EXPECT_EQ(fp8, 32 * (4 * 4096.0 * 4096 + 3 * 4096.0 * 11008));  // q, k, v, o and gate, up, down
  EXPECT_NEAR(cast.breakdown.communication_s - gathered_in_fp8.breakdown.communication_s, gather(2 * n) - gather(2 * n - fp8), 1e-9);
}

// Megatron-LM's LocalDDP and DeepSpeed's pipeline engine reduce the gradients
// after the whole backward: the all-reduce is charged in full, where torch DDP's
// buckets hide it under the backward.
TEST_F(Simulator, GradientReduceAfterTheBackwardIsChargedInFull) {
  EstimateRequest r = pipeline(1, 1, PipelineSchedule::one_f_one_b);
  r.layout = ParallelLayout{16, 1, 1, false};
  const StepSimulation overlapped = run(r, 100);
  r.plugin.grad_reduce_after_backward = true;
  const StepSimulation after = run(r, 100);
  const ClusterSpec cluster = make_cluster(testing::shipped_gpu("h100-80g"), 16, 8, 100).value();
  const double grads = static_cast<double>(model.parameter_count) * 2;  // bf16 gradients
  const CollectiveGroup two_nodes{16, 2, cluster.intra_node_bytes_per_s(), cluster.inter_node_bytes_per_s(), true};
  const double all_reduce = collective_seconds(Collective::all_reduce, grads, two_nodes);
  EXPECT_NEAR(after.breakdown.communication_s, all_reduce, 1e-9 * all_reduce);
  // Bucketed, the backward (one micro-batch) hides its length of the reduction
  // but for the overlap's cost (SimulationSettings::overlap_cost).
  const double hidden = overlapped.breakdown.backward_s;
  EXPECT_NEAR(overlapped.breakdown.communication_s, all_reduce - (1 - SimulationSettings{}.overlap_cost) * hidden, 1e-6 * all_reduce);
  EXPECT_DOUBLE_EQ(after.breakdown.backward_s, overlapped.breakdown.backward_s);
  r.plugin.kind = PluginKind::torch_ddp;
  EXPECT_NE(validate_request(model, cluster.gpu, r).error().message.find("--grad-reduce-after-backward"), std::string::npos);
}

// DeepSpeed's pipeline engine (deepspeed_pipeline.h) against ColossalAI's
// hybrid_parallel at ZeRO-1, one stage of 16 data ranks on two nodes, 4
// micro-batches. bf16 (BF16_Optimizer): each micro-batch's backward adds its
// gradients into the fp32 buffer (18 B a parameter); after the schedule the
// buffer is all-reduced in bf16, the step reads and writes it (32 B a
// parameter) and updates the partition (34 B an element with Adam). fp16
// (DeepSpeedZeroOptimizer): the second to fourth micro-batches add their fp16
// gradients in place (6 B); after the schedule every gradient goes through the
// bucket (8 B) and is reduced in fp16 to the rank that owns it (a
// reduce-scatter's traffic); the partition's step is 84 B an element. Both
// all-gather the 16-bit partitions, and none of it runs under compute.
TEST_F(Simulator, DeepSpeedPipelineEngineAccumulatesThenReducesAfterTheSchedule) {
  struct Case {
    Precision precision;
    double accumulated_bytes;  // per parameter, over the step's micro-batches
    Collective reduction;
    double whole_bytes, partition_bytes;  // the step's, per parameter and per partition element
  };
  const GpuProfile gpu = testing::shipped_gpu("h100-80g");
  const double hbm = gpu.hbm_gbps * 1e9 * SimulationSettings{}.memory_efficiency;
  const auto params = static_cast<double>(model.parameter_count);
  const ClusterSpec cluster = make_cluster(gpu, 16, 8, 100).value();
  const CollectiveGroup two_nodes{16, 2, cluster.intra_node_bytes_per_s(), cluster.inter_node_bytes_per_s(), true};
  for (const Case& k : {Case{Precision::bf16, 4 * 18, Collective::all_reduce, 32, 34}, Case{Precision::fp16, 3 * 6, Collective::reduce_scatter, 8, 84}}) {
    EstimateRequest r = pipeline(1, 4, PipelineSchedule::one_f_one_b);
    r.layout = ParallelLayout{16, 1, 1, false};
    r.plugin.zero_stage = 1;
    r.training.precision = k.precision;
    const StepSimulation colossalai = run(r, 100);
    r.plugin.runtime = Runtime::deepspeed;
    const StepSimulation deepspeed = run(r, 100);
    const std::string precision(enum_name(k.precision));
    EXPECT_DOUBLE_EQ(deepspeed.breakdown.forward_s, colossalai.breakdown.forward_s) << precision;
    EXPECT_NEAR(deepspeed.breakdown.backward_s - colossalai.breakdown.backward_s, params * k.accumulated_bytes / hbm, 1e-9 * deepspeed.breakdown.backward_s)
        << precision;
    const double communication = collective_seconds(k.reduction, params * 2, two_nodes) + collective_seconds(Collective::all_gather, params * 2, two_nodes);
    EXPECT_NEAR(deepspeed.breakdown.communication_s, communication, 1e-9 * communication) << precision;
    const double optimizer = (params * k.whole_bytes + params / 16 * k.partition_bytes) / hbm;
    EXPECT_NEAR(deepspeed.breakdown.optimizer_s, optimizer, 1e-9 * optimizer) << precision;
  }
}

// optimizer_step.h: a fused Adam's 28 bytes (16-bit gradient, fp32 parameter and
// moments) plus the new 16-bit weight; Megatron's step casts, unscales and
// norms the fp32 gradients around an update that reads them in fp32, and
// copies the parameters back; DeepSpeed's BF16_Optimizer updates its fp32
// partition and writes the bf16 one.
TEST(OptimizerStep, BytesPerParameterByRuntime) {
  PluginOptions p;
  TrainingOptions t;
  t.optimizer = OptimizerKind::adamw;
  t.precision = Precision::bf16;
  EXPECT_EQ(optimizer_step_bytes_per_param(p, t), 2 + 8 + 16 + 2);
  p.runtime = Runtime::megatron;
  EXPECT_EQ(optimizer_step_bytes_per_param(p, t), 4 + (4 + 8 + 16) + (4 + 2));
  t.precision = Precision::fp16;
  EXPECT_EQ(optimizer_step_bytes_per_param(p, t), (2 + 4) + (4 + 4) + 4 + (4 + 8 + 16) + (4 + 2));
  t.precision = Precision::fp32;
  EXPECT_EQ(optimizer_step_bytes_per_param(p, t), 4 + (4 + 8 + 16));
  t.precision = Precision::bf16;
  t.optimizer = OptimizerKind::sgd;
  EXPECT_EQ(optimizer_step_bytes_per_param(p, t), 4 + (4 + 8) + (4 + 2));
  p.runtime = Runtime::deepspeed;
  p.kind = PluginKind::hybrid_parallel;
  t.optimizer = OptimizerKind::adam;
  EXPECT_EQ(optimizer_step_bytes_per_param(p, t), (4 + 8 + 16) + (4 + 2));
  // Under fp16 DeepSpeedZeroOptimizer first copies, checks, norms, flattens, casts and unscales the partition.
  t.precision = Precision::fp16;
  EXPECT_EQ(optimizer_step_bytes_per_param(p, t), (2 + 2) + (2 + 4 + 4) + (2 + 8 + 8) + (2 + 2) + (2 + 4) + (4 + 4) + (4 + 8 + 16) + (4 + 2));
}

TEST(GradientAccumulation, BytesPerParameterByRuntime) {
  PluginOptions p;
  TrainingOptions t;
  t.precision = Precision::bf16;
  EXPECT_EQ(gradient_accumulation(p, t).bytes_per_param, 0) << "ColossalAI's plugins: not counted";
  p.runtime = Runtime::megatron;
  EXPECT_EQ(gradient_accumulation(p, t).bytes_per_param, 4 + 2 + 4);  // fp32 buffer read and written, bf16 gradient read
  EXPECT_TRUE(gradient_accumulation(p, t).matmul_weights_fused);
  p.grad_reduce_in_bf16 = true;
  EXPECT_EQ(gradient_accumulation(p, t).bytes_per_param, 2 + 2 + 2);  // the bf16 buffer's
  p.grad_reduce_in_bf16 = false;
  t.precision = Precision::fp16;
  p.no_gradient_accumulation_fusion = true;
  EXPECT_EQ(gradient_accumulation(p, t).bytes_per_param, 2 + 2 + 2);
  EXPECT_FALSE(gradient_accumulation(p, t).matmul_weights_fused);
  EXPECT_EQ(gradient_accumulation_bytes(gradient_accumulation(p, t), 1000, 10, 4), 6 * 1000);  // every micro-batch
  p.runtime = Runtime::deepspeed;
  p.kind = PluginKind::hybrid_parallel;
  // DeepSpeed's pipeline engine: fp16 gradients added in place from the second micro-batch on ...
  EXPECT_EQ(gradient_accumulation(p, t).bytes_per_param, 2 + 2 + 2);
  EXPECT_EQ(gradient_accumulation_bytes(gradient_accumulation(p, t), 1000, 10, 4), 6 * 1000 * 3 / 4.0);
  EXPECT_EQ(gradient_accumulation_bytes(gradient_accumulation(p, t), 1000, 10, 1), 0);
  // ... the BF16_Optimizer's fp32 buffer after every one.
  t.precision = Precision::bf16;
  EXPECT_EQ(gradient_accumulation(p, t).bytes_per_param, 18);
  EXPECT_EQ(gradient_accumulation_bytes(gradient_accumulation(p, t), 1000, 10, 4), 18 * 1000);
}

// Llama 2 7B on 2 stages: the first holds the embedding (32,000 x 4,096) and
// its 16 blocks' 32 norms, the last its blocks' norms and the final norm; the
// head is a GEMM's. With the fusion Megatron adds those each micro-batch,
// without it every parameter: the difference is the GEMM weights, 6 bytes
// each under fp16, on the slower (last) stage, 8 micro-batches.
TEST_F(Simulator, MegatronAddsGradientsOutsideItsGemmsEveryMicroBatch) {
  EstimateRequest r = pipeline(2, 8, PipelineSchedule::one_f_one_b);
  r.plugin.runtime = Runtime::megatron;
  r.training.precision = Precision::fp16;
  const std::vector<StageShape> stages = stage_layouts(model, r);
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].non_matmul_params, 32000 * 4096 + 32 * 4096);
  EXPECT_EQ(stages[1].non_matmul_params, 33 * 4096);
  const StepSimulation fused = run(r);
  r.plugin.no_gradient_accumulation_fusion = true;
  const StepSimulation unfused = run(r);
  const double hbm = testing::shipped_gpu("h100-80g").hbm_gbps * 1e9 * SimulationSettings{}.memory_efficiency;
  const auto gemm_weights = static_cast<double>(stages[1].params - stages[1].non_matmul_params);
  EXPECT_NEAR(unfused.breakdown.backward_s - fused.breakdown.backward_s, 8 * gemm_weights * 6 / hbm, 1e-9 * fused.breakdown.backward_s);
  EXPECT_DOUBLE_EQ(unfused.breakdown.forward_s, fused.breakdown.forward_s);
  r.plugin.runtime = Runtime::colossalai;
  EXPECT_EQ(validate_request(model, testing::shipped_gpu("h100-80g"), r).error().message,
            "--no-gradient-accumulation-fusion turns off Megatron's fused weight-gradient accumulation: it needs --runtime megatron");
}

// The simulator charges that step on the rank's share: Megatron-Core's
// distributed optimizer updates 1/dp of the parameters.
TEST_F(Simulator, MegatronsOptimizerStepOnItsShard) {
  EstimateRequest r = pipeline(1, 1, PipelineSchedule::one_f_one_b);
  r.layout = ParallelLayout{8, 1, 1, false};
  r.plugin.runtime = Runtime::megatron;
  r.plugin.zero_stage = 1;
  const double hbm = testing::shipped_gpu("h100-80g").hbm_gbps * 1e9 * SimulationSettings{}.memory_efficiency;
  const double expected = static_cast<double>(model.parameter_count) / 8 * 38 / hbm;
  EXPECT_NEAR(run(r).breakdown.optimizer_s, expected, 1e-9 * expected);
}

// Pipeline sends (simulate.h): Megatron's wait for their transfer, a send a pass
// under 1F1B, half one under the interleaved schedule with
// --no-overlap-p2p-communication, none by default there, where they run under
// the passes as ColossalAI's do; split over the tp ranks, each rank sends its
// 1/tp and the receiver all-gathers the whole.
TEST_F(Simulator, MegatronsPipelineSendsHoldTheStageUnlessOverlapped) {
  EstimateRequest r = pipeline(2, 8, PipelineSchedule::one_f_one_b);
  r.layout = ParallelLayout{1, 2, 2, false};
  const StepSimulation colossalai = run(r);
  r.plugin.runtime = Runtime::megatron;
  const ClusterSpec cluster = make_cluster(testing::shipped_gpu("h100-80g"), 4, 8, 400).value();
  const double send = pipeline_send_seconds(model, cluster, r);
  ASSERT_GT(send, 0);
  EXPECT_DOUBLE_EQ(pipeline_send_hold_seconds(model, cluster, r), send);
  // Each stage sends once a micro-batch: the first its forward's output, the last its backward's gradient.
  EXPECT_NEAR(run(r).breakdown.communication_s - colossalai.breakdown.communication_s, 8 * send, 1e-9 * send);
  r.plugin.pipeline_scatter_gather = true;
  const double boundary = 1.0 * 2048 * 4096 * 2;  // a micro-batch's hidden states, bf16
  // All four GPUs on one node: the send crosses NVLink, the gather stays in the node.
  const CollectiveGroup tp_group{2, 1, cluster.intra_node_bytes_per_s(), cluster.inter_node_bytes_per_s(), true};
  const double scattered = boundary / 2 / cluster.intra_node_bytes_per_s() + cluster.intra_node_latency_s +
                           collective_seconds(Collective::all_gather, boundary, tp_group);
  EXPECT_NEAR(pipeline_send_seconds(model, cluster, r), scattered, 1e-12);
  r.plugin.pipeline_scatter_gather = false;
  r.plugin.pp_schedule = PipelineSchedule::interleaved;
  r.plugin.num_model_chunks = 2;
  EXPECT_EQ(pipeline_send_hold_seconds(model, cluster, r), 0);
  r.plugin.no_overlap_p2p_comm = true;
  EXPECT_DOUBLE_EQ(pipeline_send_hold_seconds(model, cluster, r), send / 2);
  // Megatron-LM's validate_args wants 3 stages or more for that.
  EXPECT_EQ(validate_request(model, cluster.gpu, r).error().message,
            "--no-overlap-p2p-communication makes the interleaved schedule's pipeline sends wait (Megatron-LM): it needs --runtime megatron, "
            "--pp-schedule interleaved and --pp above 2");
  r.plugin.no_overlap_p2p_comm = false;
  // The trace shows the hold after each sending pass, on the stage's communication lane.
  EstimateRequest one_f_one_b = pipeline(2, 4, PipelineSchedule::one_f_one_b);
  one_f_one_b.plugin.runtime = Runtime::megatron;
  const ClusterSpec two = make_cluster(testing::shipped_gpu("h100-80g"), 2, 8, 400).value();
  const double hold = pipeline_send_hold_seconds(model, two, one_f_one_b);
  const StepSimulation traced = run(one_f_one_b, 400, true);
  const auto held = std::find_if(traced.events.begin(), traced.events.end(), [](const TraceEvent& e) { return e.name == "pipeline send F0"; });
  ASSERT_NE(held, traced.events.end());
  EXPECT_NEAR(held->duration_s, hold, 1e-12);
  EXPECT_EQ(held->lane, 1);
  r.plugin.runtime = Runtime::colossalai;
  r.plugin.pipeline_scatter_gather = true;
  EXPECT_EQ(validate_request(model, cluster.gpu, r).error().message,
            "--scatter-gather-tensors-in-pipeline splits Megatron-LM's pipeline sends over the tp ranks: it needs --runtime megatron, "
            "--pp and --tp above 1 and no --sequence-parallel");
}

// GPT-2 ties its head to the embedding: with a pipeline the first and the last
// stage sum its gradient after the schedule (50,257 × 768 elements in bf16 here,
// the two stages on one node), the only communication of a one-replica pipeline
// whose sends run under the passes.
TEST(SimulatorTiedEmbedding, EndStagesSumTheTiedGradientAfterTheSchedule) {
  const Model gpt2 = testing::shipped_model("gpt2");
  EstimateRequest r;
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.layout = ParallelLayout{1, 1, 2, false};
  r.training.num_micro_batches = 4;
  const ClusterSpec cluster = make_cluster(testing::shipped_gpu("h100-80g"), 2, 8, 400).value();
  const auto sim = simulate_step(gpt2, cluster, r, testing::estimate_or_fail(gpt2, cluster.gpu, r), SimulationSettings{}, false);
  ASSERT_TRUE(sim.ok());
  const CollectiveGroup ends{2, 1, cluster.intra_node_bytes_per_s(), cluster.inter_node_bytes_per_s(), true};
  const double sum = collective_seconds(Collective::all_reduce, 50257.0 * 768 * 2, ends);
  EXPECT_NEAR(sim->breakdown.communication_s, sum, 1e-9 * sum);
}

TEST_F(Simulator, PipelineBubbleIsAboutPMinusOneOverMOfTheWork) {
  for (PipelineSchedule schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    const StepSimulation s = run(pipeline(4, 16, schedule));
    const double work = s.breakdown.forward_s + s.breakdown.backward_s;
    // Narayanan et al. 2021 §2.2: bubble fraction (p - 1) / m; stages differ a little (embedding, head).
    EXPECT_NEAR(s.breakdown.bubble_s / work, 3.0 / 16, 0.06) << enum_name(schedule);
  }
}

// Narayanan et al. 2021 §2.2.2: v model chunks per stage cut the bubble to
// (p - 1) / (v · m) of the work, for v times the point-to-point messages.
TEST_F(Simulator, InterleavingDividesTheBubbleByTheChunks) {
  EstimateRequest interleaved = pipeline(4, 16, PipelineSchedule::interleaved);
  interleaved.plugin.num_model_chunks = 2;
  const StepSimulation plain = run(pipeline(4, 16, PipelineSchedule::one_f_one_b));
  const StepSimulation chunked = run(interleaved, 400, true);
  const double work = chunked.breakdown.forward_s + chunked.breakdown.backward_s;
  EXPECT_NEAR(chunked.breakdown.bubble_s / work, 3.0 / 32, 0.04);
  EXPECT_LT(chunked.breakdown.bubble_s, 0.7 * plain.breakdown.bubble_s);
  EXPECT_LT(chunked.step_time_s, plain.step_time_s);
  int forwards = 0, receives = 0;
  for (const TraceEvent& e : chunked.events) {
    forwards += e.category == std::string("forward");
    receives += e.category == std::string("communication") && e.name.starts_with("recv F");
  }
  EXPECT_EQ(forwards, 4 * 16 * 2);
  EXPECT_EQ(receives, (4 * 2 - 1) * 16) << "every virtual stage but the first receives each micro-batch";
}

// Uneven stages: llama-2-7b's 32 layers on 5 stages are 6, 7, 7, 6, 6. Each
// stage's passes take its own blocks' time, and the step waits for the
// slowest: at least m of its forward and backward passes.
TEST_F(Simulator, UnevenStagesRunAtTheirOwnPaceAndTheSlowestSetsTheStep) {
  const StepSimulation s = run(pipeline(5, 10, PipelineSchedule::one_f_one_b), 400, true);
  double forward[5] = {}, backward[5] = {};
  for (const TraceEvent& e : s.events) {
    if (e.lane % 2 != 0) continue;  // compute lanes only
    (e.category == std::string("forward") ? forward : backward)[e.lane / 2] = e.duration_s;
  }
  EXPECT_NEAR(forward[1] / forward[0], 7.0 / 6.0, 1e-9);
  EXPECT_NEAR(forward[2], forward[1], 1e-12);
  EXPECT_NEAR(forward[3], forward[0], 1e-12);
  EXPECT_GE(s.step_time_s, 10 * (forward[1] + backward[1]));
}

TEST_F(Simulator, TimelineEndsAtTheStepTime) {
  const StepSimulation s = run(pipeline(2, 4, PipelineSchedule::one_f_one_b), 400, true);
  ASSERT_FALSE(s.events.empty());
  double end = 0;
  int forwards = 0;
  for (const TraceEvent& e : s.events) {
    end = std::max(end, e.start_s + e.duration_s);
    forwards += e.category == "forward";
  }
  EXPECT_NEAR(end, s.step_time_s, 1e-9 * s.step_time_s);
  EXPECT_EQ(forwards, 2 * 4);
}

TEST_F(Simulator, SlowerNetworkSlowsDataParallelAcrossNodes) {
  EstimateRequest r;
  r.plugin.kind = PluginKind::low_level_zero;
  r.layout.dp = 16;  // two nodes
  r.training.seq_len = 2048;
  r.training.num_micro_batches = 1;
  const double fast = run(r, 400).step_time_s;
  const double slow = run(r, 50).step_time_s;
  EXPECT_GT(slow, fast * 1.05);
}

TEST_F(Simulator, FullRecomputeCostsAboutAThirdMore) {
  EstimateRequest r;
  r.layout.dp = 1;
  r.plugin.kind = PluginKind::gemini;
  r.training.seq_len = 2048;
  const double none = run(r).breakdown.recompute_s;
  r.training.recompute = RecomputeMode::full;
  const StepSimulation full = run(r);
  EXPECT_EQ(none, 0.0);
  EXPECT_NEAR(full.breakdown.recompute_s / (full.breakdown.forward_s), 1.0, 0.1);
}

}  // namespace
}  // namespace tessera::planner
