#include "tessera/engine/parallel/rank_reports.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "tessera/engine/shard_values.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::engine {
namespace {

constexpr size_t kPeakValues = 2 * kNumMemoryCategories + 2;

Result<std::vector<double>> gather(comm::Communicator& group, const std::vector<double>& mine) {
  std::vector<double> all(mine.size() * static_cast<size_t>(group.size()));
  if (Status s = group.all_gather(mine.data(), all.data(), mine.size(), comm::DataType::f64); !s) return s.error();
  return all;
}

}  // namespace

Result<bool> all_ranks_agree(comm::Communicator& group, bool ok) {
  double failed = ok ? 0.0 : 1.0;
  if (group.size() > 1) {
    if (Status s = group.all_reduce(&failed, &failed, 1, comm::DataType::f64, comm::ReduceOp::max); !s) return s.error();
  }
  return failed == 0.0;
}

RankPeaks rank_peaks(const MemoryLedger& ledger) {
  RankPeaks r;
  for (MemoryCategory c : kAllMemoryCategories) {
    for (MemorySpace space : {MemorySpace::device, MemorySpace::host}) r.peaks.add(c, space, ledger.peak(c, space));
  }
  r.total = SpaceBytes{ledger.peak_total(MemorySpace::device), ledger.peak_total(MemorySpace::host)};
  return r;
}

Result<std::vector<RankPeaks>> gather_rank_peaks(comm::Communicator& group, const MemoryLedger& ledger) {
  const RankPeaks own = rank_peaks(ledger);
  std::vector<double> mine;
  for (MemoryCategory c : kAllMemoryCategories) {
    mine.push_back(static_cast<double>(own.peaks[c].device));
    mine.push_back(static_cast<double>(own.peaks[c].host));
  }
  mine.push_back(static_cast<double>(own.total.device));
  mine.push_back(static_cast<double>(own.total.host));
  auto all = gather(group, mine);
  if (!all) return all.error();
  std::vector<RankPeaks> ranks(static_cast<size_t>(group.size()));
  for (size_t r = 0; r < ranks.size(); ++r) {
    const double* v = all->data() + r * kPeakValues;
    for (MemoryCategory c : kAllMemoryCategories) {
      const auto i = 2 * static_cast<size_t>(c);
      ranks[r].peaks.add(c, MemorySpace::device, static_cast<int64_t>(v[i]));
      ranks[r].peaks.add(c, MemorySpace::host, static_cast<int64_t>(v[i + 1]));
    }
    ranks[r].total = SpaceBytes{static_cast<int64_t>(v[kPeakValues - 2]), static_cast<int64_t>(v[kPeakValues - 1])};
  }
  return ranks;
}

Result<std::vector<FileDigest>> gather_shard_digests(comm::Communicator& group, const FileDigest& digest) {
  const double crc = digest.crc32.empty() ? 0.0 : static_cast<double>(std::strtoul(digest.crc32.c_str(), nullptr, 16));
  auto all = gather(group, {static_cast<double>(digest.bytes), crc});
  if (!all) return all.error();
  std::vector<FileDigest> digests;
  for (size_t r = 0; r < static_cast<size_t>(group.size()); ++r) {
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08lx", static_cast<unsigned long>((*all)[2 * r + 1]));
    digests.push_back({static_cast<int64_t>((*all)[2 * r]), hex});
  }
  return digests;
}

// Each event travels as six doubles (kind, lane, micro-batch, start,
// duration, bytes): first every rank's count, then rank by rank to rank 0.
Result<std::vector<std::vector<TimelineEvent>>> gather_timelines(comm::Communicator& group, const Timeline& timeline) {
  constexpr size_t kValues = 6;
  std::vector<double> mine;
  for (const TimelineEvent& e : timeline.events()) {
    mine.insert(mine.end(), {static_cast<double>(e.kind), static_cast<double>(e.lane), static_cast<double>(e.micro_batch), e.start_s, e.duration_s,
                             static_cast<double>(e.bytes)});
  }
  double count = static_cast<double>(timeline.events().size());
  std::vector<double> counts(static_cast<size_t>(group.size()));
  if (Status s = group.all_gather(&count, counts.data(), 1, comm::DataType::f64); !s) return s.error();
  if (group.rank() != 0) {
    if (Status s = group.send(mine.data(), mine.size(), comm::DataType::f64, 0); !s) return s.error();
    return std::vector<std::vector<TimelineEvent>>{};
  }
  std::vector<std::vector<TimelineEvent>> timelines;
  std::vector<double> values;
  for (int r = 0; r < group.size(); ++r) {
    values = r == 0 ? mine : std::vector<double>(static_cast<size_t>(counts[static_cast<size_t>(r)]) * kValues);
    if (r > 0) {
      if (Status s = group.recv(values.data(), values.size(), comm::DataType::f64, r); !s) return s.error();
    }
    std::vector<TimelineEvent>& events = timelines.emplace_back();
    for (size_t i = 0; i + kValues <= values.size(); i += kValues) {
      events.push_back({static_cast<TimelineKind>(values[i]), static_cast<TimelineLane>(values[i + 1]), static_cast<int64_t>(values[i + 2]),
                        values[i + 3], values[i + 4], static_cast<int64_t>(values[i + 5])});
    }
  }
  return timelines;
}

// Rank by rank, so that rank 0 holds one other shard at a time: save-time host
// memory of rank 0, outside the training ledger.
Status gather_shard_values(comm::Communicator& group, const OptimizerShard& optimizer, const float* mine, const planner::Model& model,
                           const planner::PluginOptions& plugin, float* out) {
  if (group.rank() != 0) return group.send(mine, static_cast<size_t>(optimizer.numel()), comm::DataType::f32, 0);
  const std::vector<planner::FlatParameter> order = planner::flat_parameter_order(model.inventory);
  std::vector<float> received;
  for (int r = 0; r < group.size(); ++r) {
    const planner::OptimizerLayout layout = planner::optimizer_layout(model, plugin, group.size(), r);
    const float* shard = mine;
    if (r > 0) {
      received.resize(static_cast<size_t>(layout.shard_numel));
      if (Status s = group.recv(received.data(), received.size(), comm::DataType::f32, r); !s) return s;
      shard = received.data();
    }
    shard_values_to_flat(layout.pieces, order, shard, out);
  }
  return Status::success();
}

Status gather_tensor_parallel_parts(comm::Communicator& group, const float* mine, const planner::Model& whole, float* out) {
  const int64_t tp = group.size();
  const planner::TensorInventory part = planner::tp_rank_inventory(whole.inventory, tp);
  const std::vector<planner::FlatParameter> part_order = planner::flat_parameter_order(part);
  const std::vector<planner::FlatParameter> whole_order = planner::flat_parameter_order(whole.inventory);
  const int64_t part_numel = part.parameter_count();
  if (group.rank() != 0) return group.send(mine, static_cast<size_t>(part_numel), comm::DataType::f32, 0);
  std::vector<float> received;
  for (int r = 0; r < group.size(); ++r) {
    const float* values = mine;
    if (r > 0) {
      received.resize(static_cast<size_t>(part_numel));
      if (Status s = group.recv(received.data(), received.size(), comm::DataType::f32, r); !s) return s;
      values = received.data();
    }
    for (size_t p = 0; p < whole_order.size(); ++p) {
      const planner::TensorInfo& tensor = whole.inventory.tensors[static_cast<size_t>(whole_order[p].tensor_index)];
      if (r > 0 && tensor.tp_split == planner::TpSplit::replicated) continue;  // whole on rank 0 already
      const float* from = values + part_order[p].offset;
      float* to = out + whole_order[p].offset;
      planner::for_each_tp_element(tensor, tp, r, [&](int64_t local, int64_t full) {
        if (full >= 0) to[full] = from[local];
      });
    }
  }
  return Status::success();
}

}  // namespace tessera::engine
