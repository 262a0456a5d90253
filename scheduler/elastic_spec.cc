#include "scheduler/elastic_spec.h"

#include "absl/strings/str_format.h"
#include "scheduler/limits.h"

namespace herd::scheduler {

absl::Status NormalizeElasticSpec(herd::v1::JobSpec& spec) {
  if (!spec.has_elastic()) return absl::OkStatus();
  auto* e = spec.mutable_elastic();
  const std::string& job = spec.name();
  const int workers = spec.workers();
  if (e->min_workers() == 0) e->set_min_workers(1);
  if (e->max_workers() == 0) e->set_max_workers(workers);
  if (!e->has_max_failures()) e->set_max_failures(kDefaultMaxFailures);
  if (e->pending_timeout_ms() == 0) e->set_pending_timeout_ms(kDefaultPendingTimeoutMs);
  if (e->min_workers() < 1 || e->min_workers() > workers) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s': elastic min_workers must be between 1 and workers (%d), got %d",
                        job, workers, e->min_workers()));
  }
  if (e->max_workers() < workers || e->max_workers() > limits::kMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s': elastic max_workers must be between workers (%d) and %d, got %d",
                        job, workers, limits::kMaxWorkers, e->max_workers()));
  }
  if (e->max_failures() < 0 || e->max_failures() > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job '%s': elastic max_failures must be between 0 and 1000000, got %d", job,
                        e->max_failures()));
  }
  if (e->pending_timeout_ms() < 1 || e->pending_timeout_ms() > kMaxPendingTimeoutMs) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job '%s': elastic pending_timeout must be > 0 and at most 7 days, got %d ms", job,
        e->pending_timeout_ms()));
  }
  return absl::OkStatus();
}

}  // namespace herd::scheduler
