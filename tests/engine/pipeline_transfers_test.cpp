// The GPU pipeline's host logic, run on the CPU: which pass each stage runs
// when and which point-to-point calls surround it (parallel/pipeline_transfers.h),
// checked by replaying every stage at once under NCCL's rules (a send and a
// recv complete only together, the calls of one send_recv progress
// independently, two ranks' messages in one direction match by order); which
// passes' buffers are live (device/step_activations.h on a fake device); and
// a stage's ledger against the planner's estimate for that stage.
#include "tessera/engine/parallel/pipeline_transfers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "awkward_models.h"
#include "fake_streams.h"
#include "tessera/engine/device/stage_boundaries.h"
#include "tessera/engine/device/step_activations.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/pp_traffic.h"
#include "tessera/planner/registry.h"

namespace tessera::engine {
namespace {

using planner::PipelineSchedule;

bool same(const PipelineMessage& a, const PipelineMessage& b) { return a.micro_batch == b.micro_batch && a.gradient == b.gradient; }

// Every stage's calls replayed together: what went wrong (a stage waiting
// forever, a message matched with another), or nothing.
std::string replay(const std::vector<StageTransfers>& stages) {
  const auto pp = static_cast<int64_t>(stages.size());
  std::string wrong;
  std::vector<size_t> at(static_cast<size_t>(pp), 0);                         // each stage's current send_recv
  std::vector<std::array<bool, 2>> done(static_cast<size_t>(pp), {false, false});  // its send, its recv
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < pp; ++s) {
      const auto i = static_cast<size_t>(s);
      if (at[i] == stages[i].transfers.size()) continue;
      const PipelineTransfer& mine = stages[i].transfers[at[i]];
      if (mine.send.present() && !done[i][0]) {
        const auto p = static_cast<size_t>(mine.send.peer);
        const bool posted = at[p] < stages[p].transfers.size() && !done[p][1] && stages[p].transfers[at[p]].recv.peer == s;
        if (posted) {
          if (!same(mine.send, stages[p].transfers[at[p]].recv)) wrong += "stage " + std::to_string(s) + "'s message taken for another; ";
          done[i][0] = done[p][1] = true;
          progress = true;
        }
      }
    }
    for (int64_t s = 0; s < pp; ++s) {
      const auto i = static_cast<size_t>(s);
      if (at[i] == stages[i].transfers.size()) continue;
      const PipelineTransfer& mine = stages[i].transfers[at[i]];
      if ((!mine.send.present() || done[i][0]) && (!mine.recv.present() || done[i][1])) {
        ++at[i];  // and the pass after it runs
        done[i] = {false, false};
        progress = true;
      }
    }
  }
  for (int64_t s = 0; s < pp; ++s) {
    if (at[static_cast<size_t>(s)] != stages[static_cast<size_t>(s)].transfers.size()) wrong += "stage " + std::to_string(s) + " waits forever; ";
  }
  return wrong;
}

std::vector<StageTransfers> every_stage(PipelineSchedule schedule, int64_t pp, int64_t m) {
  std::vector<StageTransfers> stages;
  for (int64_t s = 0; s < pp; ++s) stages.push_back(stage_transfers(schedule, pp, s, m));
  return stages;
}

// The replay sees a deadlock: two stages each sending to the other alone first (no send_recv).
TEST(PipelineTransfers, ReplayCatchesTwoStagesSendingFirst) {
  StageTransfers zero, one;
  zero.transfers = {{{1, 0, false}, {}}, {{}, {1, 0, true}}};
  one.transfers = {{{0, 0, true}, {}}, {{}, {0, 0, false}}};
  EXPECT_EQ(replay({zero, one}), "stage 0 waits forever; stage 1 waits forever; ");
  zero.transfers = {{{1, 0, false}, {1, 0, true}}};
  one.transfers = {{{0, 0, true}, {0, 0, false}}};
  EXPECT_EQ(replay({zero, one}), "");
  one.transfers = {{{0, 0, true}, {0, 1, false}}};
  EXPECT_EQ(replay({zero, one}), "stage 0's message taken for another; ");
}

// Each stage's passes are the planner's schedule, its calls one before each
// pass and one after the last, its sends and recvs the planner's traffic
// formula's count, and the stages' calls complete in any
// interleaving: on 2 to 6 stages, with fewer, as many and more micro-batches than stages.
TEST(PipelineTransfers, EveryStageCompletesAndEachMessageMeetsItsMatch) {
  for (PipelineSchedule schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    for (int64_t pp = 2; pp <= 6; ++pp) {
      for (int64_t m : {int64_t{1}, pp - 1, pp, 2 * pp + 1}) {
        if (m < 1) continue;
        const std::string what = std::string(enum_name(schedule)) + " pp " + std::to_string(pp) + " m " + std::to_string(m);
        for (int64_t s = 0; s < pp; ++s) {
          const StageTransfers t = stage_transfers(schedule, pp, s, m);
          ASSERT_EQ(t.passes.size(), static_cast<size_t>(2 * m)) << what;
          ASSERT_EQ(t.transfers.size(), t.passes.size() + 1) << what;
          const auto planned = planner::stage_schedule(schedule, pp, s, m);
          for (size_t i = 0; i < planned.size(); ++i) {
            EXPECT_EQ(t.passes[i].micro_batch, planned[i].micro_batch) << what;
            EXPECT_EQ(t.passes[i].pass, planned[i].pass) << what;
            const bool forward = planned[i].pass == planner::PipelinePass::forward;
            // Its input: an activation from the previous stage, or its output's gradient from the next.
            const PipelineMessage& in = t.transfers[i].recv;
            EXPECT_EQ(in.present(), forward ? s > 0 : s < pp - 1) << what;
            if (in.present()) {
              EXPECT_EQ(in.peer, forward ? s - 1 : s + 1) << what;
              EXPECT_TRUE(same(in, PipelineMessage{0, planned[i].micro_batch, !forward})) << what;
            }
            // Its output goes with the next call.
            const PipelineMessage& out = t.transfers[i + 1].send;
            EXPECT_EQ(out.present(), forward ? s < pp - 1 : s > 0) << what;
            if (out.present()) {
              EXPECT_EQ(out.peer, forward ? s + 1 : s - 1) << what;
              EXPECT_TRUE(same(out, PipelineMessage{0, planned[i].micro_batch, !forward})) << what;
            }
          }
          EXPECT_FALSE(t.transfers.front().send.present()) << what;
          EXPECT_FALSE(t.transfers.back().recv.present()) << what;
          // As many sends and recvs as the planner's traffic counts (planner/pp_traffic.h), each of one boundary.
          int64_t sends = 0, recvs = 0;
          for (const PipelineTransfer& call : t.transfers) {
            sends += call.send.present() ? 1 : 0;
            recvs += call.recv.present() ? 1 : 0;
          }
          const planner::CollectiveCalls planned_sends = planner::stage_sends_per_step(pp, s, 1, m, 1);
          EXPECT_EQ(sends, planned_sends.calls) << what;
          EXPECT_EQ(recvs, planned_sends.calls) << what;
        }
        EXPECT_EQ(replay(every_stage(schedule, pp, m)), "") << what;
      }
    }
  }
}

// 1F1B on 4 stages over 6 micro-batches, stage 1: two warm-up forwards, then
// one forward and one backward in turn (Narayanan et al. 2021, §2.2.1), the
// activation of the next forward received with the gradient sent back.
TEST(PipelineTransfers, OneForwardOneBackwardOnAMiddleStage) {
  const StageTransfers t = stage_transfers(PipelineSchedule::one_f_one_b, 4, 1, 6);
  std::string order;
  for (const planner::PipelineOp& op : t.passes) order += (op.pass == planner::PipelinePass::forward ? "F" : "B") + std::to_string(op.micro_batch) + " ";
  EXPECT_EQ(order, "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5 ");
  // Before B0: F2's activation to stage 2 with B0's gradient from it; before F3: B0's gradient to stage 0 with F3's activation from it.
  EXPECT_EQ(t.transfers[3].send.peer, 2);
  EXPECT_FALSE(t.transfers[3].send.gradient);
  EXPECT_EQ(t.transfers[3].recv.peer, 2);
  EXPECT_TRUE(t.transfers[3].recv.gradient);
  EXPECT_EQ(t.transfers[4].send.peer, 0);
  EXPECT_TRUE(t.transfers[4].send.gradient);
  EXPECT_EQ(t.transfers[4].recv.peer, 0);
  EXPECT_EQ(t.transfers[4].recv.micro_batch, 3);
  EXPECT_EQ(t.transfers.back().send.micro_batch, 5);  // B5's gradient after the last pass
}

constexpr int64_t B = 3, T = 7;

planner::EstimateRequest pipeline_request(int64_t tp, int64_t pp, int64_t m, PipelineSchedule schedule, planner::RecomputeMode mode) {
  planner::EstimateRequest request;
  request.plugin.kind = planner::PluginKind::hybrid_parallel;
  request.plugin.pp_schedule = schedule;
  request.layout = planner::ParallelLayout{1, tp, pp, false};
  request.training.activation_profile = planner::ActivationProfile::tessera_gpu;
  request.training.recompute = mode;
  request.training.precision = planner::Precision::bf16;
  request.training.micro_batch_size = B;
  request.training.seq_len = T;
  request.training.num_micro_batches = m;
  request.plugin.gradient_as_bucket_view = true;  // as the GPU step runs DDP
  request.plugin.rank_order_reduction = true;
  return request;
}

int64_t aligned(const std::vector<ActivationBuffer>& buffers, MemoryCategory category, int64_t align) {
  int64_t total = 0;
  for (const ActivationBuffer& b : buffers) {
    if (b.category == category) total += (b.bytes + align - 1) / align * align;
  }
  return total;
}

// A stage's buffers on a fake device, its schedule replayed pass by pass
// (begin at each forward, end at each backward, as the GPU step does): the
// passes in flight at the peak are the planner's (in_flight_at_peak), and the
// ledger's peaks per category are the planner's estimate for that stage, each
// buffer rounded to the allocator's 512 bytes; the point-to-point buffers are
// the planner's comm_buffers, beside the tied embedding's sum on the end stages. GPT-2 and the Llama layout (3 blocks) on 2 and 3
// stages (1 + 2 blocks; 1 each), on one tp rank and over 3 and 2 (the pipeline
// with tensor parallelism), 5 micro-batches, GPipe and 1F1B, every recompute mode.
TEST(PipelineTransfers, StageBuffersBookThePlannersStageEstimate) {
  constexpr int64_t MiB = int64_t{1} << 20, m = 5;
  for (const auto& [json, tp] : {std::pair{testing::kAwkwardGpt2, int64_t{1}}, std::pair{testing::kAwkwardGpt2, int64_t{3}},
                                 std::pair{testing::kAwkwardLlama, int64_t{1}}, std::pair{testing::kAwkwardLlama, int64_t{2}}}) {
    const planner::Model model = testing::awkward_model(json);
    const planner::ActivationTable table = planner::activation_table(model.config, planner::ActivationProfile::tessera_gpu, planner::Precision::bf16);
    const int L = static_cast<int>(model.config.num_layers);
    for (int64_t pp : {2, 3}) {
      for (PipelineSchedule schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
        for (planner::RecomputeMode mode : {planner::RecomputeMode::none, planner::RecomputeMode::selective, planner::RecomputeMode::full}) {
          const planner::EstimateRequest request = pipeline_request(tp, pp, m, schedule, mode);
          auto estimate = planner::estimate_memory(model, planner::load_gpu("h100-80g").value(), request);
          ASSERT_TRUE(estimate.ok()) << estimate.error().message;
          const std::vector<planner::StageLayers> layers = planner::split_layers(L, static_cast<int>(pp));
          const ActivationBuffers layout = activation_buffers(table, planner::ActivationShape{B, T, tp, false}, mode);
          for (int64_t s = 0; s < pp; ++s) {
            const std::string what = model.config.model_type + " " + std::string(enum_name(schedule)) + " tp " + std::to_string(tp) + " pp " +
                                     std::to_string(pp) + " stage " +
                                     std::to_string(s) + " recompute " + std::string(enum_name(mode));
            const planner::RankMemory* row = nullptr;
            for (const planner::RankMemory& r : estimate->ranks) {
              if (r.first_stage <= s && s <= r.last_stage) row = &r;
            }
            ASSERT_NE(row, nullptr) << what;
            const bool first = s == 0, last = s == pp - 1;
            testing::FakeMemory device(64 * MiB);
            testing::FakeEvents events;
            MemoryLedger ledger;
            CachingAllocator allocator(device, events, ledger);
            const StageBoundaries boundaries(allocator, B * T * model.config.hidden_size * 2, first, last);
            StepActivations step(allocator, layout, L, layers[static_cast<size_t>(s)], first, last);
            size_t most = 0;
            for (const planner::PipelineOp& op : stage_transfers(schedule, pp, s, m).passes) {
              if (op.pass == planner::PipelinePass::forward) {
                step.begin_pass(op.micro_batch);
                most = std::max(most, step.passes_in_flight());
              } else {
                step.use_pass(op.micro_batch);
                step.end_pass(op.micro_batch);
              }
            }
            EXPECT_EQ(step.passes_in_flight(), 0u) << what;
            EXPECT_EQ(static_cast<int64_t>(most), row->in_flight_micro_batches) << what;
            // The planner's bytes, unrounded, from the same terms: the passes in flight, the working set, backward's scratch.
            const int64_t blocks = layers[static_cast<size_t>(s)].num_layers;
            const auto stage_bytes = [&](MemoryCategory c, int64_t align) {
              int64_t pass = blocks * aligned(layout.kept, c, align) + (first ? aligned(layout.first_stage, c, align) : 0) +
                             (last ? aligned(layout.last_stage, c, align) + aligned(layout.logits, c, align) : 0);
              return static_cast<int64_t>(most) * pass + (blocks > 0 ? aligned(layout.working, c, align) : 0) + aligned(layout.scratch, c, align);
            };
            for (MemoryCategory c : {MemoryCategory::activations, MemoryCategory::logits}) {
              EXPECT_EQ(stage_bytes(c, 1), row->bytes[c].device) << what << " " << to_string(c);
              EXPECT_EQ(ledger.peak(c, MemorySpace::device), stage_bytes(c, CachingAllocator::kBlockAlign)) << what << " " << to_string(c);
            }
            // The planner's comm_buffers (one tp rank): the boundary buffers, and on the end stages the tied embedding's sum
            // (its ⌈V/tp⌉ · h bf16 over the 2 stages, in rank order: one piece, under a bucket); the
            // tensor-parallel sums' scratch besides under tp (ctest -R TheEnginesTensorParallelSums).
            const int64_t buffers = (first ? 0 : 2) + (last ? 0 : 2), boundary = B * T * model.config.hidden_size * 2;
            const int64_t tied =
                model.config.tie_word_embeddings && (first || last) ? (model.config.vocab_size + tp - 1) / tp * model.config.hidden_size : 0;
            const int64_t tp_sums = tp > 1 ? (B * T * model.config.hidden_size + tp - 1) / tp * tp * 2 : 0;
            EXPECT_EQ(row->bytes[MemoryCategory::comm_buffers].device, buffers * boundary + (tied + 1) / 2 * 2 * 2 + tp_sums) << what;
            const int64_t align = CachingAllocator::kBlockAlign;
            EXPECT_EQ(ledger.current(MemoryCategory::comm_buffers, MemorySpace::device), buffers * ((boundary + align - 1) / align * align)) << what;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessera::engine
