#pragma once
// A shard's part of the job's checkpoints (docs/checkpoint.md, "Shards"). A thread follows the
// scheduler's announcements (bootstrap-store keys "checkpoint/<n>", one per checkpoint); for
// each one it waits until every worker is at the cut (their keys "checkpoint/<id>/worker-<r>"),
// copies the engine's state (Engine::ExportState: the parameter-server round is complete,
// and in a parameter-server mode the workers wait for this copy before their next push),
// says so ("checkpoint/<id>/shard-<s>"), and has a background writer write the file and
// report it to the scheduler (ReportCheckpoint). A shard without an engine (the job runs a
// collective mode) reports an empty state, so the checkpoint still lists every process.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "checkpoint/writer.h"
#include "herd/v1/scheduler.pb.h"
#include "scheduler/client/scheduler_client.h"
#include "server/engine.h"

namespace herd::server {

class ShardCheckpoints {
 public:
  // `engine` answers the shard's engine now (null until it starts); called from the thread.
  // Announcements from `first` on are handled (the ones before were this shard's
  // predecessor's, or finished).
  ShardCheckpoints(scheduler::SchedulerClient& sched, std::string job, uint64_t node_id, int shard,
                   std::function<Engine*()> engine, int64_t first);
  // Stops following and waits (at most `drain`) for the files being written.
  ~ShardCheckpoints();
  ShardCheckpoints(const ShardCheckpoints&) = delete;
  ShardCheckpoints& operator=(const ShardCheckpoints&) = delete;

  // Waits for the files being written and their reports (before the shard exits).
  absl::Status Drain(Deadline deadline) { return writer_.Drain(deadline); }

 private:
  void Loop();
  void Take(const herd::v1::CheckpointRecord& c);
  void Report(const std::string& id, absl::StatusOr<herd::v1::CheckpointFile> file);

  scheduler::SchedulerClient& sched_;
  const std::string job_;
  const uint64_t node_id_;
  const int shard_;
  const std::function<Engine*()> engine_;
  int64_t next_;
  checkpoint::CheckpointWriter writer_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace herd::server
