#pragma once
// A process's report of its checkpoint file to the scheduler (ReportCheckpoint), shared by the
// workers and the shards: the file it wrote, or why it could not, sent again while the
// scheduler restarts.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/deadline.h"
#include "herd/v1/checkpoint.pb.h"
#include "scheduler/client/scheduler_client.h"

namespace herd::scheduler {

// Reports `file` (or its error, which aborts the checkpoint) as node `node_id`'s part of
// checkpoint `id` of `job`. Waits out a restarting scheduler until `deadline`; returns the
// scheduler's last answer (an aborted checkpoint stays aborted: the caller logs and goes on).
absl::Status ReportCheckpointFile(SchedulerClient& client, const std::string& job, uint64_t node_id,
                                  const std::string& id,
                                  absl::StatusOr<herd::v1::CheckpointFile> file, Deadline deadline);

}  // namespace herd::scheduler
