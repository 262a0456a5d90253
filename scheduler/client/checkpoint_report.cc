#include "scheduler/client/checkpoint_report.h"

#include "common/retry.h"

namespace herd::scheduler {

absl::Status ReportCheckpointFile(SchedulerClient& client, const std::string& job, uint64_t node_id,
                                  const std::string& id,
                                  absl::StatusOr<herd::v1::CheckpointFile> file,
                                  Deadline deadline) {
  herd::v1::ReportCheckpointRequest req;
  req.set_job(job);
  req.set_node_id(node_id);
  req.set_id(id);
  if (file.ok()) {
    *req.mutable_file() = std::move(*file);
  } else {
    req.set_error(file.status().ToString());
  }
  return RetryWhileUnavailable([&] { return client.ReportCheckpoint(req).status(); }, deadline);
}

}  // namespace herd::scheduler
