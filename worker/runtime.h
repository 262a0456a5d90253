#pragma once
// The `herd worker` process: one worker of a job training one of herd's built-in models
// (worker/trainable.h) through a Session (worker/session.h), which does everything that is
// about the job (registration, plans, modes, the scheduler protocol):
//
//   session = Open                  waits for the job, reads its spec
//   model = make_trainable(spec)    the model and this worker's data
//   Register                        a worker of the job from here on (heartbeats)
//   Attach(model)                   declares the layout and the iteration count, waits to run
//
// The model comes before the registration so that a worker joining a running elastic job is
// ready when the live workers start waiting for it (docs/elastic.md, "Rejoin").
//   for each iteration i:           BeginIteration(i); model.Step(executor); EndIteration
//   Flush; rank 0 evaluates the test set; Finish(result)
//
// Any error of this worker fails the job (Session::Fail) so every other process stops too; an
// error caused by the job's ending (cancelled, or another process failed) is reported as that.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "herd/v1/scheduler.pb.h"
#include "worker/session.h"
#include "worker/trainable.h"

namespace herd::worker {

struct WorkerOptions {
  SessionOptions session;
  std::string result_file;  // write this worker's TrainingResult there (JSON) when set
  std::string loss_file;    // append "ITERATION LOSS" of every iteration there when set
};

// What the runtime knows when it asks for the model: before the worker registered, so its
// rank may not be known yet (the model must not depend on it: each Step gets its part of the
// batch).
struct TrainableRequest {
  herd::v1::JobSpec spec;
  int rank = -1;       // the rank asked for (--rank), -1 when the scheduler picks it
  int world_size = 1;  // the spec's workers
};
using TrainableFactory =
    std::function<absl::StatusOr<std::unique_ptr<Trainable>>(const TrainableRequest&)>;

// Runs the worker to the end of its job. Returns this worker's result; the job's outcome when
// it ended otherwise (CANCELLED, ABORTED naming the process that failed), or this worker's own
// error (after failing the job with it).
absl::StatusOr<herd::v1::TrainingResult> RunWorker(const WorkerOptions& options,
                                                   const TrainableFactory& make_trainable);

}  // namespace herd::worker
