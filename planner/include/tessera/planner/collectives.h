// Time of one NCCL collective, after NCCL's own tuning model (NVIDIA/nccl,
// src/graph/tuning.cc, ncclTopoTuneModel): for each algorithm and protocol NCCL
// predicts latency + bytes / algorithm bandwidth and runs the fastest, and so
// does this model.
//  - Ring (all-reduce, reduce-scatter, all-gather): 2(n−1) steps for an
//    all-reduce, n−1 otherwise, each paying a hop latency (the network's for
//    the steps that cross nodes); algorithm bandwidth = bus bandwidth × n/steps.
//  - Tree (all-reduce only; double binary tree across nodes, a chain inside):
//    latency 2 × ((ranks per node − 1) hops + log2(nodes) network hops);
//    algorithm bandwidth = 0.5 × 0.92 × bus bandwidth.
//  - Protocols: Simple (full bandwidth) and LL (half the bandwidth on a ring,
//    1/3.8 on a tree, and a lower latency), so small messages pay little and
//    the bus bandwidth rises with the message size toward the links' rate,
//    the curve nccl-tests reports (NVIDIA/nccl-tests doc/PERFORMANCE.md: time
//    is overhead + size/bw; busbw = algbw × 2(n−1)/n for an all-reduce).
// Latencies (µs), from the tuning tables: base 6.6 (ring LL), 6.8 (tree LL),
// 8.4 (Simple); per hop on NVLink ring 0.6 / 3.4, tree 0.6 / 4.0 (LL / Simple),
// on PCIe ring 1.0 / 5.7, tree 1.0 / 4.0, across the network ring 2.7 / 14,
// tree 5.0 / 14; a hop inside a node of a multi-node ring waits at least the
// network post overhead (1 µs, × 3 for Simple). NVLS (NVLink SHARP) and
// CollNet, which need switch support, are not modelled.
#pragma once

#include <cstdint>

namespace tessera::planner {

enum class Collective { all_reduce, reduce_scatter, all_gather };

// A process group as NCCL sees it.
struct CollectiveGroup {
  int64_t ranks = 1;
  int64_t nodes = 1;              // nodes its ranks span
  double intra_bytes_per_s = 1;   // per GPU and direction inside a node
  double inter_bytes_per_s = 1;   // per GPU and direction between nodes
  bool nvlink = true;             // the intra-node links are NVLink (else PCIe)
};

// Seconds for `bytes` (the whole buffer: the all-reduce's input, the
// reduce-scatter's input, the all-gather's output).
double collective_seconds(Collective collective, double bytes, const CollectiveGroup& group);

// Bus bandwidth (nccl-tests' busbw: algorithm bandwidth × the collective's
// factor) the model predicts for `bytes`, bytes/s.
double bus_bandwidth(Collective collective, double bytes, const CollectiveGroup& group);

}  // namespace tessera::planner
