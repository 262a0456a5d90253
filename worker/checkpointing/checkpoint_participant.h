#pragma once
// A worker's part in the job's checkpoints (docs/checkpoint.md), apart from when they happen,
// which the session decides from its plans:
//   - at a cut, it stages the state the session exported (parameters, the executor's state,
//     the cut's iteration and data position) with the program's own values to a background
//     writer, which reports the file to the scheduler (the scheduler commits the checkpoint
//     once every process reported), and it meets the shards at the cut;
//   - it keeps the program's own values (a front end's `herd.state(...)`), bounded;
//   - in a resumed job it opens the checkpoint the job starts from and hands out its parts:
//     the start iteration, data position and program values at Register, the parameters at
//     Attach, the executor's state to the first executor.
//
// What a worker's file holds (process "worker-<rank>"):
//   param/<tensor>             its parameters (fp32, the whole tensor; ExportParams)
//   <kind>/<tensor>...         its executor's state (Executor::ExportState)
//   values: iteration (the cut), data/epoch and data/offset (the global data position of the
//   cut's batch: worker/data/epoch_order.h), mode, workers, on rank 0 params_digest, and
//   program/<key> for each program value.
//
// Threading: the session's thread calls it; the writer's thread only reports files (with what
// Bind set before the first Stage).

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/reader.h"
#include "checkpoint/writer.h"
#include "common/deadline.h"
#include "herd/v1/scheduler.pb.h"
#include "scheduler/client/scheduler_client.h"
#include "transport/store/store.h"
#include "worker/data/epoch_order.h"
#include "worker/executor.h"
#include "worker/executor_state.h"

namespace herd::worker {

class CheckpointParticipant {
 public:
  // `timeout`: how long a report rides out a restarting scheduler, and the wait for the shards.
  CheckpointParticipant(std::shared_ptr<scheduler::SchedulerClient> client, std::string job,
                        std::chrono::milliseconds timeout)
      : client_(std::move(client)), job_(std::move(job)), timeout_(timeout) {}

  // Who reports the files: set at Register, before anything below.
  void Bind(uint64_t node_id, int rank) {
    node_id_ = node_id;
    rank_ = rank;
  }

  // ---- The program's own values ----
  // INVALID_ARGUMENT (nothing changed) past the bounds: 64 keys, keys of 1-64 characters,
  // 64 KiB per value.
  absl::Status SetProgramValue(const std::string& key, std::string value);
  const std::map<std::string, std::string>& program_values() const { return program_values_; }
  // A resumed job's values (those its checkpoint saved); empty otherwise.
  const std::map<std::string, std::string>& resumed_program_values() const {
    return resumed_program_values_;
  }
  // A worker that joined a running job takes a live worker's values as its own and as the ones
  // it resumed with.
  void AdoptProgramValues(std::map<std::string, std::string> values);

  // ---- Taking a checkpoint ----
  // Hands `state` (with the program values added) to the writer as checkpoint `id` in `dir`;
  // the writer reports the file, or its error, to the scheduler. Returns at once.
  void Stage(const std::string& dir, const std::string& id, checkpoint::ProcessState state);
  // The checkpoint staged last ("" before the first): a plan's cut is staged once.
  const std::string& staged_id() const { return staged_id_; }
  // After Stage: says the worker is at the cut (the shards export once every worker is), and
  // in a mode that runs on the shards waits until each of `servers` shards staged its copy, so
  // no push of the next round reaches a shard before it has it.
  absl::Status MeetShardsAtCut(transport::Store& store, const std::string& id,
                               std::string_view mode, int servers);
  // Until every file staged is written and reported.
  absl::Status Drain(Deadline deadline);

  // ---- Resuming ----
  struct Start {
    int64_t iteration = 0;
    DataPosition position;
  };
  // Opens the checkpoint `job` resumed from and reads where it starts and this worker's
  // program values; nullopt when the job did not resume. DATA_LOSS when the files lack them.
  absl::StatusOr<std::optional<Start>> OpenResume(const herd::v1::JobStatus& job);
  bool resuming() const { return resume_ != nullptr; }
  // A worker that joins a running job keeps the job's start but takes no state from the
  // checkpoint: the live workers hand it theirs.
  void ForgetResume() { resume_.reset(); }
  // Checks the checkpoint's layout against the model's (FAILED_PRECONDITION names the first
  // tensor that differs) and imports its parameters into `tensors` as `where` says.
  absl::Status ImportParameters(const std::vector<herd::v1::TensorSpec>& layout, ImportWhere where,
                                const std::vector<ModelTensor>& tensors) const;
  // The first executor of a resumed job takes the checkpoint's state (whichever mode and worker
  // count saved it); the checkpoint is closed after that. Nothing when not resuming.
  absl::Status ImportInto(Executor& executor);

 private:
  void Report(const std::string& id, absl::StatusOr<herd::v1::CheckpointFile> file);

  const std::shared_ptr<scheduler::SchedulerClient> client_;
  const std::string job_;
  const std::chrono::milliseconds timeout_;
  uint64_t node_id_ = 0;
  int rank_ = -1;

  std::map<std::string, std::string> program_values_;          // saved as "program/<key>"
  std::map<std::string, std::string> resumed_program_values_;  // read at OpenResume
  std::string staged_id_;
  std::unique_ptr<checkpoint::CheckpointReader> resume_;  // until the first executor imports it
  // Last: destroyed first, so its thread's reports never outlive what they read.
  std::unique_ptr<checkpoint::CheckpointWriter> writer_;
};

}  // namespace herd::worker
