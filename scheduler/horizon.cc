#include "scheduler/horizon.h"

#include <algorithm>
#include <cmath>

namespace herd::scheduler {

void RateEstimate::Observe(int64_t iteration, Clock::time_point at) {
  if (iteration <= highest_) return;
  if (window_iteration_ < 0) {
    window_iteration_ = iteration;
    window_at_ = at;
  } else if (at - window_at_ >= kWindow) {
    const double seconds = std::chrono::duration<double>(at - window_at_).count();
    const double now = static_cast<double>(iteration - window_iteration_) / seconds;
    // Weighted towards the recent rate, smoothed over a few windows (a report is rank 0's
    // every quarter second, or any worker's heartbeat).
    rate_ = rate_ == 0 ? now : 0.7 * rate_ + 0.3 * now;
    window_iteration_ = iteration;
    window_at_ = at;
  }
  highest_ = iteration;
  at_ = at;
}

int64_t RateEstimate::Estimate(Clock::time_point now) const {
  if (highest_ < 0 || rate_ <= 0 || now <= at_) return highest_;
  // Reports are batched (rank 0's every quarter second), so the job is a little ahead of the
  // newest; but never more than half a second of extrapolation: a job that stopped reporting
  // has stopped (it waits on a dead peer, say), and a horizon that ran on while it stood would
  // put everything the scheduler plans next (a join, a mode switch) seconds too late.
  const double seconds = std::min(std::chrono::duration<double>(now - at_).count(), 0.5);
  return highest_ + static_cast<int64_t>(std::floor(rate_ * seconds));
}

int64_t HorizonTarget(const HorizonRule& rule, int64_t granted, const RateEstimate& rate,
                      RateEstimate::Clock::time_point now, int64_t asked, int64_t planned) {
  const double seconds = std::chrono::duration<double>(rule.ahead).count();
  // At most kMaxAhead: a burst of reports (a measured rate of millions a second) must not
  // hold the plans of the next hour.
  constexpr double kMaxAhead = 65536;
  const int64_t ahead = std::max<int64_t>(
      rule.min_ahead, static_cast<int64_t>(std::ceil(std::min(rate.rate() * seconds, kMaxAhead))));
  const int64_t at = std::max(rate.Estimate(now), asked - 1);
  int64_t target = at + ahead;
  if (planned > 0) target = std::min(target, planned - 1);
  // A worker waiting at its horizon is answered at once; otherwise the horizon moves in steps
  // of at least half its lookahead.
  const bool waited_for = asked > granted;
  if (target <= granted) return granted;
  if (!waited_for && target - granted < std::max<int64_t>(1, ahead / 2)) return granted;
  return target;
}

int64_t FirstIterationAfterHorizon(const herd::v1::JobStatus& s) {
  return std::max(
      {s.epoch_start_iteration(), s.completed_iteration() + 1, s.issued_iteration() + 1});
}

std::optional<int64_t> NextPolicyCut(const herd::v1::JobStatus& s, int64_t from, int64_t to,
                                     int64_t now_unix_ms, bool time_based) {
  const auto& policy = s.spec().checkpoint();
  if (policy.dir().empty()) return std::nullopt;
  // Not at the job's first iteration: that state is the submitted (or resumed) one.
  const int64_t start = s.has_resumed() ? s.resumed().iteration() : 0;
  from = std::max(from, start + 1);
  if (from > to) return std::nullopt;
  std::optional<int64_t> cut;
  if (time_based && policy.every_ms() > 0) {
    const int64_t since = s.last_checkpoint().id().empty() ? s.submitted_unix_ms()
                                                           : s.last_checkpoint().ended_unix_ms();
    if (now_unix_ms - since >= policy.every_ms()) cut = from;
  }
  if (const int64_t every = policy.every_iterations(); every > 0) {
    const int64_t first = (from + every - 1) / every * every;
    if (first <= to && (!cut || first < *cut)) cut = first;
  }
  if (s.planned_iterations() > 0 && s.planned_iterations() >= from &&
      s.planned_iterations() <= to && (!cut || s.planned_iterations() < *cut)) {
    cut = s.planned_iterations();
  }
  return cut;
}

}  // namespace herd::scheduler
