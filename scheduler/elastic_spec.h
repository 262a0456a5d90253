#pragma once
// The JobSpec's `elastic` block (docs/elastic.md): its validation and defaults, and the rules
// the scheduler applies to an elastic job's membership, in one place.

#include <cstdint>

#include "absl/status/statusor.h"
#include "herd/v1/job.pb.h"

namespace herd::scheduler {

// Defaults of the fields a spec leaves unset.
inline constexpr int32_t kDefaultMaxFailures = 3;
inline constexpr int64_t kDefaultPendingTimeoutMs = 10 * 60 * 1000;
// A paused job waits at most a week for its workers: past that a person has long given up.
inline constexpr int64_t kMaxPendingTimeoutMs = int64_t{7} * 24 * 3600 * 1000;

// Fills in the defaults of `spec.elastic` (when the spec has the block) and checks it:
// 1 <= min_workers <= workers <= max_workers <= limits::kMaxWorkers, 0 <= max_failures <=
// 1000000, 0 < pending_timeout <= a week. INVALID_ARGUMENT names the field and the value.
absl::Status NormalizeElasticSpec(herd::v1::JobSpec& spec);

// Whether the job goes on without a dead worker (the spec has the `elastic` block).
inline bool IsElastic(const herd::v1::JobSpec& spec) { return spec.has_elastic(); }

}  // namespace herd::scheduler
