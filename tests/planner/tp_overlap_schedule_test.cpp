// --tp-comm-overlap's chunk schedule (tp_overlap_schedule.h): every rank
// computes on every chunk once, each send meets the recv its peer posts for
// the same step, the traffic formula moves the plain collectives' bytes on the
// wire, and the memory term holds the schedule's send buffers.
#include <gtest/gtest.h>

#include <set>

#include "tessera/planner/activations.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/tp_overlap_schedule.h"
#include "tessera/planner/tp_traffic.h"

namespace tessera::planner {
namespace {

TEST(TpOverlapSchedule, AllGatherComputesOwnChunkFirstAndEveryChunkAsItArrives) {
  for (int64_t tp = 2; tp <= 6; ++tp) {
    for (int64_t r = 0; r < tp; ++r) {
      const std::vector<TpOverlapStep> steps = tp_overlap_all_gather_steps(tp, r);
      ASSERT_EQ(static_cast<int64_t>(steps.size()), tp);
      EXPECT_EQ(steps[0].chunk, r);
      EXPECT_EQ(steps[0].recv_from, -1);
      std::set<int64_t> chunks;
      for (size_t s = 0; s < steps.size(); ++s) {
        chunks.insert(steps[s].chunk);
        if (s == 0) continue;
        EXPECT_EQ(steps[s].recv_from, steps[s].chunk);  // a chunk comes from the rank that owns it
        // What this rank sends at step s is its own chunk, which the receiver computes on at its step s.
        const TpOverlapStep peer = tp_overlap_all_gather_steps(tp, steps[s].send_to)[s];
        EXPECT_EQ(peer.recv_from, r) << "tp " << tp << " rank " << r << " step " << s;
        EXPECT_EQ(peer.chunk, r);
      }
      EXPECT_EQ(static_cast<int64_t>(chunks.size()), tp);
    }
  }
}

TEST(TpOverlapSchedule, ReduceScatterSendsEachPartialToItsOwnerAndProducesOwnRowsLast) {
  for (int64_t tp = 2; tp <= 6; ++tp) {
    for (int64_t r = 0; r < tp; ++r) {
      const std::vector<TpOverlapStep> steps = tp_overlap_reduce_scatter_steps(tp, r);
      ASSERT_EQ(static_cast<int64_t>(steps.size()), tp);
      EXPECT_EQ(steps.back().chunk, r);
      EXPECT_EQ(steps.back().send_to, -1);
      std::set<int64_t> chunks, sources;
      for (size_t s = 0; s < steps.size(); ++s) {
        chunks.insert(steps[s].chunk);
        if (s + 1 == steps.size()) continue;
        EXPECT_EQ(steps[s].send_to, steps[s].chunk);  // rows go to the rank that keeps them
        sources.insert(steps[s].recv_from);
        const TpOverlapStep peer = tp_overlap_reduce_scatter_steps(tp, steps[s].send_to)[s];
        EXPECT_EQ(peer.recv_from, r) << "tp " << tp << " rank " << r << " step " << s;
      }
      EXPECT_EQ(static_cast<int64_t>(chunks.size()), tp);
      EXPECT_EQ(static_cast<int64_t>(sources.size()), tp - 1);  // every other rank's partial arrives once
      EXPECT_FALSE(sources.contains(r));
    }
  }
  EXPECT_EQ(tp_overlap_send_buffers(2), 1);
  EXPECT_EQ(tp_overlap_send_buffers(3), 2);
  EXPECT_EQ(tp_overlap_send_buffers(8), 2);
}

// A ring all-gather or reduce-scatter of payload P puts (tp-1)/tp · P on each
// rank's link; the chunks put (tp-1) · P/tp there: the same bytes, other calls.
TEST(TpOverlapSchedule, OverlapMovesThePlainCollectivesBytesOnTheWire) {
  const ModelConfig c = load_model("tiny-llama").value().config;
  for (int64_t tp : {2, 4}) {
    for (RecomputeMode recompute : {RecomputeMode::none, RecomputeMode::full}) {
      const TpMicroBatchTraffic plain = tp_micro_batch_traffic(c, TpStage{c.num_layers}, 2, 64, true, recompute, 2);
      const TpMicroBatchTraffic overlapped = tp_micro_batch_traffic(c, TpStage{c.num_layers}, 2, 64, true, recompute, 2, TpCommOverlap{true, tp});
      for (auto pass : {&TpMicroBatchTraffic::forward, &TpMicroBatchTraffic::backward}) {
        const TpCalls& p = plain.*pass;
        const TpCalls& o = overlapped.*pass;
        EXPECT_EQ((p.all_gather.bytes + p.reduce_scatter.bytes) * (tp - 1), (o.all_gather.bytes + o.reduce_scatter.bytes) * (tp - 1) + o.send.bytes * tp);
        EXPECT_EQ(o.send.calls, o.recv.calls);
        EXPECT_EQ(o.send.bytes, o.recv.bytes);
        EXPECT_EQ(p.all_reduce.calls, o.all_reduce.calls);
      }
      EXPECT_EQ(overlapped.forward.send.calls, 4 * c.num_layers * (tp - 1));
    }
  }
}

TEST(TpOverlapSchedule, TheEngineTableHoldsTheSendBuffersOnlyUnderOverlap) {
  const ModelConfig c = load_model("tiny-gpt2").value().config;
  const ActivationTable table = activation_table(c, ActivationProfile::tessera, Precision::bf16);
  const auto send_bytes = [&](int64_t tp, bool overlap) {
    int64_t bytes = 0;
    for (const ActivationTerm& term : table.backward_scratch) {
      if (term.split == ActivationSplit::overlap_send) bytes += term_bytes(term, ActivationShape{2, 64, tp, true, 1, overlap});
    }
    return bytes;
  };
  EXPECT_EQ(send_bytes(2, false), 0);
  EXPECT_EQ(send_bytes(2, true), 1 * (128 / 2) * c.hidden_size * 2);
  EXPECT_EQ(send_bytes(4, true), 2 * (128 / 4) * c.hidden_size * 2);
}

}  // namespace
}  // namespace tessera::planner
