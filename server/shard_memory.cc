#include "server/shard_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace herd::server {
namespace {

std::atomic<int64_t> g_max_state_bytes{0};

// A number in a one-line file ("max" or anything else: nullopt).
std::optional<int64_t> ReadNumber(const char* path) {
  std::ifstream in(path);
  std::string word;
  int64_t v = 0;
  if (!(in >> word) || !absl::SimpleAtoi(word, &v) || v <= 0) return std::nullopt;
  return v;
}

// Bytes of address space this process maps now.
int64_t MappedBytes() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0;
  if (!(in >> pages)) return 0;
  return pages * sysconf(_SC_PAGESIZE);
}

}  // namespace

int64_t EngineStateBytes(const ShardConfig& c) {
  // Vectors of 4-byte values per element of a key (Engine::Engine).
  int64_t per_element = 1 + OptimizerSlots(c.optimizer.kind);
  if (c.mode != Mode::kAsync) per_element += 1;  // the round's accumulator
  if (c.mode == Mode::kEc) per_element += 1;     // the residual epsilon
  int64_t elements = 0;
  for (const auto& [key, placement] : c.keys) {
    if (placement.server == c.shard) elements += placement.count;
  }
  // elements <= 2^40 (the scheduler's bound of a model), per_element <= 5: no overflow.
  return elements * per_element * static_cast<int64_t>(sizeof(float));
}

void SetMaxStateBytes(int64_t bytes) { g_max_state_bytes.store(std::max<int64_t>(bytes, 0)); }

int64_t MaxStateBytes(const char** source) {
  const char* from = "--max-state-bytes";
  int64_t limit = g_max_state_bytes.load();
  if (limit <= 0) {
    limit = std::numeric_limits<int64_t>::max();
    auto take = [&](std::optional<int64_t> v, const char* what) {
      if (v.has_value() && *v < limit) {
        limit = *v;
        from = what;
      }
    };
    const long pages = sysconf(_SC_PHYS_PAGES);
    if (pages > 0) take(static_cast<int64_t>(pages) * sysconf(_SC_PAGESIZE), "physical memory");
    take(ReadNumber("/sys/fs/cgroup/memory.max"), "cgroup memory limit");
    take(ReadNumber("/sys/fs/cgroup/memory/memory.limit_in_bytes"), "cgroup memory limit");
    for (const auto& [resource, name] :
         {std::pair{RLIMIT_AS, "RLIMIT_AS"}, std::pair{RLIMIT_DATA, "RLIMIT_DATA"}}) {
      rlimit r{};
      if (getrlimit(resource, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
        const int64_t room = static_cast<int64_t>(r.rlim_cur) - MappedBytes();
        take(std::max<int64_t>(room, 0), name);
      }
    }
  }
  if (source != nullptr) *source = from;
  return limit;
}

absl::Status CheckShardFits(const ShardConfig& config) {
  const int64_t need = EngineStateBytes(config);
  const char* source = nullptr;
  const int64_t limit = MaxStateBytes(&source);
  if (need <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "shard %d of job '%s' cannot hold its key range: its state needs %d bytes (%.1f GiB), "
      "more than the %d bytes (%.1f GiB) this shard may have (%s); spread the model over more "
      "shards (servers), or give this shard more memory (herd server --max-state-bytes)",
      config.shard, config.job, need, need / 1073741824.0, limit, limit / 1073741824.0, source));
}

}  // namespace herd::server
