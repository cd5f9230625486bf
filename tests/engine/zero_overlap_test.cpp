// ZeRO's overlapped reduction (parallel/zero_overlap.h), the host logic the
// CPU engine's low_level_zero and the GPU step share, run without other
// ranks: one rank of dp at a time, over a fake group whose started
// reduce-scatters complete only when waited for (the slowest network there
// is) and that refuses to see a bucket change while its reduction is in
// flight. Each rank's reduced gradient shard must equal, bit for bit, what
// the CPU engine's blocking ZeRO computed before the overlap (one bucket,
// each flush or piece reduced before backward goes on), on awkward sizes:
// models whose shards end inside parameters, dp 2, 3 and 4, buckets from the
// largest layer to just under the model, several micro-batches.
// tests/parallel/data_parallel_test.cpp runs the same logic inside the CPU
// engine on 2 and 4 MPI ranks.
#include "tessera/engine/parallel/zero_overlap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tessera/engine/comm/ordered_reduce.h"
#include "tessera/engine/parallel/zero_host_memory.h"
#include "tessera/planner/model.h"

namespace tessera::engine {
namespace {

using comm::DataType;
using comm::ReduceOp;

// Rank q's copy of an element this rank holds as v: the fake's stand-in for
// the other ranks' gradients, rank-dependent so that the rank-order sum
// differs from any other order's.
bf16 contribution(int q, bf16 v) { return narrow<bf16>(widen(v) * (1.0f + 0.375f * static_cast<float>(q)) + 1e-3f * static_cast<float>(q)); }

// One rank of `dp`. A reduce-scatter's result is the rank-order sum
// (reduce_in_rank_order, every backend's arithmetic) of each rank's
// contribution; a started one is computed when it is waited for, from the
// bucket as it is then, which must be as it was when the call started.
class FakeGroup final : public comm::Communicator {
 public:
  FakeGroup(int rank, int size) : Communicator(rank, size, rank, "fake") {}
  int violations = 0;          // buckets changed while their reduction was in flight
  size_t most_in_flight = 0;   // the most started calls pending at once

 private:
  class Pending final : public PendingCall {
   public:
    Pending(FakeGroup& group, const void* send, void* recv, std::vector<size_t> counts)
        : group_(group), send_(send), recv_(recv), counts_(std::move(counts)) {
      size_t total = 0;
      for (const size_t c : counts_) total += c;
      snapshot_.resize(total * sizeof(bf16));
      std::memcpy(snapshot_.data(), send_, snapshot_.size());
    }
    Result<bool> test() override { return false; }
    Status wait() override {
      if (std::memcmp(snapshot_.data(), send_, snapshot_.size()) != 0) ++group_.violations;
      group_.reduce(send_, recv_, counts_);
      return Status::success();
    }

   private:
    FakeGroup& group_;
    const void* send_;
    void* recv_;
    std::vector<size_t> counts_;
    std::vector<unsigned char> snapshot_;
  };

  void reduce(const void* send, void* recv, const std::vector<size_t>& counts) {
    size_t before = 0;
    for (int r = 0; r < rank(); ++r) before += counts[static_cast<size_t>(r)];
    const size_t mine = counts[static_cast<size_t>(rank())];
    const bf16* in = static_cast<const bf16*>(send) + before;
    std::vector<bf16> slices(mine * static_cast<size_t>(size()));
    for (int q = 0; q < size(); ++q) {
      for (size_t j = 0; j < mine; ++j) slices[static_cast<size_t>(q) * mine + j] = contribution(q, in[j]);
    }
    comm::reduce_in_rank_order(recv, slices.data(), size(), mine, DataType::bf16, ReduceOp::sum);
  }

  Status do_reduce_scatter(const void* send, void* recv, size_t recv_count, DataType, ReduceOp) override {
    reduce(send, recv, std::vector<size_t>(static_cast<size_t>(size()), recv_count));
    return Status::success();
  }
  Status do_reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& counts, DataType, ReduceOp) override {
    reduce(send, recv, counts);
    return Status::success();
  }
  Result<std::unique_ptr<PendingCall>> do_start_reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& counts, DataType,
                                                                 ReduceOp) override {
    most_in_flight = std::max(most_in_flight, started_calls() + 1);
    return std::unique_ptr<PendingCall>(std::make_unique<Pending>(*this, send, recv, counts));
  }
  static Status unused() { return make_error(ErrorCode::unsupported, "not used by ZeRO's reduction"); }
  Status do_all_reduce(const void*, void*, size_t, DataType, ReduceOp) override { return unused(); }
  Status do_all_gather(const void*, void*, size_t, DataType) override { return unused(); }
  Status do_broadcast(const void*, void*, size_t, DataType, int) override { return unused(); }
  Status do_send(const void*, size_t, DataType, int, int) override { return unused(); }
  Status do_recv(void*, size_t, DataType, int, int) override { return unused(); }
  Status do_barrier() override { return unused(); }
  Result<std::unique_ptr<Communicator>> do_split(int, int, std::string) override { return unused().error(); }
};

// GPT-2s whose sizes divide by nothing in particular; the first ties its head to the embedding.
planner::Model awkward_gpt2(int vocab, int width, int layers, int heads, int positions, bool tied) {
  const std::string json = "{\"model_type\":\"gpt2\",\"vocab_size\":" + std::to_string(vocab) + ",\"n_embd\":" + std::to_string(width) +
                           ",\"n_layer\":" + std::to_string(layers) + ",\"n_head\":" + std::to_string(heads) + ",\"n_positions\":" +
                           std::to_string(positions) + ",\"tie_word_embeddings\":" + (tied ? "true" : "false") + "}";
  auto config = planner::parse_model_config(json, "awkward");
  EXPECT_TRUE(config.ok()) << config.error().message;
  return planner::make_model(config.value());
}

// What backward adds to element `flat` when `layer` runs in micro-batch
// `micro` on `rank`: varied, of both signs, exactly representable or not.
float gradient(int64_t flat, int layer, int micro, int rank) {
  return std::sin(0.37f * static_cast<float>(flat) + 1.3f * static_cast<float>(layer) + 0.71f * static_cast<float>(micro) + static_cast<float>(rank)) *
         (1.0f + 0.01f * static_cast<float>(flat % 97));
}

struct Backward {
  const planner::Model& model;
  std::vector<planner::FlatParameter> order = planner::flat_parameter_order(model.inventory);
  std::vector<std::vector<int>> by_layer = planner::parameters_by_layer(model.inventory);
  int top() const { return static_cast<int>(model.config.num_layers); }
};

// ZeRO-2 with buckets smaller than the model, `micro` backward passes: this
// rank's gradient shard through the overlapped buckets, and through one
// bucket reduced before backward goes on (the CPU engine's blocking flush).
void expect_stage2_matches_blocking(const planner::Model& model, int64_t dp, int64_t rank, int64_t bucket_request, int micro_batches) {
  const Backward backward{model};
  const planner::ZeroReduceBuckets buckets = planner::zero_reduce_buckets(model.inventory, 2, bucket_request, dp);
  ASSERT_TRUE(buckets.overlapped()) << "the bucket is not smaller than the model";
  const int64_t shard = planner::shard_numel(model.parameter_count, dp);
  const std::string what = "dp " + std::to_string(dp) + ", rank " + std::to_string(rank) + ", bucket " + std::to_string(buckets.numel);

  // Overlapped.
  FakeGroup group(static_cast<int>(rank), static_cast<int>(dp));
  std::vector<bf16> bucket_memory(static_cast<size_t>(buckets.total_numel()));
  std::vector<bf16> overlapped(static_cast<size_t>(shard), bf16{});
  HostZeroMemory<bf16> memory(nullptr, overlapped.data(), shard, dp, rank);
  OverlappedZero2 zero2(group, DataType::bf16, bucket_memory.data(), memory, model.inventory, backward.order, buckets.numel);
  bool overlapped_a_layer = false;
  for (int micro = 0; micro < micro_batches; ++micro) {
    for (int layer = backward.top(); layer >= planner::kEmbeddingLayer; --layer) {
      auto bound = zero2.before_backward(layer);
      ASSERT_TRUE(bound.ok()) << bound.error().message;
      overlapped_a_layer |= zero2.in_flight() > 0;  // a reduction runs while this layer's backward does
      for (const BoundGradient& b : bound.value()) {
        const planner::FlatParameter& p = backward.order[static_cast<size_t>(b.parameter)];
        auto* g = static_cast<bf16*>(b.gradient);
        for (int64_t j = 0; j < p.numel; ++j) g[j] = narrow<bf16>(widen(g[j]) + gradient(p.offset + j, layer, micro, static_cast<int>(rank)));
      }
    }
    ASSERT_TRUE(zero2.end_backward().ok()) << what;
    ASSERT_EQ(zero2.in_flight(), 0u);
  }
  EXPECT_EQ(group.violations, 0) << what << ": a bucket changed while its reduce-scatter was in flight";
  EXPECT_TRUE(overlapped_a_layer) << what << ": no layer's backward ran beside a reduction";
  EXPECT_LE(group.most_in_flight, 2 * backward.order.size()) << what;

  // Blocking: one bucket (Zero2Bucket), flushed through reduce_scatter_v when full.
  FakeGroup blocking_group(static_cast<int>(rank), static_cast<int>(dp));
  std::vector<bf16> bucket(static_cast<size_t>(buckets.numel));
  std::vector<bf16> reference(static_cast<size_t>(shard), bf16{});
  HostZeroMemory<bf16> reference_memory(nullptr, reference.data(), shard, dp, rank);
  Zero2Bucket book(model.inventory, backward.order, buckets.numel, dp, rank);
  const auto flush = [&] {
    for (const Zero2Run& run : book.flush()) {
      ASSERT_TRUE(blocking_group.reduce_scatter_v(bucket.data() + run.bucket_offset, bucket.data() + run.mine_in_bucket, run.counts, DataType::bf16,
                                                  ReduceOp::sum)
                      .ok());
      ASSERT_TRUE(reference_memory.add_into_shard(run.mine_in_shard, bucket.data() + run.mine_in_bucket, run.mine_numel).ok());
    }
  };
  for (int micro = 0; micro < micro_batches; ++micro) {
    for (int layer = backward.top(); layer >= planner::kEmbeddingLayer; --layer) {
      if (book.needs_flush(layer)) flush();
      for (const Zero2Placement& placed : book.place(layer)) {
        const planner::FlatParameter& p = backward.order[static_cast<size_t>(placed.parameter)];
        for (int64_t j = 0; j < p.numel; ++j) {
          bucket[static_cast<size_t>(placed.bucket_offset + j)] = narrow<bf16>(widen(bf16{}) + gradient(p.offset + j, layer, micro, static_cast<int>(rank)));
        }
      }
    }
    flush();
  }
  EXPECT_EQ(group.counters().calls_of(comm::Collective::reduce_scatter), blocking_group.counters().calls_of(comm::Collective::reduce_scatter)) << what;
  EXPECT_EQ(group.counters().bytes_of(comm::Collective::reduce_scatter), blocking_group.counters().bytes_of(comm::Collective::reduce_scatter)) << what;
  ASSERT_EQ(std::memcmp(overlapped.data(), reference.data(), overlapped.size() * sizeof(bf16)), 0) << what << ": the shards differ";
}

TEST(ZeroOverlap, Stage2EqualsTheBlockingFlushBitForBit) {
  const planner::Model tied = awkward_gpt2(67, 12, 3, 3, 5, true);
  const planner::Model untied = awkward_gpt2(53, 10, 2, 2, 7, false);
  for (const planner::Model* model : {&tied, &untied}) {
    const int64_t params = model->parameter_count;
    for (const int64_t dp : {2, 3, 4}) {
      // The largest layer, a third of the model, and just under the padded model.
      for (const int64_t bucket : {int64_t{1}, params / 3, planner::padded_flat_numel(params, dp) - dp}) {
        for (int64_t rank = 0; rank < dp; ++rank) expect_stage2_matches_blocking(*model, dp, rank, bucket, rank == 1 ? 3 : 1);
      }
    }
  }
}

// ZeRO-1 with several pieces: the full gradients accumulate over the
// micro-batches; in the last backward each piece starts once backward has
// completed it. This rank's shard of the full gradients must equal the
// blocking reduction's after backward (the CPU engine's former reduce_stage1).
void expect_stage1_matches_blocking(const planner::Model& model, int64_t dp, int64_t rank, int64_t bucket_request, int micro_batches) {
  const Backward backward{model};
  const planner::ZeroReduceBuckets buckets = planner::zero_reduce_buckets(model.inventory, 1, bucket_request, dp);
  ASSERT_TRUE(buckets.overlapped()) << "one piece";
  const int64_t shard = planner::shard_numel(model.parameter_count, dp), padded = planner::padded_flat_numel(model.parameter_count, dp);
  const std::string what = "dp " + std::to_string(dp) + ", rank " + std::to_string(rank) + ", bucket " + std::to_string(buckets.numel);
  const auto run_backward = [&](std::vector<bf16>& full, int micro, OverlappedZero1* zero1, bool& overlapped) {
    for (int layer = backward.top(); layer >= planner::kEmbeddingLayer; --layer) {
      for (const int parameter : backward.by_layer[static_cast<size_t>(layer + 1)]) {
        const planner::FlatParameter& p = backward.order[static_cast<size_t>(parameter)];
        for (int64_t j = 0; j < p.numel; ++j) {
          bf16& g = full[static_cast<size_t>(p.offset + j)];
          g = narrow<bf16>(widen(g) + gradient(p.offset + j, layer, micro, static_cast<int>(rank)));
        }
      }
      if (zero1 != nullptr) {
        ASSERT_TRUE(zero1->after_backward(layer).ok());
        overlapped |= layer != planner::kEmbeddingLayer && zero1->in_flight() > 0;
      }
    }
  };

  FakeGroup group(static_cast<int>(rank), static_cast<int>(dp));
  std::vector<bf16> full(static_cast<size_t>(padded), bf16{}), bucket_memory(static_cast<size_t>(buckets.total_numel()));
  HostZeroMemory<bf16> memory(full.data(), nullptr, shard, dp, rank);
  OverlappedZero1 zero1(group, DataType::bf16, bucket_memory.data(), buckets.count, memory,
                        BackwardCompletion(model.inventory, backward.order, model.parameter_count), shard, buckets.numel);
  bool overlapped = false;
  for (int micro = 0; micro < micro_batches; ++micro) run_backward(full, micro, micro + 1 == micro_batches ? &zero1 : nullptr, overlapped);
  ASSERT_TRUE(zero1.finish().ok()) << what;
  EXPECT_EQ(group.violations, 0) << what << ": a bucket changed while its reduce-scatter was in flight";
  EXPECT_TRUE(overlapped) << what << ": no piece was reduced during backward";
  EXPECT_LE(group.most_in_flight, 2u) << what;

  FakeGroup blocking_group(static_cast<int>(rank), static_cast<int>(dp));
  std::vector<bf16> reference(static_cast<size_t>(padded), bf16{}), bucket(static_cast<size_t>(buckets.numel));
  bool unused = false;
  for (int micro = 0; micro < micro_batches; ++micro) run_backward(reference, micro, nullptr, unused);
  for (const Zero1Piece& piece : zero1_pieces(shard, buckets.numel, dp)) {
    const int64_t n = piece.numel;
    for (int64_t r = 0; r < dp; ++r) std::copy_n(reference.begin() + r * shard + piece.begin, n, bucket.begin() + r * n);
    ASSERT_TRUE(blocking_group.reduce_scatter(bucket.data(), bucket.data() + rank * n, static_cast<size_t>(n), ReduceOp::sum).ok());
    std::copy_n(bucket.begin() + rank * n, n, reference.begin() + rank * shard + piece.begin);
  }
  EXPECT_EQ(group.counters().bytes_of(comm::Collective::reduce_scatter), blocking_group.counters().bytes_of(comm::Collective::reduce_scatter)) << what;
  ASSERT_EQ(std::memcmp(full.data() + rank * shard, reference.data() + rank * shard, static_cast<size_t>(shard) * sizeof(bf16)), 0)
      << what << ": the shards differ";
}

TEST(ZeroOverlap, Stage1EqualsTheBlockingPiecesBitForBit) {
  const planner::Model tied = awkward_gpt2(67, 12, 3, 3, 5, true);
  const planner::Model untied = awkward_gpt2(53, 10, 2, 2, 7, false);
  for (const planner::Model* model : {&tied, &untied}) {
    const int64_t params = model->parameter_count;
    for (const int64_t dp : {2, 3, 4}) {
      // Pieces of 7 elements (bucket 7 · dp), a fifth of a shard, and just under a shard.
      for (const int64_t bucket : {7 * dp, params / 5, planner::padded_flat_numel(params, dp) - dp}) {
        for (int64_t rank = 0; rank < dp; ++rank) expect_stage1_matches_blocking(*model, dp, rank, bucket, rank == 0 ? 2 : 1);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::engine
