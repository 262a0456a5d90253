#pragma once
// What the scheduler does when a worker of an elastic job dies (docs/elastic.md), as pure
// functions of the job's status, so the core's failure detector stays a sweep and the rules
// can be tested without processes:
//
// - a death counts against `max_failures`: one more than it fails the job with the count;
// - the membership generation moves on, so the survivors agree on a new communicator;
// - with fewer than `min_workers` alive the job pauses (its plans say so; the workers wait at
//   the iteration boundary they rolled back to) and fails after `pending_timeout`, naming the
//   empty slots;
// - each loss is a MembershipEvent: when it was detected, where the new epoch begins, how many
//   iterations run again and, once every live worker completed one after it, when training
//   resumed;
// - a worker that registers while the job runs (a restarted one taking its slot back by name,
//   or a replacement in a dead slot) joins at a new epoch with a new generation, ends a pause
//   when min_workers are alive again, and is an event too (registered, then went on).

#include <cstdint>
#include <string>
#include <string_view>

#include "herd/v1/scheduler.pb.h"

namespace herd::scheduler {

// The newest membership events a job keeps (each is in every status answer).
inline constexpr int kMaxMembershipEvents = 64;

// Whether `mode` goes on at P-1 in an elastic job (plan/modes.h, `shrinks` or
// `survives_worker_loss`).
bool ModeShrinks(const herd::v1::ModeSpec& mode);

// `dead` workers of the elastic job in `next` were declared dead (`why`), before the new epoch
// starts. Counts them; returns the failure reason when the job must fail (past max_failures),
// "" otherwise (then the caller starts the epoch and calls NoteWorkerLoss).
std::string CountWorkerLoss(herd::v1::JobStatus& next, int dead, std::string_view why);

// After the new epoch began on `next`: a new membership generation, the event, and the pause
// when fewer than min_workers are alive.
void NoteWorkerLoss(herd::v1::JobStatus& next, std::string why, int64_t now_ms);

// Whether worker `name` may register into running elastic job `s` (its next iteration in
// `mode`): "" when it may, else why not (the caller answers FAILED_PRECONDITION). A worker
// joins a mode that goes on at P-1 (it takes the state from a live worker, over the new
// communicator or, in ps_ec, a communicator of two; it pulls it from the shards in ps_async
// and ps_sync); a mode that does not shrink cannot take one back. Whether it may grow past
// `workers` is GrowRefusal's.
std::string JoinRefusal(const herd::v1::JobStatus& s, const herd::v1::ModeSpec& mode,
                        std::string_view name);

// Whether a worker joining running elastic job `s` now has an iteration left to join: it begins
// after the horizon (AdvanceEpoch's kAfterHorizon), and a job whose planned end the horizon has
// reached holds every iteration left for its live workers already. "" when it has one, else
// why not (FAILED_PRECONDITION, like registering into a job that completed).
std::string EndRefusal(const herd::v1::JobStatus& s, std::string_view name);

// Whether running elastic job `s` may grow by one slot for newcomer `name` (its next iteration
// in `mode`; JoinRefusal allowed the join): "" when it may, else why not. Only a mode whose live
// workers rebuild for the new count at the epoch (`shrinks`) grows; `ps_async` takes a worker
// back in a dead slot but keeps its slots (its workers scale their pushes by the count their
// executor started with).
std::string GrowRefusal(const herd::v1::JobStatus& s, const herd::v1::ModeSpec& mode,
                        std::string_view name);

// After the new epoch began on `next` because worker `slot` registered into the running job
// (`why`): a new membership generation (the live workers build a communicator with it and the
// newcomer takes its state over it), the newcomer's progress set to the epoch's boundary (its
// old report must not hold the job back), the event, and the end of a pause once min_workers
// are alive again.
void NoteWorkerJoin(herd::v1::JobStatus& next, std::string why, int slot, int64_t now_ms);

// A report moved completed_iteration: stamps an event's resume time once every live worker
// completed the first iteration of its epoch (an event a later one overtook, with the later).
void NoteProgress(herd::v1::JobStatus& next, int64_t now_ms);

// The failure reason of a job paused longer than its pending_timeout ("" otherwise).
std::string PauseExpired(const herd::v1::JobStatus& s, int64_t now_ms);

// "rank 1 ('w1'), rank 3 ('w3')": the slots whose worker is dead.
std::string EmptySlots(const herd::v1::JobStatus& s);

}  // namespace herd::scheduler
