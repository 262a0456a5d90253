#pragma once
// The worker process: registers with the scheduler, learns its rank and the job, builds its
// model, and trains it iteration by iteration in whatever mode the plan names:
//
//   for each iteration i:  plan = GetPlan(i)
//                          a new mode (or mode parameters) at i: Flush the old executor,
//                            build the communicator of that mode's stretch (collective modes),
//                            build the new executor
//                          BeginIteration(i); forward/backward/step (Trainable::Step)
//                          ReportIteration(i, loss, times)
//   at the end:            Flush; rank 0 evaluates the test set; ReportIteration with accuracy
//
// Every worker switches at the same iteration: the scheduler only accepts a switch from an
// iteration no worker has begun, and the mode of an iteration is a pure function of the job's
// schedule. The communicator of a stretch of one mode is keyed by the iteration the stretch
// starts at, so the ranks of a new stretch find each other through the scheduler's store.
//
// A collective mode needs every worker: when the plan lists fewer (one died), the worker stops
// with an error naming the missing ranks; ps_async keeps going with the survivors.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "scheduler/client/scheduler_client.h"
#include "worker/executor.h"
#include "worker/trainable.h"

namespace herd::worker {

struct WorkerOptions {
  scheduler::ClientOptions scheduler;
  std::string job;
  std::string name;                  // stable identity (default: host and pid)
  std::optional<int> rank;           // requested rank (default: the lowest free one)
  std::string timeline_dir;          // write <dir>/worker-<rank>.json (Chrome trace) if set
  std::string result_file;           // write the JSON summary there if set
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};  // every collective wait
  std::chrono::milliseconds start_timeout{std::chrono::seconds(120)};  // job RUNNING, bootstrap
  FusionSettings fusion;
  bool progress = false;             // a progress line on stderr (rank 0)
};

// What the runtime knows when it asks for the model.
struct TrainableRequest {
  herd::v1::JobSpec spec;
  int rank = 0;
  int world_size = 1;
};
using TrainableFactory =
    std::function<absl::StatusOr<std::unique_ptr<Trainable>>(const TrainableRequest&)>;

struct WorkerSummary {
  int rank = 0;
  int64_t iterations = 0;
  double final_loss = 0;
  double test_accuracy = -1;  // rank 0 only; -1 elsewhere
  double seconds = 0;         // training time (without evaluation)
  double samples_per_second = 0;   // of the whole job (world size x this worker's rate)
  double exposed_comm_seconds = 0;
  std::string executor;       // the last executor's description
};

absl::StatusOr<WorkerSummary> RunWorker(const WorkerOptions& options,
                                        const TrainableFactory& make_trainable);

// The summary as one JSON object (what --result-file holds).
std::string SummaryJson(const WorkerSummary& s);
// Back from SummaryJson's text; INVALID_ARGUMENT when a field is missing or malformed.
absl::StatusOr<WorkerSummary> ParseSummaryJson(std::string_view text);

}  // namespace herd::worker
