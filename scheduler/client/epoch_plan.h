#pragma once
// The plan of an iteration, computed where it is used. A plan is a pure function of the job's
// spec, the epoch's view (herd.v1.EpochView: membership, mode schedule, seed, shard map inputs,
// checkpoint cut) and the iteration, so the scheduler publishes the view once per change and
// every worker and shard computes each iteration's plan itself with BuildPlan — the same
// function the scheduler's GetPlan answers with, so the two agree bit for bit.
//
// Which view governs an iteration: the newest one whose epoch_start_iteration is at or before
// it. Changes the scheduler plans (a mode switch, a checkpoint cut, a worker joining) begin
// after the horizon it granted, so every process that computes the plan of an iteration within
// its horizon computes the same one. A worker's death is the one unplanned change: its epoch
// begins at the first iteration some survivor has not completed, and the survivors of the
// collective modes roll back to it (docs/elastic.md).
//
// Cost: O(workers + shard-map entries) per plan (the ring, the peers, the shard map); the
// view itself is O(what changed), never O(workers).

#include <cstdint>
#include <vector>

#include "herd/v1/scheduler.pb.h"

namespace herd::scheduler {

// The mode in force at `iteration` (the last schedule entry starting at or before it; the
// spec's mode when the schedule is empty).
const herd::v1::ModeSpec& ModeAt(
    const herd::v1::JobSpec& spec,
    const google::protobuf::RepeatedPtrField<herd::v1::ModeSwitch>& schedule, int64_t iteration);

// The worker ranks a view's plans cover, ascending: every slot but the absent ones.
std::vector<int> ViewRanks(const herd::v1::EpochView& view);
// Whether rank `rank` takes part in the view's plans.
bool ViewHasRank(const herd::v1::EpochView& view, int rank);
// Whether the view's job has ended (COMPLETED, FAILED, CANCELLED, PREEMPTED).
bool ViewEnded(const herd::v1::EpochView& view);

// The plan of `iteration` under `view`. `spec` is the job's (its tensors: the layout the
// workers declared). The caller checked that `view` governs `iteration`.
herd::v1::Plan BuildPlan(const herd::v1::JobSpec& spec, const herd::v1::EpochView& view,
                         int64_t iteration);

}  // namespace herd::scheduler
