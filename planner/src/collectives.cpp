// NCCL's collective cost model; described in collectives.h.
#include "tessera/planner/collectives.h"

#include <algorithm>
#include <cmath>

namespace tessera::planner {
namespace {

enum class Algorithm { tree, ring };
enum class Protocol { ll, simple };
enum class Hop { nvlink, pcie, network };

// NCCL's tuning tables (µs): baseLat[algorithm][protocol] and hwLat[hop][algorithm][protocol].
double base_latency_us(Algorithm a, Protocol p) {
  if (p == Protocol::simple) return 8.4;
  return a == Algorithm::tree ? 6.8 : 6.6;
}

double hop_latency_us(Hop hop, Algorithm a, Protocol p) {
  const bool ll = p == Protocol::ll;
  switch (hop) {
    case Hop::nvlink: return ll ? 0.6 : (a == Algorithm::tree ? 4.0 : 3.4);
    case Hop::pcie: return ll ? 1.0 : (a == Algorithm::tree ? 4.0 : 5.7);
    case Hop::network: return ll ? (a == Algorithm::tree ? 5.0 : 2.7) : 14.0;
  }
  return 0;
}

// NCCL's network post overhead on x86 (getNetOverhead), paid by every ring step
// of a multi-node ring, three times over with the Simple protocol.
constexpr double kNetOverheadUs = 1.0;

// The bus bandwidth the links allow. Across nodes NCCL runs one ring (channel)
// per NIC and each ring leaves a node once, so the network carries a node's
// share of the traffic over all its GPUs' NICs together: the bus bandwidth is
// the group's ranks on a node × the network bandwidth per GPU, up to the
// intra-node links' (NVIDIA/nccl issue #412, S. Jeaugey: one 200G NIC per
// node gives ~24 GB/s inter-node, "add more NICs and you should get more
// bandwidth, up to 160GB/s which is the NVLink intra-node bandwidth"; issue
// #495: two A100 nodes with 8 × 100 Gb/s NICs measuring 75 GB/s bus bandwidth,
// "roughly matching our expectation (though lower by a little bit)").
double link_bus_bandwidth(const CollectiveGroup& g) {
  if (g.nodes == 1) return g.intra_bytes_per_s;
  const double ranks_per_node = static_cast<double>(g.ranks) / static_cast<double>(g.nodes);
  return std::min(g.intra_bytes_per_s, g.inter_bytes_per_s * ranks_per_node);
}

double ring_seconds(Collective collective, double bytes, const CollectiveGroup& g, Protocol p) {
  const auto n = static_cast<double>(g.ranks);
  const bool all_reduce = collective == Collective::all_reduce;
  const double steps = all_reduce ? 2 * (n - 1) : n - 1;
  const auto nodes = static_cast<double>(g.nodes);
  const double inter_steps = g.nodes == 1 ? 0 : (all_reduce ? 2 * (nodes - 1) : nodes - 1);
  double intra = hop_latency_us(g.nvlink ? Hop::nvlink : Hop::pcie, Algorithm::ring, p);
  if (g.nodes > 1) intra = std::max(intra, kNetOverheadUs * (p == Protocol::simple ? 3 : 1));
  // With one rank per node every hop is a network hop, at the tree's network latency.
  const double inter = hop_latency_us(Hop::network, n == nodes ? Algorithm::tree : Algorithm::ring, p);
  const double latency_us = base_latency_us(Algorithm::ring, p) + (steps - inter_steps) * intra + inter_steps * inter;
  double bus = link_bus_bandwidth(g);
  if (p == Protocol::ll) bus *= 0.5;
  const double algorithm_bandwidth = bus * n / steps;
  return latency_us * 1e-6 + bytes / algorithm_bandwidth;
}

double tree_all_reduce_seconds(double bytes, const CollectiveGroup& g, Protocol p) {
  const double per_node = static_cast<double>(g.ranks) / static_cast<double>(g.nodes);
  const double intra = hop_latency_us(g.nvlink ? Hop::nvlink : Hop::pcie, Algorithm::tree, p);
  const double inter = hop_latency_us(Hop::network, Algorithm::tree, p);
  const double levels = std::floor(std::log2(static_cast<double>(g.nodes)));
  const double latency_us = base_latency_us(Algorithm::tree, p) + 2 * ((per_node - 1) * intra + levels * inter);
  double bus = 0.92 * link_bus_bandwidth(g);
  if (p == Protocol::ll) bus /= 3.8;
  return latency_us * 1e-6 + bytes / (0.5 * bus);  // reduce up the tree, broadcast down
}

}  // namespace

double collective_seconds(Collective collective, double bytes, const CollectiveGroup& group) {
  if (group.ranks <= 1 || bytes <= 0) return 0;
  double best = std::min(ring_seconds(collective, bytes, group, Protocol::simple), ring_seconds(collective, bytes, group, Protocol::ll));
  if (collective == Collective::all_reduce) {
    best = std::min({best, tree_all_reduce_seconds(bytes, group, Protocol::simple), tree_all_reduce_seconds(bytes, group, Protocol::ll)});
  }
  return best;
}

double bus_bandwidth(Collective collective, double bytes, const CollectiveGroup& group) {
  if (group.ranks <= 1) return 0;
  const auto n = static_cast<double>(group.ranks);
  const double factor = (collective == Collective::all_reduce ? 2 : 1) * (n - 1) / n;
  return bytes / collective_seconds(collective, bytes, group) * factor;
}

}  // namespace tessera::planner
