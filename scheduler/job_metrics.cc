#include "scheduler/job_metrics.h"

#include <algorithm>
#include <chrono>

#include "common/unix_time.h"
#include "metrics/scheduler_metrics.h"
#include "scheduler/plan_builder.h"
#include "scheduler/scheduler_core.h"

namespace herd::scheduler {

void RecordJobMetrics(const herd::v1::JobStatus& before, const herd::v1::JobStatus& after) {
  metrics::SchedulerMetrics& m = metrics::SchedulerMetrics::Get();
  metrics::SchedulerMetrics::JobView view;
  view.job = after.spec().name();
  view.state = std::string(JobStateName(after.state()));
  view.mode = ModeAt(after, std::max<int64_t>(0, after.issued_iteration())).mode();
  view.epoch = after.epoch();
  view.completed_iteration = after.completed_iteration();
  view.checkpoints_committed = after.checkpoints_committed();
  m.SetJob(view);
  // A checkpoint ended when the newest committed or the newest aborted one changed.
  const auto& done = after.last_checkpoint();
  if (!done.id().empty() && done.id() != before.last_checkpoint().id()) {
    m.CheckpointEnded(view.job, true,
                      static_cast<double>(done.ended_unix_ms() - done.requested_unix_ms()) / 1000,
                      done.bytes());
  }
  const auto& failed = after.failed_checkpoint();
  if (!failed.id().empty() &&
      (failed.id() != before.failed_checkpoint().id() ||
       failed.ended_unix_ms() != before.failed_checkpoint().ended_unix_ms())) {
    m.CheckpointEnded(view.job, false, 0, 0);
  }
}

void RecordRankZeroIteration(const herd::v1::JobStatus& status, int64_t iteration,
                             const herd::v1::IterationStats& stats,
                             metrics::HistoryWriter& history) {
  int workers = 0;
  for (const auto& w : status.workers()) workers += w.alive() ? 1 : 0;
  metrics::HistoryRecord r;
  r.iteration = iteration;
  r.loss = stats.loss();
  r.iteration_seconds = stats.iteration_seconds();
  // Rank 0's rate times the workers, as the job's result counts it.
  r.samples_per_second = stats.iteration_seconds() > 0 ? static_cast<double>(stats.samples()) *
                                                             workers / stats.iteration_seconds()
                                                       : 0;
  r.exposed_comm_seconds = stats.exposed_comm_seconds();
  r.mode = ModeAt(status, iteration).mode();
  r.epoch = status.epoch();
  r.workers = workers;
  r.unix_ms = NowUnixMs();
  metrics::SchedulerMetrics::Get().RecordIteration(status.spec().name(), r.loss,
                                                   r.samples_per_second, r.exposed_comm_seconds);
  history.Append(status.spec().name(), r);
}

}  // namespace herd::scheduler
