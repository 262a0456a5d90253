#pragma once
// Validation of JobSpecs and modes. A spec that passes is complete: every parameter that
// applies to its mode has a value (defaults filled in), so the stored spec says exactly how
// the job runs. The rules are listed in docs/scheduler.md ("JobSpec"); what each mode takes,
// needs and defaults to comes from the mode registry (plan/modes.h).

#include <string_view>

#include "absl/status/statusor.h"
#include "herd/v1/job.pb.h"

namespace herd::scheduler {

// Checks a job name: [a-z0-9][a-z0-9._-]*, at most 63 characters (INVALID_ARGUMENT).
absl::Status ValidateJobName(std::string_view name);

// Validates `spec` and returns it with defaults filled in. INVALID_ARGUMENT names the field.
absl::StatusOr<herd::v1::JobSpec> NormalizeJobSpec(const herd::v1::JobSpec& spec);

// Validates `mode` for the job `spec` and returns it with defaults filled in.
// INVALID_ARGUMENT: unknown mode, a parameter out of range or one that does not apply;
// FAILED_PRECONDITION: the job cannot run the mode (integer tensors for a mode that averages
// or compresses, no servers for a ps_* mode, teams that do not divide the workers).
absl::StatusOr<herd::v1::ModeSpec> NormalizeMode(const herd::v1::ModeSpec& mode,
                                                 const herd::v1::JobSpec& spec);

}  // namespace herd::scheduler
