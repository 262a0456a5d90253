#pragma once
// What a mode switch builds before its executor, apart from the session: where this worker
// stands in the stretch a plan starts, and that stretch's communicator. A stretch is the run of
// iterations one executor serves (docs/architecture.md, "The worker"): it starts at a mode
// switch, a membership change or a rollback. Session::SwitchTo carries the old executor's state
// into the new one around these two steps.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/defaults.h"
#include "herd/v1/scheduler.pb.h"
#include "transport/communicator.h"
#include "transport/connect.h"
#include "transport/store/store.h"

namespace herd::worker {

struct StretchLayout {
  bool collective = false;  // the mode runs on a communicator of the workers
  herd::v1::Plan run;       // the plan the executor runs: a collective mode's is compacted
  int index = 0;            // this worker's position in it (its rank for the shards' modes)
  int size = 0;             // the positions: the live workers, or the job's worker slots
};

// Where worker `rank` stands in the stretch `plan` starts at `iteration`. `job_workers` is the
// spec's worker count (an elastic job that grew has more slots). UNAVAILABLE when a collective
// mode that does not shrink misses workers (naming them); FAILED_PRECONDITION when this worker
// is not among the live ones.
absl::StatusOr<StretchLayout> LayOutStretch(const herd::v1::Plan& plan, int job_workers,
                                            bool elastic, int rank, const std::string& job,
                                            int64_t iteration);

struct StretchConnect {
  transport::Backend backend = transport::Backend::kUcx;
  std::shared_ptr<transport::Store> store;
  std::chrono::milliseconds bootstrap_timeout{defaults::kStartTimeout};
  // Elastic jobs: true once the job's membership moved past the plan's, when a peer builds
  // the newer communicator instead and this one is given up (worker/watched_store.h).
  std::function<bool()> moved_past;
  std::string what;  // names this worker in the errors ("worker 3, iteration 40")
};

// The communicator of a collective stretch, under store keys of its own: the same on every rank
// of the stretch, new for each one (its first iteration and its membership generation).
absl::StatusOr<std::unique_ptr<transport::Communicator>> ConnectStretch(const StretchLayout& layout,
                                                                        const herd::v1::Plan& plan,
                                                                        int64_t iteration,
                                                                        const StretchConnect& how);

}  // namespace herd::worker
