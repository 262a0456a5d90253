#include "scheduler/client/job_wait.h"

#include <thread>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/logging.h"

namespace herd::scheduler {

absl::StatusOr<herd::v1::JobStatus> WaitForJob(SchedulerClient& client, const std::string& job,
                                               Deadline deadline, const std::string& what,
                                               std::chrono::milliseconds poll, bool brief) {
  const auto begin = std::chrono::steady_clock::now();
  bool told = false;
  for (;;) {
    absl::StatusOr<herd::v1::JobStatus> status =
        brief ? client.GetJobBrief(job) : client.GetJob(job);
    const bool wait = absl::IsNotFound(status.status()) || absl::IsUnavailable(status.status());
    if (!wait) return status;
    if (!told) {
      Log().info("{}: waiting for job '{}' ({})", what, job,
                 std::string(status.status().message()));
      told = true;
    }
    if (deadline.expired()) {
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::steady_clock::now() - begin);
      return absl::DeadlineExceededError(
          absl::StrFormat("%s waited %d s for job '%s' and gave up (--wait-for-job): %s", what,
                          waited.count(), job, status.status().message()));
    }
    std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(poll, deadline.remaining()));
  }
}

namespace {
constexpr char kJobEndedPayload[] = "type.herd.dev/job-ended";

absl::Status MarkJobEnded(absl::Status st, herd::v1::JobState state) {
  st.SetPayload(kJobEndedPayload, absl::Cord(herd::v1::JobState_Name(state)));
  return st;
}
}  // namespace

bool IsJobEnded(const absl::Status& status) {
  return status.GetPayload(kJobEndedPayload).has_value();
}

absl::Status JobEndedStatus(const std::string& job, herd::v1::JobState state,
                            const std::string& reason) {
  switch (state) {
    case herd::v1::JOB_COMPLETED:
    case herd::v1::JOB_PREEMPTED:  // stopped after its checkpoint, as asked: nothing failed
      return absl::OkStatus();
    case herd::v1::JOB_CANCELLED:
      return MarkJobEnded(
          absl::CancelledError(absl::StrFormat("job '%s' was cancelled: %s", job, reason)), state);
    case herd::v1::JOB_FAILED:
      return MarkJobEnded(absl::AbortedError(absl::StrFormat("job '%s' failed: %s", job, reason)),
                          state);
    default:
      return absl::FailedPreconditionError(absl::StrFormat("job '%s' has not ended", job));
  }
}

absl::Status JobEndedStatus(const herd::v1::JobStatus& s) {
  const std::string reason =
      s.state() == herd::v1::JOB_CANCELLED
          ? s.cancel_reason()
          : absl::StrFormat("%s: %s", s.failed_process(), s.failure_reason());
  return JobEndedStatus(s.spec().name(), s.state(), reason);
}

absl::StatusOr<std::chrono::milliseconds> ParseDurationFlag(const std::string& text) {
  int64_t seconds = 0;
  if (absl::SimpleAtoi(text, &seconds) && seconds >= 0) {
    return std::chrono::milliseconds(seconds * 1000);
  }
  absl::Duration d;
  if (absl::ParseDuration(text, &d) && d >= absl::ZeroDuration()) {
    return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("'%s' is not a duration; give seconds (300) or a unit (300s, 5m, 1h)", text));
}

}  // namespace herd::scheduler
