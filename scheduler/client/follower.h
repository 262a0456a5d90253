#pragma once
// A registered process's Follow stream (docs/scheduler.md, "Following a job"): the one
// connection through which it keeps up with its job. Up go its heartbeats (every interval the
// scheduler names), a worker's progress (batched: the iterations it completed since the last
// message) and its asks (a horizon, a completed iteration); down come the epoch's view, the
// horizon and the job's ending. A process computes each iteration's plan from the view itself
// (scheduler/client/epoch_plan.h), so its iterations wait on no call while the horizon is
// ahead of them.
//
// The stream reconnects by itself when it breaks (a scheduler restart): the first event of a
// new stream brings the view again, and progress not yet sent goes with the first message.
// A process keeps running on the view and horizon it has while the scheduler is away.
//
// Threading: no thread of its own. Events arrive on gRPC's callback threads; heartbeats,
// reports due and reconnections run on one clock thread shared by every Follower of the
// process (so a benchmark can simulate thousands of processes). Every public method may be
// called from any thread. `on_event` (gRPC's thread) and `on_interval` (the clock's) must not
// block for long; they may call the Follower's own methods.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "common/deadline.h"
#include "herd/v1/scheduler.pb.h"
#include "scheduler/client/scheduler_client.h"

namespace herd::scheduler {

struct FollowerOptions {
  std::string job;
  std::string what;  // names the process in logs ("worker 3", "server")
  bool worker = true;
  // Progress goes up at least this often when the process completes iterations (rank 0: the
  // job's history and the rate the horizon follows); 0: with the heartbeats only.
  std::chrono::milliseconds report_interval{0};
  // Adds to each message what the process reports (a shard: the version it has on disk).
  std::function<void(herd::v1::FollowRequest&)> fill;
  // Every event, after the follower's state took it (reader thread).
  std::function<void(const herd::v1::FollowEvent&)> on_event;
  // Every heartbeat interval (sender thread): a process blocked elsewhere still acts on time.
  std::function<void()> on_interval;
};

class Follower : private SchedulerClient::FollowHandler {
 public:
  // Starts following at once: the first message names `registered.node_id()`.
  Follower(SchedulerClient& client, FollowerOptions options,
           const herd::v1::RegisterNodeResponse& registered);
  ~Follower() override;  // closes the stream; returns once no callback runs any more
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

  // What the process knows of its job now.
  struct State {
    std::shared_ptr<const herd::v1::EpochView> view;  // null before the first event
    int64_t horizon = -1;                             // plans hold up to this iteration
    int64_t completed = -1;                           // every live worker completed it
    uint64_t events = 0;                              // events taken so far
    // The scheduler's refusal of the stream (e.g. this node was declared dead, or the state went
    // back in time: DATA_LOSS); OK while it follows.
    absl::Status refused;
  };
  State Current() const;
  // The view that governs `iteration`: the newest whose epoch begins at or before it (the view
  // of a planned change arrives before the iterations it governs). Null when none does.
  std::shared_ptr<const herd::v1::EpochView> ViewFor(int64_t iteration) const;
  // Waits until `ready` holds for the state (re-checked at each event), or the deadline or the
  // destructor; returns the state at that moment.
  State WaitFor(const std::function<bool(const State&)>& ready, Deadline deadline) const;

  // Workers. `iteration` is complete (its stats for the job's history): reported with the next
  // message, or at once when `now`. A lower iteration than before is a rollback.
  void Completed(int64_t iteration, const herd::v1::IterationStats& stats, bool now = false);
  // Asks for plans up to `iteration` (a worker that reached its horizon), at once.
  void AskHorizon(int64_t iteration);
  // Asks to hear once every live worker completed `iteration`, at once (with the progress).
  void AskCompleted(int64_t iteration);
  // Sends what is not sent yet (the last reports) and waits until the scheduler took it, or
  // the deadline: a process about to finish makes sure its history is complete.
  absl::Status Flush(Deadline deadline);

  // Counters for benchmarks: messages sent up and their bytes, events taken and theirs.
  uint64_t messages_sent() const { return sent_.load(); }
  uint64_t bytes_sent() const { return sent_bytes_.load(); }
  uint64_t events_taken() const { return taken_.load(); }
  uint64_t bytes_taken() const { return taken_bytes_.load(); }

  // The clock thread's turn (follower.cc): what is due now; returns when to come back.
  std::chrono::steady_clock::time_point Poll(std::chrono::steady_clock::time_point now);

 private:
  // SchedulerClient::FollowHandler.
  void OnEvent(const herd::v1::FollowEvent& event) override;
  void OnWritten(bool ok) override;
  void OnEnded(const absl::Status& status) override;

  // Sends the next message when none is in flight (else it goes when that one is done).
  void TrySend();
  // The next message: identity, heartbeat, progress and asks.
  herd::v1::FollowRequest NextMessage() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A message that did not reach the scheduler: what it carried is sent again.
  void Undelivered(const herd::v1::FollowRequest& msg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SendDue(std::chrono::steady_clock::time_point now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SchedulerClient& client_;
  const FollowerOptions options_;
  const uint64_t node_id_;

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;  // state_ moved, or the stream ended
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  State state_ ABSL_GUARDED_BY(mu_);
  // Views taken, oldest first (the ones that may still govern an iteration a worker runs).
  std::vector<std::shared_ptr<const herd::v1::EpochView>> views_ ABSL_GUARDED_BY(mu_);
  // The stream: open (call_), a write in flight, when the last message went, when to reopen.
  std::shared_ptr<SchedulerClient::FollowCall> call_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = true;  // no call is open (OnEnded came)
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  herd::v1::FollowRequest in_flight_ ABSL_GUARDED_BY(mu_);  // what it carried, for a retry
  std::chrono::milliseconds interval_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_sent_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_interval_ ABSL_GUARDED_BY(mu_);  // on_interval ran
  std::chrono::steady_clock::time_point reopen_at_ ABSL_GUARDED_BY(mu_);
  std::chrono::milliseconds retry_ ABSL_GUARDED_BY(mu_);
  bool told_ ABSL_GUARDED_BY(mu_) = false;  // the current outage was logged
  // Progress not sent yet.
  int64_t completed_ ABSL_GUARDED_BY(mu_) = -1;
  bool completed_unsent_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<herd::v1::IterationReport> reports_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_report_ ABSL_GUARDED_BY(mu_);
  int64_t want_horizon_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t want_completed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t notice_ ABSL_GUARDED_BY(mu_) = 0;  // the newest one heard
  uint64_t answered_ ABSL_GUARDED_BY(mu_) = 0;
  bool send_now_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t sync_asked_ ABSL_GUARDED_BY(mu_) = 0;    // the newest sync to send
  uint64_t sync_sent_ ABSL_GUARDED_BY(mu_) = 0;     // ... sent
  uint64_t synced_ ABSL_GUARDED_BY(mu_) = 0;        // ... answered
  bool fresh_stream_ ABSL_GUARDED_BY(mu_) = false;  // a new stream: identify at once

  std::atomic<uint64_t> sent_{0}, sent_bytes_{0}, taken_{0}, taken_bytes_{0};
};

}  // namespace herd::scheduler
