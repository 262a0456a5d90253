#pragma once
// Recovery never silently goes back in time, not even when the state directory looks whole.
//
// RocksDB refuses a write-ahead log with damaged or torn records (storage/database.h), but a
// log cut exactly at a record boundary replays "cleanly": the last rounds are simply gone, and
// nothing in the directory remembers how long the log was. The scheduler does: every shard's
// heartbeat reports the lowest version over its keys that is on disk (Engine::DurableVersion),
// and the scheduler keeps it in the shard's member of the job (Member.durable_version). A
// restarted shard compares what it recovered with that version before it serves: a key below
// it (or with no record at all) is DATA_LOSS naming the state directory and the logs replayed,
// unless the operator accepted the loss (--accept-data-loss), which is logged.
//
// Reach: the report is as recent as the shard's last heartbeat (a third of the scheduler's
// heartbeat timeout), so a loss of only the rounds written after it is not seen here.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/key_record.h"
#include "server/keys.h"

namespace herd::server {

struct RecoveredState {
  std::string job;
  int shard = 0;
  std::string state_dir;
  std::string replayed_logs;  // the write-ahead logs the open replayed
  // Member.durable_version of this shard, as the scheduler has it (nullopt: none reported).
  std::optional<int64_t> reported;
  std::vector<KeyId> keys;         // this shard's keys
  std::vector<KeyRecord> records;  // what the state directory holds for the job
  bool accept_data_loss = false;
};

// OK when every key recovered at least the reported version (or nothing was reported);
// DATA_LOSS otherwise, or OK with a warning in the log when the loss is accepted.
absl::Status CheckNotBehind(const RecoveredState& s);

}  // namespace herd::server
