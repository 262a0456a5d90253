#pragma once
// The scheduler's metrics and history, from the job status it commits (docs/metrics.md): the
// one place that maps a JobStatus onto metrics::SchedulerMetrics, and rank 0's iteration
// reports onto both the metrics and the job's history file (metrics/history.h).

#include "herd/v1/scheduler.pb.h"
#include "metrics/history.h"

namespace herd::scheduler {

// After every commit of a job's status: state, mode, epoch, progress, checkpoints that ended
// between `before` and `after`.
void RecordJobMetrics(const herd::v1::JobStatus& before, const herd::v1::JobStatus& after);

// Rank 0's report of `iteration`, accepted into `status`: the job's loss, samples/s and
// exposed communication as metrics, and a line of its history.
void RecordRankZeroIteration(const herd::v1::JobStatus& status, int64_t iteration,
                             const herd::v1::IterationStats& stats,
                             metrics::HistoryWriter& history);

}  // namespace herd::scheduler
