// What the engine keeps and recomputes per recompute mode
// (model/activation_buffers.h), and the GPU step's buffers carved from a
// fake device (device/step_activations.h): against the planner's activation
// table and estimate and the CPU model's ledger, for GPT-2 and the Llama
// layout on awkward sizes (3 sequences of 7 tokens, 3 layers, a 97- and a
// 101-token vocabulary, 3 heads of 24, 6 heads of 8 on 2 K/V heads, an MLP of 136).
#include "tessera/engine/model/activation_buffers.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "awkward_models.h"
#include "fake_streams.h"
#include "tessera/engine/device/step_activations.h"
#include "tessera/engine/model/ring_buffers.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"

namespace tessera::engine {
namespace {

using planner::RecomputeMode;

constexpr int64_t B = 3, T = 7, N = B * T;
constexpr RecomputeMode kModes[] = {RecomputeMode::none, RecomputeMode::selective, RecomputeMode::full};

planner::Model model_of(const char* json) { return testing::awkward_model(json); }
const char* kGpt2 = testing::kAwkwardGpt2;
const char* kLlama = testing::kAwkwardLlama;

planner::ActivationTable table_of(const planner::Model& model, planner::ActivationProfile profile = planner::ActivationProfile::tessera) {
  return planner::activation_table(model.config, profile, planner::Precision::bf16);
}

const planner::ActivationShape kShape{B, T, 1, false};

std::set<std::string> names(const std::vector<ActivationBuffer>& buffers) {
  std::set<std::string> out;
  for (const ActivationBuffer& b : buffers) out.emplace(b.name);
  return out;
}

int64_t sum(const std::vector<ActivationBuffer>& buffers) {
  int64_t total = 0;
  for (const ActivationBuffer& b : buffers) total += b.bytes;
  return total;
}

// The GPU step's buffers for `layout` (`blocks` blocks) carved by the caching
// allocator from a fake device of 64 MiB.
struct FakeDeviceStep {
  testing::FakeMemory device{int64_t{64} << 20};
  testing::FakeEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator{device, events, ledger};
  StepActivations step;
  FakeDeviceStep(const ActivationBuffers& layout, int blocks) : step(allocator, layout, blocks) {}
  // The ledger books each buffer under its category, rounded up to the allocator's 512 bytes.
  void expect_booked(const ActivationBuffers& layout, int blocks, const std::string& what) const {
    for (MemoryCategory c : {MemoryCategory::activations, MemoryCategory::logits}) {
      EXPECT_EQ(ledger.current(c, MemorySpace::device), layout.bytes(c, blocks, CachingAllocator::kBlockAlign)) << what << " " << to_string(c);
    }
  }
};

// The planner's estimate of one bf16 rank running `model` with one of the
// engine's tables, over `tp` tensor-parallel ranks (hybrid_parallel, as the engine runs them).
// With `cp` context-parallel ranks too, seq_len is the whole sequence's.
planner::RankMemory planner_row(const planner::Model& model, planner::BlockRecompute mode, planner::ActivationProfile profile, int64_t tp = 1,
                                bool sequence_parallel = false, int64_t seq_len = T, int64_t cp = 1) {
  planner::EstimateRequest request;
  if (tp > 1 || cp > 1) {
    request.plugin.kind = planner::PluginKind::hybrid_parallel;
    request.layout = planner::ParallelLayout{1, tp, 1, sequence_parallel, cp};
  }
  request.training.activation_profile = profile;
  request.training.recompute = mode.mode;
  request.training.recompute_num_layers = mode.num_layers;
  request.training.precision = planner::Precision::bf16;
  request.training.micro_batch_size = B;
  request.training.seq_len = seq_len;
  return planner::estimate_memory(model, planner::load_gpu("h100-80g").value(), request).value().ranks.at(0);
}

TEST(ActivationBuffers, EachModeKeepsAndRecomputesTheTablesTerms) {
  for (const char* json : {kGpt2, kLlama}) {
    const planner::Model model = model_of(json);
    const planner::ActivationTable table = table_of(model);
    std::set<std::string> block;
    for (const planner::ActivationTerm& term : table.block) block.emplace(term.name);
    const std::string family = model.config.model_type;

    const ActivationBuffers none = activation_buffers(table, kShape, RecomputeMode::none);
    EXPECT_EQ(names(none.kept), block) << family;
    EXPECT_TRUE(none.working.empty()) << family;
    EXPECT_EQ(none.rerun, BlockRerun::nothing);

    // Selective: the attention core runs again from the kept q, k and v; only its fp32 log-sum-exp goes.
    const ActivationBuffers selective = activation_buffers(table, kShape, RecomputeMode::selective);
    EXPECT_EQ(names(selective.working), std::set<std::string>{"attention_lse"}) << family;
    EXPECT_EQ(sum(selective.working), N * model.config.num_heads * 4) << family;
    EXPECT_EQ(selective.kept.size() + 1, table.block.size()) << family;
    EXPECT_EQ(selective.rerun, BlockRerun::attention);

    // Full: the block's input alone, 2 bytes per hidden element; the rest is the working set.
    const ActivationBuffers full = activation_buffers(table, kShape, RecomputeMode::full);
    EXPECT_EQ(names(full.kept), std::set<std::string>{"block_input"}) << family;
    EXPECT_EQ(sum(full.kept), N * model.config.hidden_size * 2) << family;
    EXPECT_EQ(full.kept.size() + full.working.size(), table.block.size()) << family;
    EXPECT_EQ(full.rerun, BlockRerun::block);

    for (RecomputeMode mode : kModes) {
      const ActivationBuffers buffers = activation_buffers(table, kShape, mode);
      const planner::BlockActivationBytes planned = planner::block_activation_bytes(table, kShape, mode);
      EXPECT_EQ(sum(buffers.kept), planned.stash) << family << " " << enum_name(mode);
      EXPECT_EQ(sum(buffers.working), planned.working) << family << " " << enum_name(mode);
      EXPECT_EQ(sum(buffers.kept) + sum(buffers.working), sum(none.kept)) << "every term has one buffer: " << family;
      for (const ActivationBuffer& b : buffers.kept) EXPECT_EQ(b.bytes % b.bytes_per_element, 0) << b.name;
    }
  }
}

// The CPU model's ledger, the buffers' sum and the planner's estimate are
// the same bytes under each mode; the GPU step's buffers are the planner's
// `tessera_gpu` estimate, which differs from `tessera` by the bf16 logits
// (2 bytes a logit fewer) and the device copies of the tokens and targets
// (8 bytes a token more), and nothing else.
TEST(ActivationBuffers, CpuModelGpuStepAndPlannerBookTheSameBytes) {
  for (const char* json : {kGpt2, kLlama}) {
    const planner::Model model = model_of(json);
    const planner::ActivationTable table = table_of(model);
    const int64_t L = model.config.num_layers, V = model.config.vocab_size;
    // Each mode, and full recompute of the first block only (--recompute-num-layers 1).
    for (planner::BlockRecompute mode : {planner::BlockRecompute(RecomputeMode::none), planner::BlockRecompute(RecomputeMode::selective),
                                         planner::BlockRecompute(RecomputeMode::full), planner::BlockRecompute(RecomputeMode::full, 1)}) {
      const std::string what = model.config.model_type + " recompute " + std::string(enum_name(mode.mode)) + " " + std::to_string(mode.num_layers);
      const planner::RankMemory row = planner_row(model, mode, planner::ActivationProfile::tessera);
      const int64_t planned_activations = row.bytes[MemoryCategory::activations].device, planned_logits = row.bytes[MemoryCategory::logits].device;

      MemoryLedger cpu_ledger;
      auto cpu = Transformer<bf16>::create(model, cpu_ledger, B, T, 1, mode);
      ASSERT_TRUE(cpu.ok()) << cpu.error().message;
      EXPECT_EQ(cpu_ledger.current(MemoryCategory::activations, MemorySpace::device), planned_activations) << what;
      EXPECT_EQ(cpu_ledger.current(MemoryCategory::logits, MemorySpace::device), planned_logits) << what;
      const ActivationBuffers buffers = activation_buffers(table, kShape, mode);
      EXPECT_EQ(buffers.bytes(MemoryCategory::activations, L), planned_activations) << what;
      EXPECT_EQ(buffers.bytes(MemoryCategory::logits, L), planned_logits) << what;

      const ActivationBuffers gpu = activation_buffers(table_of(model, planner::ActivationProfile::tessera_gpu), kShape, mode);
      const planner::RankMemory gpu_row = planner_row(model, mode, planner::ActivationProfile::tessera_gpu);
      EXPECT_EQ(gpu.bytes(MemoryCategory::activations, L), gpu_row.bytes[MemoryCategory::activations].device) << what;
      EXPECT_EQ(gpu.bytes(MemoryCategory::logits, L), gpu_row.bytes[MemoryCategory::logits].device) << what;
      EXPECT_EQ(gpu.bytes(MemoryCategory::activations, L), planned_activations + 8 * N) << what;
      EXPECT_EQ(gpu.bytes(MemoryCategory::logits, L), planned_logits - 2 * V * N) << what;
      EXPECT_EQ(names(gpu.logits), (std::set<std::string>{"logits", "token_losses"})) << what;
      EXPECT_EQ(names(gpu.first_stage), std::set<std::string>{"tokens"}) << what;
    }
  }
}

// The GPU step's buffers from the caching allocator on a fake device: the
// ledger books each under its category, rounded up to the allocator's 512
// bytes (every buffer here is under 1 MiB, the small pool's blocks);
// recompute lowers the activations' peak; a recomputed term is one buffer
// shared by the blocks, a kept one the block's own.
TEST(StepActivations, BookTheLayoutAndShareTheWorkingSet) {
  constexpr int64_t MiB = int64_t{1} << 20;
  for (const char* json : {kGpt2, kLlama}) {
    const planner::Model model = model_of(json);
    const planner::ActivationTable table = table_of(model, planner::ActivationProfile::tessera_gpu);
    const int L = static_cast<int>(model.config.num_layers);
    int64_t peak_without = 0;
    for (RecomputeMode mode : kModes) {
      const std::string what = model.config.model_type + " recompute " + std::string(enum_name(mode));
      testing::FakeMemory device(64 * MiB);
      testing::FakeEvents events;
      MemoryLedger ledger;
      CachingAllocator allocator(device, events, ledger);
      const ActivationBuffers layout = activation_buffers(table, kShape, mode);
      {
        const StepActivations step(allocator, layout, L);
        for (MemoryCategory c : {MemoryCategory::activations, MemoryCategory::logits}) {
          EXPECT_EQ(ledger.current(c, MemorySpace::device), layout.bytes(c, L, CachingAllocator::kBlockAlign)) << what << " " << to_string(c);
        }
        for (const ActivationBuffer& b : layout.kept) {
          EXPECT_TRUE(step.keeps(0, b.name));
          EXPECT_NE(step.block(0, b.name), step.block(L - 1, b.name)) << what << ": " << b.name << " is each block's own";
        }
        for (const ActivationBuffer& b : layout.working) {
          EXPECT_FALSE(step.keeps(0, b.name));
          EXPECT_EQ(step.block(0, b.name), step.block(L - 1, b.name)) << what << ": " << b.name << " is shared";
        }
        EXPECT_NE(step.outside("tokens"), step.outside("targets"));
        EXPECT_THROW(step.block(0, "no_such_term"), std::out_of_range);
        const int64_t peak = ledger.current(MemoryCategory::activations, MemorySpace::device);
        if (mode == RecomputeMode::none) {
          peak_without = peak;
        } else {
          EXPECT_LT(peak, peak_without) << what;
        }
      }
      EXPECT_EQ(ledger.current(MemoryCategory::activations, MemorySpace::device), 0) << what << ": every block given back";
    }
  }
}

// Under tensor parallelism the GPU step's buffers (StepActivations on a fake
// device, sized by activation_buffers for tp ranks) book what the planner
// estimates for one tp rank, per category: the split layers' terms divided
// by tp, the logits' vocabulary padded to ⌈V/tp⌉ columns (97 over 3 ranks: 33 each).
TEST(StepActivations, TensorParallelRankBooksThePlannersEstimate) {
  for (const auto& [json, tp] : {std::pair{kGpt2, int64_t{3}}, std::pair{kLlama, int64_t{2}}}) {
    const planner::Model model = model_of(json);
    const planner::ActivationTable table = table_of(model, planner::ActivationProfile::tessera_gpu);
    const int L = static_cast<int>(model.config.num_layers);
    for (RecomputeMode mode : kModes) {
      const std::string what = model.config.model_type + " tp " + std::to_string(tp) + " recompute " + std::string(enum_name(mode));
      const planner::RankMemory row = planner_row(model, mode, planner::ActivationProfile::tessera_gpu, tp);
      const ActivationBuffers layout = activation_buffers(table, planner::ActivationShape{B, T, tp, false}, mode);
      for (MemoryCategory c : {MemoryCategory::activations, MemoryCategory::logits}) {
        EXPECT_EQ(layout.bytes(c, L), row.bytes[c].device) << what << " " << to_string(c);
      }
      const ActivationBuffers whole = activation_buffers(table, kShape, mode);
      EXPECT_LT(layout.bytes(MemoryCategory::activations, L), whole.bytes(MemoryCategory::activations, L)) << what;
      const int64_t V = model.config.vocab_size, columns = (V + tp - 1) / tp;
      EXPECT_EQ(whole.bytes(MemoryCategory::logits, L) - layout.bytes(MemoryCategory::logits, L), 2 * N * (V - columns)) << what;
      FakeDeviceStep(layout, L).expect_booked(layout, L, what);
    }
  }
}

// Under sequence parallelism too (the GPU step with GpuTensorParallel's
// sequence_parallel): the block's sequence terms (its input, the norms' inputs,
// outputs and statistics), the final norm's and head's inputs and backward's
// residual and narrow gradients keep N/tp tokens (3 sequences of 6 over 3 ranks: 6; Megatron
// divides the same, Korthikanti et al. 2022 §4.2.2), the split layers' terms
// their width over tp, the tokens, targets and losses all N, and the two
// whole-sequence buffers (N · h each) appear; the fake device books the planner's estimate.
TEST(StepActivations, SequenceParallelRankBooksThePlannersEstimate) {
  const planner::Model model = model_of(kGpt2);
  const int64_t tp = 3, seq = 6;  // the planner asks tp to divide the sequence (Megatron's rule), the engine only the micro-batch's tokens
  const planner::ActivationTable table = table_of(model, planner::ActivationProfile::tessera_gpu);
  const int L = static_cast<int>(model.config.num_layers);
  for (RecomputeMode mode : kModes) {
    const std::string what = "gpt2 tp 3 + sp recompute " + std::string(enum_name(mode));
    const planner::RankMemory row = planner_row(model, mode, planner::ActivationProfile::tessera_gpu, tp, true, seq);
    const ActivationBuffers sp = activation_buffers(table, planner::ActivationShape{B, seq, tp, true}, mode);
    const ActivationBuffers tp_only = activation_buffers(table, planner::ActivationShape{B, seq, tp, false}, mode);
    for (MemoryCategory c : {MemoryCategory::activations, MemoryCategory::logits}) {
      EXPECT_EQ(sp.bytes(c, L), row.bytes[c].device) << what << " " << to_string(c);
    }
    // Term by term: what the GPU step keeps N/tp rows of (its norms, residuals and their gradients) a third of tp alone's, the
    // whole-sequence buffers N · h bf16 each, everything else (the split layers', the tokens, targets, logits and losses) the same.
    const std::set<std::string> rows{"block_input",      "attn_norm_stats", "attn_norm_output", "mlp_norm_input",
                                     "mlp_norm_stats",   "mlp_norm_output", "final_norm_input", "final_norm_stats",
                                     "head_input",       "grad_residual",   "grad_narrow"};
    auto each = [](const ActivationBuffers& b) {
      std::vector<ActivationBuffer> all;
      for (const auto* list : {&b.kept, &b.working, &b.first_stage, &b.last_stage, &b.logits, &b.scratch}) all.insert(all.end(), list->begin(), list->end());
      return all;
    };
    const std::vector<ActivationBuffer> with = each(sp), without = each(tp_only);
    size_t matched = 0;
    for (const ActivationBuffer& b : with) {
      const std::string name(b.name);
      if (name == "sequence_gathered" || name == "sequence_gathered_grad") {
        EXPECT_EQ(b.bytes, B * seq * model.config.hidden_size * 2) << what << " " << name;
        continue;
      }
      for (const ActivationBuffer& other : without) {
        if (other.name != b.name) continue;
        EXPECT_EQ(b.bytes, rows.contains(name) ? other.bytes / tp : other.bytes) << what << " " << name;
        ++matched;
        break;
      }
    }
    EXPECT_EQ(matched + 2, with.size()) << what;
    const FakeDeviceStep device(sp, L);
    EXPECT_NE(device.step.outside("sequence_gathered"), nullptr) << what;
    EXPECT_NE(device.step.outside("sequence_gathered_grad"), nullptr) << what;
    device.expect_booked(sp, L, what);
  }
}

// The GPU step's buffers under tensor × context parallelism (tp 3 for GPT-2,
// 2 for the Llama layout, × cp 2; sequences of 12 tokens, 6 on each context
// rank), with and without sequence parallelism: the fake device books the
// planner's estimate of that rank, and the ring's blocks, carved from the
// ring_* terms by ring_kv_block and ring_buffers_from as the GPU step and the
// CPU model carve them, hold this tp rank's key-value heads only (2 · B · 6 ·
// kv_width/tp elements, worked by hand: GPT-2's 72/3, Llama's 16/2) and fill
// their two terms exactly; the partial output and its log-sum-exp are this rank's heads' too.
TEST(StepActivations, ContextAndTensorParallelRankBooksThePlannersEstimate) {
  constexpr int64_t S = 12, cp = 2, Tn = S / cp;
  struct Case {
    const char* json;
    int64_t tp, kv_block, partial_elements, lse_elements;
  };
  // kv_block = 2 · 3 · 6 · 24 and 2 · 3 · 6 · 8; the partial output B · Tn · q/tp = 18 · 24 and 18 · 24; its log-sum-exp 18 · heads/tp = 18 · 1 and 18 · 3.
  for (const Case& k : {Case{kGpt2, 3, 864, 432, 18}, Case{kLlama, 2, 288, 432, 54}}) {
    const planner::Model model = model_of(k.json);
    const planner::ActivationTable table = table_of(model, planner::ActivationProfile::tessera_gpu);
    const int L = static_cast<int>(model.config.num_layers);
    for (const bool sequence_parallel : {false, true}) {
      for (RecomputeMode mode : kModes) {
        const std::string what = model.config.model_type + " tp " + std::to_string(k.tp) + (sequence_parallel ? " + sp" : "") + " × cp 2 recompute " +
                                 std::string(enum_name(mode));
        const planner::RankMemory row = planner_row(model, mode, planner::ActivationProfile::tessera_gpu, k.tp, sequence_parallel, S, cp);
        const planner::ActivationShape shape{B, Tn, k.tp, sequence_parallel, cp};
        const ActivationBuffers layout = activation_buffers(table, shape, mode);
        for (MemoryCategory c : {MemoryCategory::activations, MemoryCategory::logits}) {
          EXPECT_EQ(layout.bytes(c, L), row.bytes[c].device) << what << " " << to_string(c);
        }
        const int64_t kv_block = ring_kv_block(shape, model.config.kv_width());
        EXPECT_EQ(kv_block, k.kv_block) << what;
        const auto term = [&](std::string_view name) {
          for (const ActivationBuffer& b : layout.scratch) {
            if (b.name == name) return b;
          }
          ADD_FAILURE() << what << ": no term " << name;
          return ActivationBuffer{};
        };
        EXPECT_EQ(term("ring_kv").elements(), 2 * kv_block) << what;
        EXPECT_EQ(term("ring_kv_grad").elements(), 2 * kv_block) << what;
        EXPECT_EQ(term("ring_partial").elements(), k.partial_elements) << what;
        EXPECT_EQ(term("ring_partial_lse").elements(), k.lse_elements) << what;
        EXPECT_EQ(term("ring_merged_output").elements(), k.partial_elements) << what;

        const FakeDeviceStep device(layout, L);
        device.expect_booked(layout, L, what);
        const StepActivations& step = device.step;
        const RingBuffers<bf16> ring = ring_buffers_from<bf16>(
            kv_block, [&](const char* name) { return static_cast<bf16*>(step.outside(name)); },
            [&](const char* name) { return static_cast<float*>(step.outside(name)); });
        EXPECT_EQ(ring.kv[0], step.outside("ring_kv")) << what;
        EXPECT_EQ(ring.kv[1] + kv_block, ring.kv[0] + term("ring_kv").elements()) << what << ": the second block ends where the term does";
        EXPECT_EQ(ring.kv_grad[1] + kv_block, ring.kv_grad[0] + term("ring_kv_grad").elements()) << what;
        EXPECT_NE(ring.partial, nullptr) << what;
        EXPECT_NE(ring.partial_lse, nullptr) << what;
        EXPECT_NE(ring.merged, nullptr) << what;
      }
    }
  }
  EXPECT_EQ(ring_kv_block(planner::ActivationShape{B, T, 2, false, 1}, 16), 0) << "no ring without context parallelism";
}

}  // namespace
}  // namespace tessera::engine
