// How much memory a training run may take on this machine, for the pre-flight
// check before any allocation: the tightest of
//   - what the kernel says can be allocated without swapping (MemAvailable in
//     /proc/meminfo; proc(5)),
//   - the memory cgroup's limit less its usage (v2 memory.max/memory.current,
//     v1 memory.limit_in_bytes/memory.usage_in_bytes; the container's limit),
//   - the address-space and data ulimits (RLIMIT_AS, RLIMIT_DATA) less what
//     the process maps already (VmSize, VmData in /proc/self/status),
// less a reserve for what the ledger does not count: the C++ runtime,
// OpenBLAS's per-thread buffers, thread stacks and the page cache the
// checkpoint writes through. The reserve is 5% of the limit, at least 256 MiB.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessera::engine {

struct HostMemoryBudget {
  int64_t limit_bytes = 0;  // the tightest limit, before the reserve
  std::string limited_by;   // "available memory (MemAvailable)", "cgroup memory limit", "ulimit -v", "ulimit -d"
  int64_t reserve_bytes = 0;
  int64_t usable_bytes() const { return limit_bytes - reserve_bytes; }
};

HostMemoryBudget host_memory_budget();

// The pieces, for tests.
int64_t memory_reserve_bytes(int64_t limit_bytes);
// "MemAvailable:  23860012 kB" (or any "Key:  N kB" line) in bytes.
std::optional<int64_t> kib_field_bytes(std::string_view text, std::string_view key);
// A cgroup limit file's value; nullopt for "max" or v1's "no limit" (> 2^62).
std::optional<int64_t> cgroup_limit_bytes(std::string_view text);

}  // namespace tessera::engine
