// The words every communicator speaks: element types, reduction operators, the
// kinds of call, and the per-communicator byte counters that metrics.json will
// report as "bytes moved per collective" (DESIGN.md, the metrics contract).
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

#include "tessera/engine/half.h"
#include "tessera/planner/enum_names.h"

namespace tessera::engine::comm {

// Element types a communicator moves. Sums are computed by
// reduce_in_rank_order (ordered_reduce.h), not by MPI: bf16 and fp16 are
// widened to fp32 there, added in rank order and rounded once.
enum class DataType { f32, f64, bf16, f16 };
inline constexpr std::array<EnumName<DataType>, 4> kDataTypeNames{
    {{DataType::f32, "f32"}, {DataType::f64, "f64"}, {DataType::bf16, "bf16"}, {DataType::f16, "f16"}}};
inline std::span<const EnumName<DataType>> enum_names(DataType) { return kDataTypeNames; }

constexpr size_t element_bytes(DataType type) {
  switch (type) {
    case DataType::f64: return 8;
    case DataType::f32: return 4;
    case DataType::bf16:
    case DataType::f16: return 2;
  }
  return 4;
}

template <typename T>
concept CommElement = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, bf16> || std::same_as<T, fp16>;

template <CommElement T>
constexpr DataType data_type_of() {
  if constexpr (std::same_as<T, float>) return DataType::f32;
  if constexpr (std::same_as<T, double>) return DataType::f64;
  if constexpr (std::same_as<T, bf16>) return DataType::bf16;
  return DataType::f16;
}

// sum: gradients and losses. max: flags and overflow checks; NaN wins (a rank
// holding a NaN makes the result NaN), so an fp16 overflow check cannot miss one.
enum class ReduceOp { sum, max };
inline constexpr std::array<EnumName<ReduceOp>, 2> kReduceOpNames{{{ReduceOp::sum, "sum"}, {ReduceOp::max, "max"}}};
inline std::span<const EnumName<ReduceOp>> enum_names(ReduceOp) { return kReduceOpNames; }

// Every call a communicator offers, for counters and error messages.
enum class Collective { all_reduce, reduce_scatter, all_gather, broadcast, send, recv, barrier };
inline constexpr int kNumCollectives = 7;
inline constexpr std::array<EnumName<Collective>, kNumCollectives> kCollectiveNames{{
    {Collective::all_reduce, "all_reduce"},
    {Collective::reduce_scatter, "reduce_scatter"},
    {Collective::all_gather, "all_gather"},
    {Collective::broadcast, "broadcast"},
    {Collective::send, "send"},
    {Collective::recv, "recv"},
    {Collective::barrier, "barrier"},
}};
inline std::span<const EnumName<Collective>> enum_names(Collective) { return kCollectiveNames; }

// What one communicator has done, per kind of call, counted when a call succeeds.
// `bytes` is the call's payload as nccl-tests defines its size S
// (NVIDIA/nccl-tests doc/PERFORMANCE.md), which is the same on every rank:
//   all_reduce      count · element bytes
//   reduce_scatter  size · recv_count · element bytes   (the whole input)
//   all_gather      size · send_count · element bytes   (the whole output)
//   broadcast       count · element bytes
//   send, recv      count · element bytes
//   barrier         0
// The bytes on the wire depend on the algorithm; for the usual ones they are the
// payload times nccl-tests' bus factor: 2(n-1)/n for all_reduce, (n-1)/n for
// reduce_scatter and all_gather, 1 for broadcast. A one-rank communicator counts
// the payload too, so a run's counters do not depend on the backend.
// A communicator made by split() has counters of its own, starting at zero.
struct CommCounters {
  std::array<int64_t, kNumCollectives> calls{};
  std::array<int64_t, kNumCollectives> bytes{};
  // Wall time this rank spent inside the calls (waiting for other ranks
  // included): for a started call (Communicator::start_all_reduce), its start
  // and the wait for it to finish, not the compute it ran under.
  std::array<double, kNumCollectives> seconds{};
  // Wall time from each call's start to its completion: `seconds` for a
  // blocking call; for a started one, up to the progress() or finish_started()
  // that saw it complete. 1 - seconds / in_flight_seconds is the share hidden under compute.
  std::array<double, kNumCollectives> in_flight_seconds{};

  int64_t calls_of(Collective kind) const { return calls[static_cast<size_t>(kind)]; }
  int64_t bytes_of(Collective kind) const { return bytes[static_cast<size_t>(kind)]; }
  double seconds_of(Collective kind) const { return seconds[static_cast<size_t>(kind)]; }
  double in_flight_seconds_of(Collective kind) const { return in_flight_seconds[static_cast<size_t>(kind)]; }
  // What was counted after `earlier` (a copy of these counters taken before).
  CommCounters since(const CommCounters& earlier) const {
    CommCounters d;
    for (size_t i = 0; i < calls.size(); ++i) {
      d.calls[i] = calls[i] - earlier.calls[i];
      d.bytes[i] = bytes[i] - earlier.bytes[i];
      d.seconds[i] = seconds[i] - earlier.seconds[i];
      d.in_flight_seconds[i] = in_flight_seconds[i] - earlier.in_flight_seconds[i];
    }
    return d;
  }
  // A blocking call: in flight for as long as this rank waited in it.
  void add(Collective kind, int64_t payload_bytes, double elapsed_s = 0) { add(kind, payload_bytes, elapsed_s, elapsed_s); }
  void add(Collective kind, int64_t payload_bytes, double waited_s, double in_flight_s) {
    seconds[static_cast<size_t>(kind)] += waited_s;
    in_flight_seconds[static_cast<size_t>(kind)] += in_flight_s;
    calls[static_cast<size_t>(kind)] += 1;
    bytes[static_cast<size_t>(kind)] += payload_bytes;
  }
};

}  // namespace tessera::engine::comm
