#include "tessera/engine/host_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

namespace tessera::engine {
namespace {

// Small /proc and /sys files; an unreadable one is simply not a limit.
std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  return text.str().substr(0, 1 << 16);
}

std::optional<int64_t> parse_integer(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end == text.data()) return std::nullopt;
  return value;
}

struct Limit {
  int64_t bytes;
  const char* name;
};

// The process's memory cgroup (v1 "N:memory:/path" or v2 "0::/path" in
// /proc/self/cgroup), limit less usage. Inside a container the cgroup file
// system shows the container's own group at its root, so the root is tried too.
std::optional<int64_t> cgroup_headroom() {
  std::istringstream lines(read_small_file("/proc/self/cgroup"));
  std::string line;
  std::vector<std::pair<std::string, std::string>> candidates;  // limit file, usage file
  while (std::getline(lines, line)) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    if (controllers == "memory") {
      for (const std::string& dir : {"/sys/fs/cgroup/memory" + path, std::string("/sys/fs/cgroup/memory")}) {
        candidates.emplace_back(dir + "/memory.limit_in_bytes", dir + "/memory.usage_in_bytes");
      }
    } else if (controllers.empty()) {
      for (const std::string& dir : {"/sys/fs/cgroup" + path, std::string("/sys/fs/cgroup")}) {
        candidates.emplace_back(dir + "/memory.max", dir + "/memory.current");
      }
    }
  }
  for (const auto& [limit_file, usage_file] : candidates) {
    const std::optional<int64_t> limit = cgroup_limit_bytes(read_small_file(limit_file));
    const std::optional<int64_t> usage = parse_integer(read_small_file(usage_file));
    if (limit && usage) return std::max<int64_t>(0, *limit - *usage);
  }
  return std::nullopt;
}

std::optional<int64_t> rlimit_headroom(int resource, std::string_view mapped_key) {
  rlimit limit{};
  if (getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  const int64_t mapped = kib_field_bytes(read_small_file("/proc/self/status"), mapped_key).value_or(0);
  return std::max<int64_t>(0, static_cast<int64_t>(std::min<rlim_t>(limit.rlim_cur, INT64_MAX)) - mapped);
}

}  // namespace

int64_t memory_reserve_bytes(int64_t limit_bytes) { return std::max<int64_t>(int64_t{256} << 20, limit_bytes / 20); }

std::optional<int64_t> kib_field_bytes(std::string_view text, std::string_view key) {
  const std::string prefix = std::string(key) + ":";
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    if (line.starts_with(prefix)) {
      const std::optional<int64_t> kib = parse_integer(line.substr(prefix.size()));
      if (kib && *kib >= 0 && *kib < (int64_t{1} << 53)) return *kib * 1024;
      return std::nullopt;
    }
    at = end + 1;
  }
  return std::nullopt;
}

std::optional<int64_t> cgroup_limit_bytes(std::string_view text) {
  const std::optional<int64_t> value = parse_integer(text);  // "max" does not parse: no limit
  if (!value || *value < 0 || *value > (int64_t{1} << 62)) return std::nullopt;  // v1 says "no limit" with ~2^63
  return value;
}

HostMemoryBudget host_memory_budget() {
  std::vector<Limit> limits;
  const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
  if (physical > 0) limits.push_back({physical, "physical memory"});  // where /proc says nothing
  if (auto available = kib_field_bytes(read_small_file("/proc/meminfo"), "MemAvailable")) limits.push_back({*available, "available memory (MemAvailable)"});
  if (auto cgroup = cgroup_headroom()) limits.push_back({*cgroup, "the memory cgroup's limit"});
  if (auto address_space = rlimit_headroom(RLIMIT_AS, "VmSize")) limits.push_back({*address_space, "ulimit -v"});
  if (auto data = rlimit_headroom(RLIMIT_DATA, "VmData")) limits.push_back({*data, "ulimit -d"});
  HostMemoryBudget budget;
  if (limits.empty()) return budget;
  const Limit tightest = *std::min_element(limits.begin(), limits.end(), [](const Limit& a, const Limit& b) { return a.bytes < b.bytes; });
  budget.limit_bytes = tightest.bytes;
  budget.limited_by = tightest.name;
  budget.reserve_bytes = memory_reserve_bytes(tightest.bytes);
  return budget;
}

}  // namespace tessera::engine
