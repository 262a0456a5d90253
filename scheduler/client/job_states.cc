#include "scheduler/client/job_states.h"

namespace herd::scheduler {

bool IsTerminal(herd::v1::JobState state) {
  return state == herd::v1::JOB_COMPLETED || state == herd::v1::JOB_FAILED ||
         state == herd::v1::JOB_CANCELLED || state == herd::v1::JOB_PREEMPTED;
}

std::string_view JobStateName(herd::v1::JobState state) {
  switch (state) {
    case herd::v1::JOB_PENDING:
      return "PENDING";
    case herd::v1::JOB_RUNNING:
      return "RUNNING";
    case herd::v1::JOB_COMPLETED:
      return "COMPLETED";
    case herd::v1::JOB_FAILED:
      return "FAILED";
    case herd::v1::JOB_CANCELLED:
      return "CANCELLED";
    case herd::v1::JOB_PREEMPTED:
      return "PREEMPTED";
    default:
      return "UNSPECIFIED";
  }
}

}  // namespace herd::scheduler
