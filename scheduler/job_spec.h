#pragma once
// Validation of JobSpecs and modes. A spec that passes is complete: every parameter that
// applies to its mode has a value (defaults filled in), so the stored spec says exactly how
// the job runs. The rules are listed in docs/scheduler.md ("JobSpec"); what each mode takes,
// needs and defaults to comes from the mode registry (plan/modes.h).

#include <cstdint>
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
// or compresses, no servers for a ps_* mode, teams that do not divide the workers);
// RESOURCE_EXHAUSTED: a ps_* mode whose shard map gives a shard more state than the per-shard
// limit (ShardStateBytes, MaxShardStateBytes).
absl::StatusOr<herd::v1::ModeSpec> NormalizeMode(const herd::v1::ModeSpec& mode,
                                                 const herd::v1::JobSpec& spec);

// A checkpoint or resume path the scheduler can use: no NUL byte, absolute, and not on a
// pseudo file system (/proc, /sys, /dev) that cannot hold checkpoints. INVALID_ARGUMENT
// starting with `what` otherwise.
absl::Status CheckCheckpointPath(std::string_view what, std::string_view path);

// The bytes of state the engine of the fullest shard allocates for job `spec` in mode `mode`
// (a ps_* mode), from the shard map the plans give (plan/shard_map.h): per element of its keys,
// the parameters, the optimizer's slots, ps_sync's and ps_ec's round accumulator and ps_ec's
// residual, 4 bytes each (server/shard_memory.h counts the same on the shard). `shard` is set
// to the fullest shard's id.
int64_t ShardStateBytes(const herd::v1::JobSpec& spec, std::string_view mode, int* shard = nullptr);

// The per-shard limit the scheduler holds submissions and mode switches to (`herd scheduler
// --max-shard-state-bytes`; default kDefaultMaxShardStateBytes). Process-wide.
inline constexpr int64_t kDefaultMaxShardStateBytes = int64_t{256} << 30;
void SetMaxShardStateBytes(int64_t bytes);
int64_t MaxShardStateBytes();

}  // namespace herd::scheduler
