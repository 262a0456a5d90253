#pragma once
// Turns a job's state into the Plan of one iteration, with the pure rules of plan/ (what the
// mode's plan carries comes from the mode registry, plan/modes.h).
// The plan depends only on the spec, the mode schedule, the participating ranks, the seed and
// the iteration, so a recomputation (by the scheduler after a restart, or by a worker) gives
// the same answer.

#include <cstdint>
#include <vector>

#include "herd/v1/scheduler.pb.h"

namespace herd::scheduler {

// The job's worker slots: the spec's `workers`, more once an elastic job grew (a newcomer
// registered while every slot was alive, up to max_workers; docs/elastic.md, "Grow").
int WorkerSlots(const herd::v1::JobStatus& job);

// The worker ranks a plan covers: every rank while the job has not started (the plan it will
// run with), the live ranks once it has.
std::vector<int> ParticipatingRanks(const herd::v1::JobStatus& job);

// The mode in force at `iteration` (the last schedule entry starting at or before it).
const herd::v1::ModeSpec& ModeAt(const herd::v1::JobStatus& job, int64_t iteration);

// The plan of `iteration` in the job's current epoch. The caller has validated the iteration.
herd::v1::Plan BuildPlan(const herd::v1::JobStatus& job, int64_t iteration);

}  // namespace herd::scheduler
