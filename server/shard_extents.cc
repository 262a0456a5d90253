#include "server/shard_extents.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace herd::server {

using checkpoint::StateSource;

// The keys every old shard held ("shard-0", "shard-1", ... until the first that is missing).
absl::StatusOr<std::vector<SavedKey>> SavedShardKeys(const StateSource& from) {
  std::vector<SavedKey> keys;
  for (int shard = 0;; ++shard) {
    std::optional<std::string> text = from.Value(ShardProcess(shard), "shard/keys");
    if (!text) break;
    for (const std::string& line :
         std::vector<std::string>(absl::StrSplit(*text, '\n', absl::SkipEmpty()))) {
      // "<tensor> <offset> <count>": the name may hold spaces, the numbers are the last two.
      const size_t b = line.rfind(' ');
      const size_t a =
          b == std::string::npos || b == 0 ? std::string::npos : line.rfind(' ', b - 1);
      SavedKey k{shard, line.substr(0, a == std::string::npos ? 0 : a), 0, 0};
      if (a == std::string::npos || !absl::SimpleAtoi(line.substr(a + 1, b - a - 1), &k.offset) ||
          !absl::SimpleAtoi(line.substr(b + 1), &k.count) || k.offset < 0 || k.count < 0) {
        return absl::DataLossError(
            absl::StrFormat("%s's state lists a key as '%s', not '<tensor> <offset> <count>'",
                            ShardProcess(shard), line));
      }
      keys.push_back(std::move(k));
    }
  }
  return keys;
}

// Reads elements [offset, offset + out.size()) of `name` (tensor `tensor` of `total`) from the
// old shards that held them. false when no old shard holds any of `name`.
absl::StatusOr<bool> ReadFromShards(const StateSource& from, const std::vector<SavedKey>& keys,
                                    const std::string& tensor, const std::string& name,
                                    int64_t total, int64_t offset, std::span<float> out) {
  const int64_t end = offset + static_cast<int64_t>(out.size());
  int64_t covered = 0;
  bool any = false;
  for (const SavedKey& k : keys) {
    if (k.tensor != tensor || !from.Has(ShardProcess(k.shard), name)) continue;
    any = true;
    const int64_t lo = std::max(offset, k.offset), hi = std::min(end, k.offset + k.count);
    if (lo >= hi) continue;
    HERD_RETURN_IF_ERROR(
        from.Read(ShardProcess(k.shard), name, total, lo,
                  out.subspan(static_cast<size_t>(lo - offset), static_cast<size_t>(hi - lo))));
    covered += hi - lo;
  }
  if (!any) return false;
  if (covered != end - offset) {
    return absl::DataLossError(absl::StrFormat(
        "the old shards hold %d of the elements [%d, %d) of '%s'", covered, offset, end, name));
  }
  return true;
}

std::optional<int64_t> ShardIntValue(const StateSource& from, int shard, const std::string& key) {
  std::optional<std::string> text = from.Value(ShardProcess(shard), key);
  int64_t v = 0;
  if (!text || !absl::SimpleAtoi(*text, &v)) return std::nullopt;
  return v;
}

}  // namespace herd::server
