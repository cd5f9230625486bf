#include "tessera/engine/parallel/rank_reports.h"

#include <cstdio>
#include <cstdlib>

namespace tessera::engine {
namespace {

constexpr size_t kPeakValues = 2 * kNumMemoryCategories + 2;

Result<std::vector<double>> gather(comm::Communicator& group, const std::vector<double>& mine) {
  std::vector<double> all(mine.size() * static_cast<size_t>(group.size()));
  if (Status s = group.all_gather(mine.data(), all.data(), mine.size(), comm::DataType::f64); !s) return s.error();
  return all;
}

}  // namespace

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

}  // namespace tessera::engine
