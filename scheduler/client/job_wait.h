#pragma once
// What every process of a job does around its job's life, on the client side: wait for the
// job to exist (a process may start before `herd job submit`, as pods start in any order), and
// turn a job that ended into the process's outcome.

#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "common/deadline.h"
#include "herd/v1/scheduler.pb.h"
#include "scheduler/client/scheduler_client.h"

namespace herd::scheduler {

// The job's status once it exists, asking every `poll` until `deadline`; an unreachable
// scheduler (UNAVAILABLE) is waited for too. DEADLINE_EXCEEDED says how long it waited and
// what for; other errors (a bad token, say) come back at once. `what` names the process in
// the log line printed while it waits. `brief`: the status without its members (GetJobBrief),
// an answer that does not grow with the job.
absl::StatusOr<herd::v1::JobStatus> WaitForJob(
    SchedulerClient& client, const std::string& job, Deadline deadline, const std::string& what,
    std::chrono::milliseconds poll = std::chrono::milliseconds(500), bool brief = false);

// The outcome of a job that ended, for one of its processes: OK for COMPLETED and PREEMPTED
// (stopped after its checkpoint), CANCELLED
// with the operator's reason, ABORTED naming the failed process and the reason for FAILED.
// FAILED_PRECONDITION for a job that has not ended.
absl::Status JobEndedStatus(const std::string& job, herd::v1::JobState state,
                            const std::string& reason);
absl::Status JobEndedStatus(const herd::v1::JobStatus& status);

// True for a status JobEndedStatus made for a CANCELLED or FAILED job (it carries a payload
// that survives copies): the process stops because its job has ended, not because of its own
// error, and running it again cannot help. `herd worker` and `herd server` exit 3 on it.
bool IsJobEnded(const absl::Status& status);

// Parses a duration flag: "300", "300s", "5m", "1h30m" (plain numbers are seconds).
absl::StatusOr<std::chrono::milliseconds> ParseDurationFlag(const std::string& text);

}  // namespace herd::scheduler
