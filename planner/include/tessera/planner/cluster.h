// A cluster: nodes of identical GPUs, the links between them, and the hosts.
// Given on the command line (--gpus 64 --gpus-per-node 8 --gpu h100-80g
// --inter-node-gbps 400) or as a JSON file (data/hardware/clusters/*.json).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/planner/hardware.h"
#include "tessera/planner/status.h"

namespace tessera::planner {

inline constexpr double kIntraNodeSendLatencyUs = 3;
inline constexpr double kInterNodeSendLatencyUs = 20;

struct ClusterSpec {
  std::string name;                  // file stem, or "cli"
  GpuProfile gpu;
  int64_t num_nodes = 1;
  int64_t gpus_per_node = 8;
  // Inside a node, GB/s per GPU and direction: NVLink's datasheet figure counts
  // both directions, so half of it; PCIe per direction where there is no NVLink.
  double intra_node_gbps = 0;        // 0 = derived from the GPU profile
  double inter_node_gbit_s = 400;    // per GPU, Gbit/s (NDR InfiniBand: 400)
  // Time of a small point-to-point message (a pipeline send's fixed cost;
  // collectives have their own in collectives.cpp), as nccl-tests'
  // sendrecv_perf measures it: about 3 µs between GPUs of one NVLink node
  // (H100s in NVIDIA/nccl#1487, 3.7 µs between H800s in NVIDIA/nccl#1984) and
  // 19-20 µs for 8 bytes between A100s of two nodes on HDR InfiniBand
  // (NVIDIA/nccl-tests#150; 31-34 µs between A40s of two nodes in #214).
  double intra_node_latency_s = kIntraNodeSendLatencyUs * 1e-6;
  double inter_node_latency_s = kInterNodeSendLatencyUs * 1e-6;
  int64_t host_memory_bytes_per_node = int64_t{1} << 40;  // 1 TiB (DGX A100: 1 TB, DGX H100: 2 TB)
  // CPU Adam: parameters updated per second by one node's CPUs (ZeRO-Offload,
  // Ren et al. 2021, §6.3: about 1B parameters in 0.22 s on a 2-socket Xeon).
  double cpu_adam_params_per_s_per_node = 4.5e9;

  int64_t world_size() const { return num_nodes * gpus_per_node; }
  // Bandwidth in bytes/s of one GPU's share of the link its group uses.
  double intra_node_bytes_per_s() const;
  double inter_node_bytes_per_s() const { return inter_node_gbit_s * 1e9 / 8; }
};

// The bounds make_cluster accepts: at most kMaxGpus GPUs, kMaxGpusPerNode to a
// node, and an inter-node bandwidth above 0 and at most kMaxInterNodeGbitS.
inline constexpr int64_t kMaxGpus = int64_t{1} << 20;
inline constexpr int64_t kMaxGpusPerNode = 1024;
inline constexpr double kMaxInterNodeGbitS = 1e6;

// A cluster of `gpus` GPUs, `gpus_per_node` to a node; the GPU count must fill whole nodes
// (or be smaller than one node).
Result<ClusterSpec> make_cluster(const GpuProfile& gpu, int64_t gpus, int64_t gpus_per_node, double inter_node_gbit_s);

// Reads a cluster file; its "gpu" field names a shipped GPU or a profile path.
Result<ClusterSpec> parse_cluster(std::string_view json_text, const std::string& source);

}  // namespace tessera::planner
