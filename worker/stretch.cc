#include "worker/stretch.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "plan/modes.h"
#include "worker/elastic_plan.h"
#include "worker/executor.h"
#include "worker/watched_store.h"

namespace herd::worker {

absl::StatusOr<StretchLayout> LayOutStretch(const herd::v1::Plan& plan, int job_workers,
                                            bool elastic, int rank, const std::string& job,
                                            int64_t iteration) {
  const std::string& mode = plan.mode().mode();
  // The job's worker slots: more than the spec's `workers` once an elastic job grew.
  const int world = std::max(job_workers, plan.world_size());
  const plan::ModeInfo* info = plan::FindMode(mode);
  StretchLayout layout;
  layout.collective = ModeUsesCommunicator(mode);
  const bool shrinks = elastic && info != nullptr && info->shrinks;
  if (layout.collective && plan.ranks_size() < world && !shrinks) {
    std::vector<int> missing;
    for (int r = 0; r < world; ++r) {
      if (std::find(plan.ranks().begin(), plan.ranks().end(), r) == plan.ranks().end()) {
        missing.push_back(r);
      }
    }
    return absl::UnavailableError(
        absl::StrFormat("iteration %d: worker(s) %s left job '%s'; mode %s needs all %d workers",
                        iteration, absl::StrJoin(missing, ", "), job, mode, world));
  }
  // A collective mode runs among the plan's live workers, numbered by position (the job's ranks
  // when every worker is alive): worker/elastic_plan.h.
  layout.run = layout.collective ? CompactPlan(plan) : plan;
  layout.index = layout.collective ? MemberIndex(plan, rank) : rank;
  layout.size = layout.collective ? layout.run.world_size() : world;
  if (layout.index < 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "iteration %d: worker %d is not among the live workers of job '%s'", iteration, rank, job));
  }
  return layout;
}

absl::StatusOr<std::unique_ptr<transport::Communicator>> ConnectStretch(const StretchLayout& layout,
                                                                        const herd::v1::Plan& plan,
                                                                        int64_t iteration,
                                                                        const StretchConnect& how) {
  transport::ConnectOptions co;
  co.kind = how.backend;
  co.rank = layout.index;
  co.size = layout.size;
  co.store = how.store;
  if (how.moved_past) co.store = MakeMembershipWatchedStore(how.store, how.moved_past, how.what);
  // A membership change after a death makes a new communicator of the live workers, under keys
  // of its own.
  co.prefix = plan.membership_generation() == 0
                  ? absl::StrFormat("stretch-%d", iteration)
                  : absl::StrFormat("stretch-%d-g%d", iteration, plan.membership_generation());
  co.bootstrap_timeout = how.bootstrap_timeout;
  return transport::Connect(co);
}

}  // namespace herd::worker
