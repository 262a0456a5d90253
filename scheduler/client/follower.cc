#include "scheduler/client/follower.h"

#include <algorithm>
#include <map>
#include <queue>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "metrics/process_metrics.h"
#include "scheduler/limits.h"

namespace herd::scheduler {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Views kept for the iterations they may still govern: a worker is at most a horizon behind
// the newest, and a view comes at most once per change of plan.
constexpr size_t kViewsKept = 8;
// A broken stream is opened again after this (doubling up to the cap), so a restarting
// scheduler is not hammered by every process at once.
constexpr milliseconds kRetryFirst{100};
constexpr milliseconds kRetryMax{2000};

// The one thread that runs every Follower's timed work (heartbeats, reports due, reopening a
// stream): a queue of when each one is due next. A Follower is polled by one thread at a time,
// and Remove waits until a poll in progress has returned.
class FollowClock {
 public:
  static FollowClock& Get() {
    static auto* clock = new FollowClock();  // never destroyed: followers may outlive main
    return *clock;
  }
  void Add(Follower* f) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t gen = ++next_gen_;
    live_[f] = gen;
    due_.push({Clock::now(), f, gen});
    cv_.notify_one();
  }
  // Makes `f` due now (something it sends waits on the clock).
  void Wake(Follower* f) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(f);
    if (it == live_.end()) return;
    it->second = ++next_gen_;
    due_.push({Clock::now(), f, it->second});
    cv_.notify_one();
  }
  void Remove(Follower* f) {
    std::unique_lock<std::mutex> lock(mu_);
    live_.erase(f);
    cv_.wait(lock, [&] { return running_ != f; });
  }

 private:
  struct Due {
    Clock::time_point at;
    Follower* f;
    uint64_t gen;
    bool operator>(const Due& o) const { return at > o.at; }
  };
  FollowClock() {
    std::thread([this] { Loop(); }).detach();
  }
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (due_.empty()) {
        cv_.wait(lock);
        continue;
      }
      const Due next = due_.top();
      if (next.at > Clock::now()) {
        cv_.wait_until(lock, next.at);
        continue;
      }
      due_.pop();
      auto it = live_.find(next.f);
      if (it == live_.end() || it->second != next.gen) continue;  // removed, or re-queued
      running_ = next.f;
      lock.unlock();
      const Clock::time_point again = next.f->Poll(Clock::now());
      lock.lock();
      running_ = nullptr;
      cv_.notify_all();  // a Remove waiting for this poll
      it = live_.find(next.f);
      if (it == live_.end()) continue;
      it->second = ++next_gen_;
      due_.push({again, next.f, it->second});
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> due_;
  std::map<Follower*, uint64_t> live_;  // each Follower's current entry in due_
  Follower* running_ = nullptr;
  uint64_t next_gen_ = 0;
};

}  // namespace

Follower::Follower(SchedulerClient& client, FollowerOptions options,
                   const herd::v1::RegisterNodeResponse& registered)
    : client_(client),
      options_(std::move(options)),
      node_id_(registered.node_id()),
      interval_(std::max<int64_t>(registered.heartbeat_interval_ms(), 20)),
      retry_(kRetryFirst) {
  FollowClock::Get().Add(this);  // its first poll opens the stream
}

Follower::~Follower() {
  FollowClock::Get().Remove(this);  // no poll runs or will run
  std::shared_ptr<SchedulerClient::FollowCall> call;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    call = call_;
  }
  changed_.notify_all();
  if (call) call->Cancel();
  // gRPC's callbacks hold a pointer to this: wait for the last one.
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return ended_; });
}

Follower::State Follower::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

std::shared_ptr<const herd::v1::EpochView> Follower::ViewFor(int64_t iteration) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = views_.rbegin(); it != views_.rend(); ++it) {
    if ((*it)->epoch_start_iteration() <= iteration) return *it;
  }
  return nullptr;
}

Follower::State Follower::WaitFor(const std::function<bool(const State&)>& ready,
                                  Deadline deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_ && !ready(state_) && !deadline.expired()) {
    const auto slice = std::min<std::chrono::nanoseconds>(deadline.remaining(), milliseconds(200));
    changed_.wait_for(lock, slice);
  }
  return state_;
}

void Follower::Completed(int64_t iteration, const herd::v1::IterationStats& stats, bool now) {
  bool report_due = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    report_due = !completed_unsent_ && options_.report_interval.count() > 0;
    completed_ = iteration;
    completed_unsent_ = true;
    herd::v1::IterationReport r;
    r.set_iteration(iteration);
    *r.mutable_stats() = stats;
    // A process that reports often (rank 0) sends every iteration's figures (the job's
    // history); the others only their latest.
    if (options_.report_interval.count() == 0) reports_.clear();
    reports_.push_back(std::move(r));
    if (reports_.size() > static_cast<size_t>(limits::kMaxReportsPerMessage)) {
      reports_.erase(reports_.begin());
    }
    if (now) send_now_ = true;
  }
  if (now) {
    TrySend();
  } else if (report_due) {
    FollowClock::Get().Wake(this);  // its next report's time is counted from now
  }
}

void Follower::AskHorizon(int64_t iteration) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (iteration <= state_.horizon || iteration <= want_horizon_) return;
    want_horizon_ = iteration;
    send_now_ = true;
  }
  TrySend();
}

void Follower::AskCompleted(int64_t iteration) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (iteration <= state_.completed) return;
    want_completed_ = std::max(want_completed_, iteration);
    send_now_ = true;
  }
  TrySend();
}

absl::Status Follower::Flush(Deadline deadline) {
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = ++sync_asked_;
    send_now_ = true;
  }
  TrySend();
  std::unique_lock<std::mutex> lock(mu_);
  // A stream that breaks meanwhile: the sync goes again with the next stream's first message.
  while (synced_ < ticket && !stopping_ && !deadline.expired()) {
    changed_.wait_for(lock,
                      std::min<std::chrono::nanoseconds>(deadline.remaining(), milliseconds(100)));
  }
  if (synced_ >= ticket) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrFormat("%s: the scheduler did not confirm the last reports in time", options_.what));
}

bool Follower::SendDue(Clock::time_point now) const {
  if (fresh_stream_ || send_now_ || sync_asked_ > sync_sent_) return true;
  if (notice_ != 0 && notice_ != answered_) return true;
  if (now - last_sent_ >= interval_) return true;
  return options_.report_interval.count() > 0 && completed_unsent_ &&
         now - last_report_ >= options_.report_interval;
}

herd::v1::FollowRequest Follower::NextMessage() {
  herd::v1::FollowRequest msg;
  // The identity in every message costs a few bytes and makes each one whole by itself.
  msg.set_job(options_.job);
  msg.set_node_id(node_id_);
  msg.set_seen_state_seq(client_.SeenStateSeq());
  const bool answering = notice_ != 0 && notice_ != answered_;
  if (options_.worker && (completed_unsent_ || fresh_stream_ || answering) && completed_ >= 0) {
    msg.set_completed_iteration(completed_);
    for (auto& r : reports_) *msg.add_iterations() = std::move(r);
    reports_.clear();
    completed_unsent_ = false;
    last_report_ = Clock::now();
  }
  if (want_horizon_ > state_.horizon) msg.set_want_horizon(want_horizon_);
  if (want_completed_ > state_.completed) msg.set_want_completed(want_completed_);
  if (answering) {
    msg.set_answers_notice(notice_);
    answered_ = notice_;
  }
  if (sync_asked_ > sync_sent_) {
    msg.set_sync(sync_asked_);
    sync_sent_ = sync_asked_;
  }
  send_now_ = false;
  fresh_stream_ = false;
  return msg;
}

void Follower::TrySend() {
  std::shared_ptr<SchedulerClient::FollowCall> call;
  herd::v1::FollowRequest msg;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || call_ == nullptr || writing_ || !SendDue(Clock::now())) return;
    msg = NextMessage();
    writing_ = true;
    last_sent_ = Clock::now();
    call = call_;
  }
  if (options_.fill) options_.fill(msg);
  sent_bytes_.fetch_add(msg.ByteSizeLong());
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_ = msg;
  }
  if (call->Write(msg)) return;
  // The stream ended after this message took it: OnEnded came or is on its way. Only that
  // stream's turn to write is given back (a newer stream may be writing already).
  std::lock_guard<std::mutex> lock(mu_);
  if (call_ == call) writing_ = false;
  Undelivered(msg);
}

void Follower::Undelivered(const herd::v1::FollowRequest& msg) {
  metrics::ProcessMetrics::Get().heartbeats_missed().Increment();
  // What it carried goes with the first message of the next stream.
  if (msg.has_completed_iteration()) completed_unsent_ = true;
  if (msg.answers_notice() != 0) answered_ = 0;
  if (msg.sync() != 0) sync_sent_ = synced_;
}

void Follower::OnWritten(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {
      Undelivered(in_flight_);
      return;  // the stream is ending: OnEnded follows
    }
    sent_.fetch_add(1);
  }
  TrySend();  // something became due while it was in flight
}

void Follower::OnEvent(const herd::v1::FollowEvent& event) {
  taken_.fetch_add(1);
  taken_bytes_.fetch_add(event.ByteSizeLong());
  client_.HearStateSeq(event.state_seq());
  bool answer = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (event.has_view()) {
      auto view = std::make_shared<const herd::v1::EpochView>(event.view());
      views_.push_back(view);
      if (views_.size() > kViewsKept) views_.erase(views_.begin());
      state_.view = std::move(view);
    }
    state_.horizon = std::max(state_.horizon, event.horizon());
    state_.completed = std::max(state_.completed, event.completed_iteration());
    state_.refused = absl::OkStatus();
    ++state_.events;
    retry_ = kRetryFirst;
    told_ = false;
    if (event.interval_ms() > 0) interval_ = milliseconds(event.interval_ms());
    if (event.notice() != 0 && event.notice() != notice_) {
      notice_ = event.notice();  // answered at once, with where this worker is
      answer = options_.worker;
    }
    synced_ = std::max(synced_, event.synced());
    if (want_horizon_ <= state_.horizon) want_horizon_ = 0;
    if (want_completed_ <= state_.completed) want_completed_ = 0;
  }
  changed_.notify_all();
  if (answer) TrySend();
  if (options_.on_event) options_.on_event(event);
}

void Follower::OnEnded(const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    call_.reset();
    writing_ = false;
    ended_ = true;
    if (!stopping_) {
      // The scheduler's refusal stays visible to the process until a stream is taken again.
      if (!status.ok() && !absl::IsUnavailable(status) && !absl::IsCancelled(status) &&
          !absl::IsDeadlineExceeded(status)) {
        state_.refused = status;
      }
      metrics::ProcessMetrics::Get().heartbeats_missed().Increment();
      if (!std::exchange(told_, true)) {
        Log().warn("{}: following job '{}': {}; trying again", options_.what, options_.job,
                   status.ok() ? std::string("the stream ended") : status.ToString());
      }
      reopen_at_ = Clock::now() + retry_;
      retry_ = std::min(retry_ * 2, kRetryMax);
    }
    // Under the lock: the destructor may return (and free this) as soon as it sees ended_.
    changed_.notify_all();
  }
  FollowClock::Get().Wake(this);  // only a key: a no-op once the destructor removed it
}

Clock::time_point Follower::Poll(Clock::time_point now) {
  bool open = false;
  Clock::time_point next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return now + kRetryMax;
    if (call_ == nullptr && ended_ && now >= reopen_at_) {
      open = true;
      ended_ = false;
      fresh_stream_ = true;  // the first message identifies the process on the new stream
    }
  }
  if (open) {
    std::shared_ptr<SchedulerClient::FollowCall> call = client_.StartFollow(this);
    std::lock_guard<std::mutex> lock(mu_);
    // OnEnded may have come already (a scheduler that is not there): then it stays closed.
    if (!ended_) call_ = std::move(call);
  }
  TrySend();
  bool interval = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    interval = now - last_interval_ >= interval_;
    if (interval) last_interval_ = now;
  }
  if (interval && options_.on_interval) options_.on_interval();
  std::lock_guard<std::mutex> lock(mu_);
  if (call_ == nullptr) return std::max(reopen_at_, now + milliseconds(10));
  next = std::min(last_sent_ + interval_, last_interval_ + interval_);
  if (options_.report_interval.count() > 0 && completed_unsent_) {
    next = std::min(next, last_report_ + options_.report_interval);
  }
  return std::max(next, now + milliseconds(1));
}

}  // namespace herd::scheduler
