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
#include "tessera/planner/pipeline_stage_model.h"
#include "tessera/planner/pp_traffic.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::engine {
namespace {

using planner::PipelineSchedule;

bool same(const PipelineMessage& a, const PipelineMessage& b) { return a.micro_batch == b.micro_batch && a.gradient == b.gradient && a.boundary == b.boundary; }

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

std::vector<StageTransfers> every_stage(PipelineSchedule schedule, int64_t pp, int64_t m, int64_t chunks = 1) {
  std::vector<StageTransfers> stages;
  for (int64_t s = 0; s < pp; ++s) stages.push_back(stage_transfers(schedule, pp, s, m, chunks));
  return stages;
}

// What pass `op` of stage `s` needs from another stage first (peer -1: none),
// by the virtual stages' chain (chunk j of stage s is virtual stage j · pp + s).
PipelineMessage expected_input(const planner::PipelineOp& op, int64_t pp, int64_t s, int64_t chunks) {
  const int64_t v = op.chunk * pp + s;
  if (op.pass == planner::PipelinePass::forward) return v > 0 ? PipelineMessage{static_cast<int>((v - 1) % pp), op.micro_batch, false, v - 1} : PipelineMessage{};
  return v < pp * chunks - 1 ? PipelineMessage{static_cast<int>((v + 1) % pp), op.micro_batch, true, v} : PipelineMessage{};
}

// And what it hands on after it has run.
PipelineMessage expected_output(const planner::PipelineOp& op, int64_t pp, int64_t s, int64_t chunks) {
  const int64_t v = op.chunk * pp + s;
  if (op.pass == planner::PipelinePass::forward) {
    return v < pp * chunks - 1 ? PipelineMessage{static_cast<int>((v + 1) % pp), op.micro_batch, false, v} : PipelineMessage{};
  }
  return v > 0 ? PipelineMessage{static_cast<int>((v - 1) % pp), op.micro_batch, true, v - 1} : PipelineMessage{};
}

// The stage's calls and passes in their order against its four boundary
// buffers (device/stage_boundaries.h: one received and one to send of each
// kind): each pass finds its own input in the receive buffer and its send
// buffer free, each send takes the output waiting in its buffer, each recv
// lands in a buffer already read. What went wrong, or nothing.
std::string misuse_of_buffers(const StageTransfers& t, int64_t pp, int64_t s, int64_t chunks) {
  std::array<PipelineMessage, 2> received, written;  // by kind: activation, gradient
  std::string wrong;
  size_t made = 0;
  const auto calls_before = [&](size_t pass) {
    for (; made < t.transfers.size() && t.transfers[made].before_pass == pass; ++made) {
      const PipelineTransfer& call = t.transfers[made];
      if (call.send.present()) {
        PipelineMessage& waiting = written[call.send.gradient ? 1 : 0];
        if (!waiting.present() || waiting.peer != call.send.peer || !same(waiting, call.send)) wrong += "call " + std::to_string(made) + " sends what no pass wrote; ";
        waiting = {};
      }
      if (call.recv.present()) {
        PipelineMessage& into = received[call.recv.gradient ? 1 : 0];
        if (into.present()) wrong += "call " + std::to_string(made) + " overwrites an unread input; ";
        into = call.recv;
      }
    }
  };
  for (size_t i = 0; i < t.passes.size(); ++i) {
    calls_before(i);
    const PipelineMessage in = expected_input(t.passes[i], pp, s, chunks), out = expected_output(t.passes[i], pp, s, chunks);
    if (in.present()) {
      PipelineMessage& got = received[in.gradient ? 1 : 0];
      if (!got.present() || got.peer != in.peer || !same(got, in)) wrong += "pass " + std::to_string(i) + " lacks its input; ";
      got = {};
    }
    if (out.present()) {
      PipelineMessage& into = written[out.gradient ? 1 : 0];
      if (into.present()) wrong += "pass " + std::to_string(i) + " overwrites an unsent output; ";
      into = out;
    }
  }
  calls_before(t.passes.size());
  if (made != t.transfers.size()) wrong += "calls out of order; ";
  for (const PipelineMessage& m : {received[0], received[1], written[0], written[1]}) {
    if (m.present()) wrong += "a message left behind; ";
  }
  return wrong;
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
              EXPECT_TRUE(same(in, PipelineMessage{0, planned[i].micro_batch, !forward, forward ? s - 1 : s})) << what;
            }
            // Its output goes with the next call.
            const PipelineMessage& out = t.transfers[i + 1].send;
            EXPECT_EQ(out.present(), forward ? s < pp - 1 : s > 0) << what;
            if (out.present()) {
              EXPECT_EQ(out.peer, forward ? s + 1 : s - 1) << what;
              EXPECT_TRUE(same(out, PipelineMessage{0, planned[i].micro_batch, !forward, forward ? s : s - 1})) << what;
            }
          }
          for (size_t i = 0; i < t.transfers.size(); ++i) EXPECT_EQ(t.transfers[i].before_pass, i) << what;
          EXPECT_EQ(misuse_of_buffers(t, pp, s, 1), "") << what;
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

// The interleaved schedule on 2 to 4 stages of 2 to 4 chunks, over pp, 2·pp
// and 3·pp micro-batches (a multiple of pp, as both engines require): the
// passes are the planner's, every call carries a message, each stage's four
// buffers suffice, the sends and recvs are the planner's traffic formula's
// count, and every stage's calls complete together with each message meeting
// its match (with pp = 2 activations and gradients travel both ways between
// the same two stages).
TEST(PipelineTransfers, InterleavedStagesCompleteAndEachMessageMeetsItsMatch) {
  for (int64_t pp = 2; pp <= 4; ++pp) {
    for (int64_t chunks = 2; chunks <= 4; ++chunks) {
      for (int64_t m : {pp, 2 * pp, 3 * pp}) {
        const std::string what = "pp " + std::to_string(pp) + " chunks " + std::to_string(chunks) + " m " + std::to_string(m);
        const std::vector<StageTransfers> stages = every_stage(PipelineSchedule::interleaved, pp, m, chunks);
        for (int64_t s = 0; s < pp; ++s) {
          const StageTransfers& t = stages[static_cast<size_t>(s)];
          const auto planned = planner::stage_schedule(PipelineSchedule::interleaved, pp, s, m, chunks);
          ASSERT_EQ(t.passes.size(), planned.size()) << what;
          for (size_t i = 0; i < planned.size(); ++i) {
            EXPECT_EQ(t.passes[i].micro_batch, planned[i].micro_batch) << what;
            EXPECT_EQ(t.passes[i].pass, planned[i].pass) << what;
            EXPECT_EQ(t.passes[i].chunk, planned[i].chunk) << what;
          }
          int64_t sends = 0, recvs = 0;
          for (const PipelineTransfer& call : t.transfers) {
            EXPECT_TRUE(call.send.present() || call.recv.present()) << what;
            sends += call.send.present() ? 1 : 0;
            recvs += call.recv.present() ? 1 : 0;
          }
          EXPECT_EQ(misuse_of_buffers(t, pp, s, chunks), "") << what << " stage " << s;
          const planner::CollectiveCalls planned_sends = planner::stage_sends_per_step(pp, s, chunks, m, 1);
          EXPECT_EQ(sends, planned_sends.calls) << what;
          EXPECT_EQ(recvs, planned_sends.calls) << what;
        }
        EXPECT_EQ(replay(stages), "") << what;
      }
    }
  }
}

// Interleaved on 2 stages over 4 micro-batches, 2 chunks, stage 0: four
// warm-up forwards one by one (no call before the first: it embeds), then
// each steady-state forward with the backward after it, then the cool-down
// backwards. Before a unit, the previous unit's outputs go and this unit's
// inputs come, activations first: before pass 8 (F2.1 with B0.0) F3.0's
// activation goes to stage 1 with F2.1's coming back (chunk 0's output on
// stage 1, the wrap-around), then B1.1's gradient goes with B0.0's coming.
TEST(PipelineTransfers, InterleavedUnitsOnTheFirstOfTwoStages) {
  const StageTransfers t = stage_transfers(PipelineSchedule::interleaved, 2, 0, 4, 2);
  std::string order;
  for (const planner::PipelineOp& op : t.passes) order += (op.pass == planner::PipelinePass::forward ? "F" : "B") + std::to_string(op.micro_batch) + "." + std::to_string(op.chunk) + " ";
  EXPECT_EQ(order, "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0 ");
  std::string calls;
  for (const PipelineTransfer& call : t.transfers) {
    calls += std::to_string(call.before_pass) + ":";
    for (const PipelineMessage& m : {call.send, call.recv}) calls += m.present() ? (m.gradient ? "g" : "a") + std::to_string(m.micro_batch) : "-";
    calls += " ";
  }
  EXPECT_EQ(calls, "1:a0- 2:a1a0 3:a0a1 4:a1- 4:-g0 6:a2- 6:g0g1 8:a3a2 8:g1g0 10:a2a3 10:-g1 12:a3- 12:-g2 13:g2g3 14:g3g2 15:-g3 ");
}

// The replay sees what the kinds' order prevents: on 2 stages, stage 0
// making a unit's gradient call before its activation call.
TEST(PipelineTransfers, ReplayCatchesInterleavedKindsOutOfOrder) {
  std::vector<StageTransfers> stages = every_stage(PipelineSchedule::interleaved, 2, 4, 2);
  std::vector<PipelineTransfer>& calls = stages[0].transfers;
  size_t i = 0;
  while (i + 1 < calls.size() && !(calls[i].before_pass == calls[i + 1].before_pass && calls[i].send.present() && calls[i + 1].send.present())) ++i;
  ASSERT_LT(i + 1, calls.size());
  std::swap(calls[i], calls[i + 1]);
  EXPECT_EQ(replay(stages), "stage 0's message taken for another; stage 0's message taken for another; ");
}

// And what the units prevent: the interleaved passes paired as GPipe's and
// 1F1B's are (each pass's input with the previous pass's output) deadlock
// every stage, on 2 stages and on 3, over 2·pp micro-batches.
TEST(PipelineTransfers, ReplayCatchesInterleavedPassesPairedOneByOne) {
  for (int64_t pp : {2, 3}) {
    std::vector<StageTransfers> stages = every_stage(PipelineSchedule::interleaved, pp, 2 * pp, 2);
    std::string all_wait;
    for (int64_t s = 0; s < pp; ++s) {
      StageTransfers& t = stages[static_cast<size_t>(s)];
      t.transfers.clear();
      PipelineMessage pending;
      for (size_t i = 0; i <= t.passes.size(); ++i) {
        t.transfers.push_back({pending, i < t.passes.size() ? expected_input(t.passes[i], pp, s, 2) : PipelineMessage{}, i});
        if (i < t.passes.size()) pending = expected_output(t.passes[i], pp, s, 2);
      }
      all_wait += "stage " + std::to_string(s) + " waits forever; ";
    }
    EXPECT_EQ(replay(stages), all_wait) << "pp " << pp;
  }
}

constexpr int64_t B = 3;

// Sequences of seq_len tokens (each of the cp ranks keeping seq_len/cp of them).
planner::EstimateRequest pipeline_request(int64_t tp, int64_t pp, int64_t m, PipelineSchedule schedule, planner::RecomputeMode mode, int64_t cp,
                                          int64_t seq_len) {
  planner::EstimateRequest request;
  request.plugin.kind = planner::PluginKind::hybrid_parallel;
  request.plugin.pp_schedule = schedule;
  request.layout = planner::ParallelLayout{1, tp, pp, false, cp};
  request.training.activation_profile = planner::ActivationProfile::tessera_gpu;
  request.training.recompute = mode;
  request.training.precision = planner::Precision::bf16;
  request.training.micro_batch_size = B;
  request.training.seq_len = seq_len;
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
// ledger's peaks per category are the planner's estimate for that stage, each
// buffer rounded to the allocator's 512 bytes, the passes in flight at the
// peak per chunk the planner's (in_flight_at_peak over the chunks' passes,
// the embedding's terms in the first chunk, the head's in the last); the
// point-to-point buffers are the planner's comm_buffers (every stage's four
// under interleaving), beside the tied embedding's sum on the end stages.
// Under context parallelism (cp ranks of T tokens each, sequences of T · cp)
// every activation, boundary and sum holds this rank's T tokens of each sequence.
void expect_stage_buffers_booked(const char* json, int64_t num_layers, int64_t tp, int64_t pp, int64_t m, PipelineSchedule schedule, int64_t chunks,
                                 int64_t cp = 1, int64_t T = 7) {
  constexpr int64_t MiB = int64_t{1} << 20;
  const planner::Model model = testing::awkward_model(json, num_layers);
  const planner::ActivationTable table = planner::activation_table(model.config, planner::ActivationProfile::tessera_gpu, planner::Precision::bf16);
  const int L = static_cast<int>(num_layers);
  for (planner::RecomputeMode mode : {planner::RecomputeMode::none, planner::RecomputeMode::selective, planner::RecomputeMode::full}) {
    planner::EstimateRequest request = pipeline_request(tp, pp, m, schedule, mode, cp, T * cp);
    request.plugin.num_model_chunks = chunks;
    auto estimate = planner::estimate_memory(model, planner::load_gpu("h100-80g").value(), request);
    ASSERT_TRUE(estimate.ok()) << estimate.error().message;
    const ActivationBuffers layout = activation_buffers(table, planner::ActivationShape{B, T, tp, false, cp}, mode);
    for (int64_t s = 0; s < pp; ++s) {
      const std::string what = model.config.model_type + " " + std::string(enum_name(schedule)) + " × " + std::to_string(chunks) + " tp " +
                               std::to_string(tp) + " pp " + std::to_string(pp) + " cp " + std::to_string(cp) + " stage " + std::to_string(s) + " recompute " +
                               std::string(enum_name(mode));
      const planner::RankMemory* row = nullptr;
      for (const planner::RankMemory& r : estimate->ranks) {
        if (r.first_stage <= s && s <= r.last_stage) row = &r;
      }
      ASSERT_NE(row, nullptr) << what;
      const bool first = s == 0, last = s == pp - 1;
      const std::vector<planner::StageLayers> stage_chunks = planner::stage_chunks(L, static_cast<int>(pp), static_cast<int>(chunks))[static_cast<size_t>(s)];
      testing::FakeMemory device(64 * MiB);
      testing::FakeEvents events;
      MemoryLedger ledger;
      CachingAllocator allocator(device, events, ledger);
      const int64_t boundary = B * T * model.config.hidden_size * 2;
      const StageBoundaries boundaries(allocator, boundary, first, last, chunks);
      StepActivations step(allocator, layout, L, stage_chunks, first, last);
      for (const planner::PipelineOp& op : stage_transfers(schedule, pp, s, m, chunks).passes) {
        if (op.pass == planner::PipelinePass::forward) {
          step.begin_pass(op.chunk, op.micro_batch);
        } else {
          step.use_pass(op.chunk, op.micro_batch);
          step.end_pass(op.chunk, op.micro_batch);
        }
      }
      EXPECT_EQ(step.passes_in_flight(), 0u) << what;
      // The planner's bytes, unrounded, from the same terms: each chunk's passes in flight at the peak, the working set, backward's scratch.
      const auto stage_bytes = [&](MemoryCategory c, int64_t align) {
        std::vector<int64_t> pass_bytes, category_bytes;
        for (size_t j = 0; j < stage_chunks.size(); ++j) {
          const bool embeds = first && j == 0, head = last && j + 1 == stage_chunks.size();
          const int64_t blocks = stage_chunks[j].num_layers;
          const auto chunk_bytes = [&](MemoryCategory of) {
            return blocks * aligned(layout.kept, of, align) + (embeds ? aligned(layout.first_stage, of, align) : 0) +
                   (head ? aligned(layout.last_stage, of, align) + aligned(layout.logits, of, align) : 0);
          };
          pass_bytes.push_back(chunk_bytes(MemoryCategory::activations) + chunk_bytes(MemoryCategory::logits));
          category_bytes.push_back(chunk_bytes(c));
        }
        const std::vector<int64_t> in_flight = planner::in_flight_at_peak(schedule, pp, s, m, chunks, pass_bytes);
        int64_t held = aligned(layout.working, c, align) + aligned(layout.scratch, c, align);
        for (size_t j = 0; j < in_flight.size(); ++j) held += in_flight[j] * category_bytes[j];
        return held;
      };
      for (MemoryCategory c : {MemoryCategory::activations, MemoryCategory::logits}) {
        EXPECT_EQ(stage_bytes(c, 1), row->bytes[c].device) << what << " " << to_string(c);
        EXPECT_EQ(ledger.peak(c, MemorySpace::device), stage_bytes(c, CachingAllocator::kBlockAlign)) << what << " " << to_string(c);
      }
      // The planner's comm_buffers (one tp rank): the boundary buffers, and on the end stages the tied embedding's sum
      // (its ⌈V/tp⌉ · h bf16 over the 2 stages, in rank order: one piece, under a bucket); the
      // tensor-parallel sums' scratch besides under tp (ctest -R TheEnginesTensorParallelSums); under
      // context parallelism DDP over the stage's cp ranks, its one bucket (the whole part, under 25 MiB)
      // summed in rank order after the tied sum: the larger of the two scratches.
      const int64_t buffers = chunks > 1 ? 4 : (first ? 0 : 2) + (last ? 0 : 2);
      const int64_t tied = model.config.tie_word_embeddings && (first || last) ? (model.config.vocab_size + tp - 1) / tp * model.config.hidden_size : 0;
      const int64_t tp_sums = tp > 1 ? (B * T * model.config.hidden_size + tp - 1) / tp * tp * 2 : 0;
      const int64_t part = planner::tp_rank_model(planner::stage_model(model, planner::PipelinePlacement{pp, s, chunks}), tp).parameter_count;
      const int64_t ddp = cp > 1 ? (part + cp - 1) / cp * cp * 2 : 0;
      EXPECT_EQ(row->bytes[MemoryCategory::comm_buffers].device, buffers * boundary + std::max((tied + 1) / 2 * 2 * 2, ddp) + tp_sums) << what;
      const int64_t align = CachingAllocator::kBlockAlign;
      EXPECT_EQ(ledger.current(MemoryCategory::comm_buffers, MemorySpace::device), buffers * ((boundary + align - 1) / align * align)) << what;
    }
  }
}

// GPT-2 and the Llama layout (3 blocks) on 2 and 3 stages (1 + 2 blocks; 1
// each), on one tp rank and over 3 and 2 (the pipeline with tensor
// parallelism), 5 micro-batches, GPipe and 1F1B, every recompute mode.
TEST(PipelineTransfers, StageBuffersBookThePlannersStageEstimate) {
  for (const auto& [json, tp] : {std::pair{testing::kAwkwardGpt2, int64_t{1}}, std::pair{testing::kAwkwardGpt2, int64_t{3}},
                                 std::pair{testing::kAwkwardLlama, int64_t{1}}, std::pair{testing::kAwkwardLlama, int64_t{2}}}) {
    for (int64_t pp : {2, 3}) {
      for (PipelineSchedule schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) expect_stage_buffers_booked(json, 3, tp, pp, 5, schedule, 1);
    }
  }
}

// Interleaved: the same models with 12 blocks on 2 stages of 2 and 3 chunks
// (3 and 2 blocks a chunk) and on 3 stages of 2 chunks (2 blocks a chunk), over 2·pp micro-batches.
TEST(PipelineTransfers, InterleavedStageBuffersBookThePlannersStageEstimate) {
  for (const auto& [json, tp] : {std::pair{testing::kAwkwardGpt2, int64_t{1}}, std::pair{testing::kAwkwardLlama, int64_t{2}}}) {
    for (const auto& [pp, chunks] : {std::pair{int64_t{2}, int64_t{2}}, std::pair{int64_t{2}, int64_t{3}}, std::pair{int64_t{3}, int64_t{2}}}) {
      expect_stage_buffers_booked(json, 12, tp, pp, 2 * pp, PipelineSchedule::interleaved, chunks);
    }
  }
}

// Beside context parallelism (cp 2, sequences of 12 tokens: 6 a rank): GPT-2
// on one tp rank and the Llama layout over 2, 2 stages, GPipe, 1F1B and
// interleaved (12 blocks, 2 chunks a stage), every recompute mode; the ring's
// buffers among backward's scratch.
TEST(PipelineTransfers, ContextParallelStageBuffersBookThePlannersStageEstimate) {
  for (const auto& [json, tp] : {std::pair{testing::kAwkwardGpt2, int64_t{1}}, std::pair{testing::kAwkwardLlama, int64_t{2}}}) {
    for (PipelineSchedule schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) expect_stage_buffers_booked(json, 3, tp, 2, 5, schedule, 1, 2, 6);
    expect_stage_buffers_booked(json, 12, tp, 2, 4, PipelineSchedule::interleaved, 2, 2, 6);
  }
}

}  // namespace
}  // namespace tessera::engine
