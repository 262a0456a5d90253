#include "scheduler/plan_builder.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "scheduler/client/epoch_plan.h"

namespace herd::scheduler {

using herd::v1::JobStatus;

int WorkerSlots(const JobStatus& job) { return std::max(job.spec().workers(), job.workers_size()); }

std::vector<int> ParticipatingRanks(const JobStatus& job) {
  std::vector<int> ranks;
  const bool started = job.state() != herd::v1::JOB_PENDING;
  for (int r = 0; r < WorkerSlots(job); ++r) {
    if (!started || (r < job.workers_size() && job.workers(r).alive())) ranks.push_back(r);
  }
  return ranks;
}

const herd::v1::ModeSpec& ModeAt(const JobStatus& job, int64_t iteration) {
  return ModeAt(job.spec(), job.schedule(), iteration);
}

herd::v1::EpochView EpochViewOf(const JobStatus& job) {
  herd::v1::EpochView view;
  view.set_job(job.spec().name());
  view.set_epoch(job.epoch());
  view.set_epoch_start_iteration(job.epoch_start_iteration());
  view.set_epoch_reason(job.epoch_reason());
  view.set_job_state(job.state());
  if (job.state() == herd::v1::JOB_CANCELLED) view.set_end_reason(job.cancel_reason());
  if (job.state() == herd::v1::JOB_FAILED) {
    view.set_end_reason(absl::StrFormat("%s: %s", job.failed_process(), job.failure_reason()));
  }
  if (job.state() == herd::v1::JOB_PREEMPTED) view.set_end_reason(job.preempt_reason());
  const int slots = WorkerSlots(job);
  view.set_worker_slots(slots);
  const bool started = job.state() != herd::v1::JOB_PENDING;
  for (int r = 0; r < slots; ++r) {
    const bool alive = r < job.workers_size() && job.workers(r).alive();
    if (started && !alive) view.add_absent_workers(r);
    if (alive && job.workers(r).joined_epoch() != 0) {
      auto* inc = view.add_incarnations();
      inc->set_rank(r);
      inc->set_epoch(job.workers(r).joined_epoch());
    }
  }
  *view.mutable_servers() = job.servers();
  *view.mutable_schedule() = job.schedule();
  const auto& pending = job.pending_checkpoint();
  if (!pending.id().empty()) {
    auto* c = view.mutable_checkpoint();
    c->set_id(pending.id());
    c->set_iteration(pending.iteration());
    c->set_dir(pending.dir());
    c->set_preempt(pending.preempt());
  }
  view.set_membership_generation(job.membership_generation());
  view.set_paused(job.paused_since_unix_ms() != 0);
  view.set_pause_reason(job.pause_reason());
  view.set_start_iteration(job.has_resumed() ? job.resumed().iteration() : 0);
  if (job.has_resumed()) view.set_resume_from(job.resumed().path());
  view.set_planned_iterations(job.planned_iterations());
  view.set_completed_iteration(job.completed_iteration());
  view.set_tensor_count(job.spec().tensors_size());
  return view;
}

herd::v1::Plan BuildPlan(const JobStatus& job, int64_t iteration) {
  return BuildPlan(job.spec(), EpochViewOf(job), iteration);
}

}  // namespace herd::scheduler
