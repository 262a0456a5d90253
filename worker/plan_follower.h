#pragma once
// How a worker follows its job's plan (docs/scheduler.md, "Following a job"): one Follow stream
// to the scheduler carries its heartbeats and batched progress up and the epoch's view and
// horizon down, and the plan of each iteration is computed here, from the view that governs it
// (scheduler/client/epoch_plan.h) — no call per iteration. Only when a worker reaches its
// horizon (the scheduler is slow, stopped or away) does it ask for more and wait; that wait is
// the worker's stall, counted.
//
// Threading: as scheduler::Follower; PlanOf runs on the training thread.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/deadline.h"
#include "herd/v1/scheduler.pb.h"
#include "scheduler/client/follower.h"
#include "scheduler/client/scheduler_client.h"

namespace herd::worker {

class PlanFollower {
 public:
  struct Options {
    std::string job;
    int rank = 0;
    // Every event (the follower's reader thread): membership, the job's ending.
    std::function<void(const herd::v1::EpochView&)> on_view;
    // Every heartbeat interval (sender thread).
    std::function<void()> on_interval;
  };
  PlanFollower(scheduler::SchedulerClient& client, Options options,
               const herd::v1::RegisterNodeResponse& registered);

  // The plan of `iteration` under `spec` (the job's, with the model's layout). Waits while the
  // horizon is below the iteration (asking for it), until `deadline`: DEADLINE_EXCEEDED then,
  // naming the horizon; UNAVAILABLE while no view has arrived; FAILED_PRECONDITION for an
  // iteration before every view this worker holds; the scheduler's refusal when it refused the
  // stream (this worker was declared dead, or DATA_LOSS).
  absl::StatusOr<herd::v1::Plan> PlanOf(const herd::v1::JobSpec& spec, int64_t iteration,
                                        Deadline deadline);

  // The newest view (null before the first) and the rest of what the stream says.
  scheduler::Follower::State State() const { return follower_.Current(); }
  std::shared_ptr<const herd::v1::EpochView> View() const { return follower_.Current().view; }
  // Waits until `ready` holds for the follower's state, or the deadline.
  scheduler::Follower::State WaitFor(
      const std::function<bool(const scheduler::Follower::State&)>& ready,
      Deadline deadline) const {
    return follower_.WaitFor(ready, deadline);
  }

  // This worker completed `iteration` (reported with the next message; at once when `now`).
  void Completed(int64_t iteration, const herd::v1::IterationStats& stats, bool now = false) {
    follower_.Completed(iteration, stats, now);
  }
  // Sends the progress now and asks to hear once every live worker completed `iteration`.
  void AskCompleted(int64_t iteration) { follower_.AskCompleted(iteration); }
  // Sends the progress not yet sent and waits until the scheduler has it (or `deadline`).
  absl::Status Flush(Deadline deadline) { return follower_.Flush(deadline); }

  // Time this worker's iterations waited for the horizon, and how often.
  double stall_seconds() const { return stall_ns_.load() / 1e9; }
  int64_t stalls() const { return stalls_.load(); }
  uint64_t messages_sent() const { return follower_.messages_sent(); }

 private:
  static scheduler::FollowerOptions FollowerOptionsOf(const Options& o);

  scheduler::Follower follower_;
  const std::string job_;
  std::atomic<int64_t> stall_ns_{0};
  std::atomic<int64_t> stalls_{0};
};

}  // namespace herd::worker
