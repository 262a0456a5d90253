#include "worker/plan_follower.h"

#include "absl/strings/str_format.h"
#include "scheduler/client/epoch_plan.h"

namespace herd::worker {
namespace {

// Rank 0 reports its progress this often: the job's history (every iteration's figures) and the
// rate the scheduler's horizon follows.
constexpr std::chrono::milliseconds kRankZeroReports{250};

}  // namespace

scheduler::FollowerOptions PlanFollower::FollowerOptionsOf(const Options& o) {
  scheduler::FollowerOptions f;
  f.job = o.job;
  f.what = absl::StrFormat("worker %d", o.rank);
  f.worker = true;
  f.report_interval = o.rank == 0 ? kRankZeroReports : std::chrono::milliseconds(0);
  if (o.on_view) {
    f.on_event = [on_view = o.on_view](const herd::v1::FollowEvent& e) {
      if (e.has_view()) on_view(e.view());
    };
  }
  f.on_interval = o.on_interval;
  return f;
}

PlanFollower::PlanFollower(scheduler::SchedulerClient& client, Options options,
                           const herd::v1::RegisterNodeResponse& registered)
    : follower_(client, FollowerOptionsOf(options), registered), job_(options.job) {}

absl::StatusOr<herd::v1::Plan> PlanFollower::PlanOf(const herd::v1::JobSpec& spec,
                                                    int64_t iteration, Deadline deadline) {
  scheduler::Follower::State s = follower_.Current();
  if (s.view == nullptr || s.horizon < iteration) {
    // At the horizon: the scheduler is behind (or away). Ask, and wait for it.
    const auto begin = std::chrono::steady_clock::now();
    follower_.AskHorizon(iteration);
    s = follower_.WaitFor(
        [&](const scheduler::Follower::State& now) {
          return (now.view != nullptr && now.horizon >= iteration) || !now.refused.ok() ||
                 (now.view != nullptr && scheduler::ViewEnded(*now.view));
        },
        deadline);
    stall_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - begin)
                            .count());
    stalls_.fetch_add(1);
  }
  if (!s.refused.ok() && (s.view == nullptr || s.horizon < iteration)) return s.refused;
  if (s.view == nullptr) {
    return absl::UnavailableError(absl::StrFormat(
        "the plan of iteration %d of job '%s': no word from the scheduler yet", iteration, job_));
  }
  // A job that ended: its last view says so (the caller stops).
  if (scheduler::ViewEnded(*s.view)) {
    return scheduler::BuildPlan(spec, *s.view, s.view->epoch_start_iteration());
  }
  if (s.horizon < iteration) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "the plan of iteration %d of job '%s': the scheduler holds plans up to iteration %d only "
        "and gave no more in time",
        iteration, job_, s.horizon));
  }
  std::shared_ptr<const herd::v1::EpochView> view = follower_.ViewFor(iteration);
  if (view == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "iteration %d of job '%s' is before the epoch this worker follows (epoch %d begins at "
        "iteration %d)",
        iteration, job_, s.view->epoch(), s.view->epoch_start_iteration()));
  }
  return scheduler::BuildPlan(spec, *view, iteration);
}

}  // namespace herd::worker
