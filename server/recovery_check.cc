#include "server/recovery_check.h"

#include <map>

#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace herd::server {

absl::Status CheckNotBehind(const RecoveredState& s) {
  if (!s.reported.has_value()) return absl::OkStatus();
  std::map<KeyId, int64_t> recovered;
  for (const auto& r : s.records) recovered[r.key] = r.version;
  // The first key found behind, and how many are.
  int behind = 0;
  std::string first;
  for (const KeyId& key : s.keys) {
    const auto it = recovered.find(key);
    if (it != recovered.end() && it->second >= *s.reported) continue;
    if (behind++ == 0) {
      first = it == recovered.end()
                  ? absl::StrFormat("key %s has no record at all", KeyName(key))
                  : absl::StrFormat("key %s recovered version %d", KeyName(key), it->second);
    }
  }
  if (behind == 0) return absl::OkStatus();
  const std::string what = absl::StrFormat(
      "the shard state in %s went back in time: %s (%d of %d keys are behind), but shard %d of "
      "job '%s' had written version %d of every key, as it reported to the scheduler; the "
      "write-ahead log lost its last records (write-ahead logs replayed: %s)",
      s.state_dir, first, behind, s.keys.size(), s.shard, s.job, *s.reported, s.replayed_logs);
  if (s.accept_data_loss) {
    Log().warn("server: {}; serving from what was recovered, as --accept-data-loss asks", what);
    return absl::OkStatus();
  }
  return absl::DataLossError(absl::StrFormat(
      "%s. Restore the directory from a copy, or restart with --accept-data-loss to serve from "
      "the older state",
      what));
}

}  // namespace herd::server
