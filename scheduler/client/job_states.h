#pragma once
// The job states of the scheduler's protocol as every process reads them: which ones are
// terminal (nothing runs any more, every process exits) and their names in messages. One home
// for what the scheduler, the workers, the shards and the CLI must agree on.

#include <string_view>

#include "herd/v1/scheduler.pb.h"

namespace herd::scheduler {

// COMPLETED, FAILED, CANCELLED and PREEMPTED (stopped at its checkpoint, to resume).
bool IsTerminal(herd::v1::JobState state);
// "PENDING", "RUNNING", ... ("UNSPECIFIED" for anything else).
std::string_view JobStateName(herd::v1::JobState state);

}  // namespace herd::scheduler
