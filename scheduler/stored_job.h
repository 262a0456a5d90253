#pragma once
// What a restarted scheduler checks in each job record before it serves it. A record written
// by an older version with looser bounds, or damaged on disk, must never make the scheduler
// fail to start or do unbounded work: a record that fails is set aside (StateDb::SetAside)
// with a log line naming the job and why, and every other job is served.

#include <string_view>

#include "absl/status/status.h"
#include "herd/v1/scheduler.pb.h"

namespace herd::scheduler {

// OK when `job`, stored under the name `key_name`, is one the scheduler can serve: its spec
// passes today's validation (limits.h), its slots, progress and schedule agree with the spec,
// and it fits the size bound. Otherwise DATA_LOSS saying what is wrong.
absl::Status CheckStoredJob(std::string_view key_name, const herd::v1::JobStatus& job);

}  // namespace herd::scheduler
