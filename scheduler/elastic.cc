#include "scheduler/elastic.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "plan/modes.h"
#include "scheduler/bounds.h"
#include "scheduler/horizon.h"
#include "scheduler/plan_builder.h"

namespace herd::scheduler {
namespace {

int LiveWorkers(const herd::v1::JobStatus& s) {
  int live = 0;
  for (const auto& m : s.workers()) live += m.alive() ? 1 : 0;
  return live;
}

std::string PauseReason(const herd::v1::JobStatus& s) {
  return absl::StrFormat("%d of %d workers alive, below min_workers %d; empty slots: %s",
                         LiveWorkers(s), s.workers_size(), s.spec().elastic().min_workers(),
                         EmptySlots(s));
}

}  // namespace

bool ModeShrinks(const herd::v1::ModeSpec& mode) {
  const plan::ModeInfo* m = plan::FindMode(mode.mode());
  return m != nullptr && (m->shrinks || m->survives_worker_loss);
}

std::string CountWorkerLoss(herd::v1::JobStatus& next, int dead, std::string_view why) {
  next.set_worker_failures(next.worker_failures() + dead);
  const int allowed = next.spec().elastic().max_failures();
  if (next.worker_failures() <= allowed) return "";
  return absl::StrFormat("%d worker failures, more than the job's max_failures of %d (last: %s)",
                         next.worker_failures(), allowed, why);
}

std::string EmptySlots(const herd::v1::JobStatus& s) {
  std::vector<std::string> empty;
  for (const auto& m : s.workers()) {
    if (!m.alive()) {
      empty.push_back(m.name().empty() ? absl::StrFormat("rank %d (never taken)", m.rank())
                                       : absl::StrFormat("rank %d ('%s')", m.rank(), m.name()));
    }
  }
  return NameSome(empty, ", ");
}

namespace {

// Records a membership event of the epoch `next` starts (the newest kMaxMembershipEvents are
// kept) and returns the live worker count after it.
int AppendMembershipEvent(herd::v1::JobStatus& next, std::string why, int64_t now_ms, bool joined) {
  herd::v1::MembershipEvent event;
  event.set_what(std::move(why));
  event.set_detected_unix_ms(now_ms);
  event.set_joined(joined);
  const int live = LiveWorkers(next);
  event.set_workers_after(live);
  event.set_rerun_from_iteration(next.epoch_start_iteration());
  // Iterations some worker had begun (fetched the plan of, or completed) that the live workers
  // run again. In
  // a mode the shards run nothing is rolled back: the shards complete the open rounds with the
  // live workers' pushes and the survivors go on where they were.
  const plan::ModeInfo* mode = plan::FindMode(ModeAt(next, next.begun_iteration()).mode());
  const bool rolls_back = mode == nullptr || mode->runs_on != plan::RunsOn::kServers;
  event.set_iterations_rerun(
      rolls_back ? std::max<int64_t>(0, next.begun_iteration() - next.epoch_start_iteration() + 1)
                 : 0);
  auto* events = next.mutable_membership_events();
  if (events->size() >= kMaxMembershipEvents) events->erase(events->begin());
  *events->Add() = std::move(event);
  return live;
}

}  // namespace

void NoteWorkerLoss(herd::v1::JobStatus& next, std::string why, int64_t now_ms) {
  next.set_membership_generation(next.membership_generation() + 1);
  const int live = AppendMembershipEvent(next, std::move(why), now_ms, /*joined=*/false);
  const int min = next.spec().elastic().min_workers();
  if (live < min && next.paused_since_unix_ms() == 0) {
    next.set_paused_since_unix_ms(now_ms);
    next.set_pause_reason(PauseReason(next));
  }
}

std::string JoinRefusal(const herd::v1::JobStatus& s, const herd::v1::ModeSpec& mode,
                        std::string_view name) {
  if (ModeShrinks(mode)) return "";
  return absl::StrFormat(
      "worker '%s' cannot join running elastic job '%s': its mode %s does not go on with "
      "another worker count (it neither shrinks nor takes a worker back); the job is unchanged",
      name, s.spec().name(), mode.mode());
}

std::string GrowRefusal(const herd::v1::JobStatus& s, const herd::v1::ModeSpec& mode,
                        std::string_view name) {
  const plan::ModeInfo* m = plan::FindMode(mode.mode());
  if (m != nullptr && m->shrinks && !m->takes_no_newcomer) return "";
  return absl::StrFormat(
      "worker '%s' cannot grow running elastic job '%s' past its %d workers, all alive: mode %s "
      "takes a worker back in a dead slot but does not grow (its workers keep the worker count "
      "their executor started with); the job is unchanged",
      name, s.spec().name(), s.workers_size(), mode.mode());
}

std::string EndRefusal(const herd::v1::JobStatus& s, std::string_view name) {
  const int64_t planned = s.planned_iterations();
  if (planned <= 0) return "";
  if (FirstIterationAfterHorizon(s) < planned) return "";
  return absl::StrFormat(
      "worker '%s' cannot join running elastic job '%s': it ends after iteration %d, and every "
      "iteration left is planned for its live workers already (they hold plans up to iteration "
      "%d); there is nothing left for it to do, and the job is unchanged",
      name, s.spec().name(), planned - 1, s.issued_iteration());
}

void NoteWorkerJoin(herd::v1::JobStatus& next, std::string why, int slot, int64_t now_ms) {
  next.set_membership_generation(next.membership_generation() + 1);
  // The newcomer starts at the epoch's boundary: its report from before its death (or none)
  // says nothing about where the job is.
  if (slot < next.progress_size()) {
    next.mutable_progress(slot)->set_iteration(next.epoch_start_iteration() - 1);
  }
  const int live = AppendMembershipEvent(next, std::move(why), now_ms, /*joined=*/true);
  if (next.paused_since_unix_ms() == 0) return;
  if (live >= next.spec().elastic().min_workers()) {
    // The workers waiting at the boundary go on; the pause's clock stops.
    next.set_paused_since_unix_ms(0);
    next.clear_pause_reason();
  } else {
    next.set_pause_reason(PauseReason(next));  // fewer empty slots, still paused
  }
}

void NoteProgress(herd::v1::JobStatus& next, int64_t now_ms) {
  if (next.paused_since_unix_ms() != 0) return;
  // Newest first: an event overtaken by a later one (a death, then the restarted worker's join
  // before the survivors completed an iteration) went on when the later one did.
  for (int i = next.membership_events_size() - 1; i >= 0; --i) {
    auto* ev = next.mutable_membership_events(i);
    if (ev->resumed_unix_ms() != 0) break;
    if (next.completed_iteration() >= ev->rerun_from_iteration()) ev->set_resumed_unix_ms(now_ms);
  }
}

std::string PauseExpired(const herd::v1::JobStatus& s, int64_t now_ms) {
  if (s.paused_since_unix_ms() == 0) return "";
  const int64_t timeout = s.spec().elastic().pending_timeout_ms();
  if (now_ms - s.paused_since_unix_ms() <= timeout) return "";
  return absl::StrFormat(
      "paused for %.1f s (pending_timeout %.1f s) with %d of %d workers, below "
      "min_workers %d; empty slots: %s",
      static_cast<double>(now_ms - s.paused_since_unix_ms()) / 1000.0,
      static_cast<double>(timeout) / 1000.0, LiveWorkers(s), s.workers_size(),
      s.spec().elastic().min_workers(), EmptySlots(s));
}

}  // namespace herd::scheduler
