#pragma once
// The horizon: how far ahead of a job's progress the scheduler holds its plans (docs/scheduler.md,
// "Horizon"). Every change of plan (a mode switch, a checkpoint cut, a worker joining) is placed
// after the horizon granted so far, so the workers compute every iteration's plan up to it
// themselves and never wait for the scheduler while it runs ahead of them. Pure rules, so they
// can be tested without a scheduler.

#include <chrono>
#include <cstdint>
#include <optional>

#include "herd/v1/scheduler.pb.h"

namespace herd::scheduler {

// The iteration rate of a job, from the progress its workers report (an exponentially weighted
// mean of the rate over windows of at least kWindow). Reports come from every worker, each a
// little ahead of or behind the others and batched at its own moment: two of them a
// millisecond apart one iteration apart are no measure of the rate (a thousand a second), so a
// rate is taken only across a window long enough that such a lead is a small part of it.
class RateEstimate {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kWindow{200};
  // A worker completed `iteration` (reported at `at`). Only a new highest iteration counts.
  void Observe(int64_t iteration, Clock::time_point at);
  // Iterations per second (0 until two reports).
  double rate() const { return rate_; }
  // The highest iteration reported, and when (-1 / the epoch of the clock before any).
  int64_t highest() const { return highest_; }
  Clock::time_point highest_at() const { return at_; }
  // Where the job probably is at `now`: the highest report moved on at the rate, for at most
  // half a second.
  int64_t Estimate(Clock::time_point now) const;

 private:
  int64_t highest_ = -1;
  Clock::time_point at_{};
  // Where the current window began: the highest iteration then, and when.
  int64_t window_iteration_ = -1;
  Clock::time_point window_at_{};
  double rate_ = 0;
};

struct HorizonRule {
  std::chrono::milliseconds ahead{1000};  // this much work ahead at the measured rate
  int64_t min_ahead = 4;                  // and at least this many iterations
};

// The horizon to grant now, given the one granted (`granted`), the job's progress, a worker's
// ask (the iteration it wants to begin, or -1) and the job's planned end (0: unknown; the last
// iteration is planned - 1, and the plan of `planned` stays the final checkpoint's GetPlan).
// Returns `granted` when no grant is due: a grant moves the horizon by at least half its
// lookahead, so the workers hear about one grant per half second of work, not one per
// iteration.
int64_t HorizonTarget(const HorizonRule& rule, int64_t granted, const RateEstimate& rate,
                      RateEstimate::Clock::time_point now, int64_t asked, int64_t planned);

// The first iteration no live worker of `status` may have begun: after the horizon granted (and
// after the current epoch's start). A worker that joins a running job begins its epoch there.
int64_t FirstIterationAfterHorizon(const herd::v1::JobStatus& status);

// The first iteration in [from, to] that the job's checkpoint policy makes a cut (every N
// iterations, the job's planned end, or — when `time_based` — at once when every_ms has
// passed since the last checkpoint), if any.
std::optional<int64_t> NextPolicyCut(const herd::v1::JobStatus& status, int64_t from, int64_t to,
                                     int64_t now_unix_ms, bool time_based);

}  // namespace herd::scheduler
