#include "scheduler/stored_job.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "scheduler/bounds.h"
#include "scheduler/job_spec.h"
#include "scheduler/limits.h"

namespace herd::scheduler {
namespace {

// An ending adds a few KiB of reasons to a status at the bound; a record above this was not
// written by a scheduler that kept the bound.
constexpr size_t kStoredSlackBytes = 64 << 10;

absl::Status Bad(std::string_view key_name, std::string_view what) {
  return absl::DataLossError(absl::StrFormat("job record '%s': %s", Echo(key_name), what));
}

bool KnownState(herd::v1::JobState s) {
  switch (s) {
    case herd::v1::JOB_PENDING:
    case herd::v1::JOB_RUNNING:
    case herd::v1::JOB_COMPLETED:
    case herd::v1::JOB_FAILED:
    case herd::v1::JOB_CANCELLED:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::Status CheckStoredJob(std::string_view key_name, const herd::v1::JobStatus& job) {
  const auto& spec = job.spec();
  if (spec.name() != key_name) {
    return Bad(key_name, absl::StrFormat("holds the spec of job '%s'", Echo(spec.name())));
  }
  if (const size_t bytes = job.ByteSizeLong();
      bytes > limits::kMaxJobStatusBytes + kStoredSlackBytes) {
    return Bad(key_name, absl::StrFormat("%d bytes, above the limit of %d", bytes,
                                         limits::kMaxJobStatusBytes));
  }
  // The stored spec is normalized; it must still pass today's validation (bounds included),
  // or planning it could do unbounded work.
  if (auto normalized = NormalizeJobSpec(spec); !normalized.ok()) {
    return Bad(key_name, absl::StrFormat("its spec is refused: %s", normalized.status().message()));
  }
  if (!KnownState(job.state())) {
    return Bad(key_name, absl::StrFormat("unknown state %d", static_cast<int>(job.state())));
  }
  // An elastic job may have grown past `workers`, up to max_workers (docs/elastic.md, "Grow").
  const int most_workers =
      spec.has_elastic() ? std::max(spec.workers(), spec.elastic().max_workers()) : spec.workers();
  if (job.workers_size() < spec.workers() || job.workers_size() > most_workers ||
      job.servers_size() != spec.servers() || job.progress_size() != job.workers_size() ||
      job.worker_results_size() > job.workers_size()) {
    return Bad(
        key_name,
        absl::StrFormat("%d worker slots, %d server slots, %d progress entries and %d "
                        "results for a spec of %d workers (at most %d) and %d servers",
                        job.workers_size(), job.servers_size(), job.progress_size(),
                        job.worker_results_size(), spec.workers(), most_workers, spec.servers()));
  }
  for (int i = 0; i < job.workers_size(); ++i) {
    if (job.workers(i).rank() != i || job.progress(i).rank() != i) {
      return Bad(key_name,
                 absl::StrFormat("worker slot %d holds rank %d", i, job.workers(i).rank()));
    }
  }
  for (int i = 0; i < job.servers_size(); ++i) {
    if (job.servers(i).rank() != i) {
      return Bad(key_name,
                 absl::StrFormat("server slot %d holds shard %d", i, job.servers(i).rank()));
    }
  }
  if (job.schedule_size() < 1 || job.schedule_size() > limits::kMaxModeSwitches ||
      job.schedule(0).from_iteration() != 0) {
    return Bad(key_name, absl::StrFormat("a mode schedule of %d entries not starting at 0",
                                         job.schedule_size()));
  }
  for (const auto& sw : job.schedule()) {
    if (auto mode = NormalizeMode(sw.mode(), spec); !mode.ok()) {
      return Bad(key_name, absl::StrFormat("its mode switch at iteration %d is refused: %s",
                                           sw.from_iteration(), mode.status().message()));
    }
  }
  if (job.epoch() < 1) return Bad(key_name, "epoch 0");
  return absl::OkStatus();
}

}  // namespace herd::scheduler
