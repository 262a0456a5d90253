#pragma once
// What the scheduler publishes to plan with: a job's state turned into the view of its epoch
// (herd.v1.EpochView), from which every process computes each iteration's plan with the pure
// rules of scheduler/client/epoch_plan.h. GetPlan answers with the same function, so a plan
// the scheduler serves and one a worker computes agree bit for bit.

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

// The view of the job's current epoch: O(absent and returned workers + shards + schedule).
herd::v1::EpochView EpochViewOf(const herd::v1::JobStatus& job);

// The plan of `iteration` in the job's current epoch. The caller has validated the iteration.
herd::v1::Plan BuildPlan(const herd::v1::JobStatus& job, int64_t iteration);

}  // namespace herd::scheduler
