#pragma once
// Who commits into a checkpoint directory: one run of one job at a time. A run is one
// submission of a job ("<job>@<submitted_unix_ms>", the scheduler's JobStatus); every manifest
// it commits names it (CheckpointManifest.run), and DIR/OWNER names the run that commits there
// now. So a run retires only its own checkpoints (ApplyRetention(..., run)), never those of
// another job or of a run that finished, and two runs never commit the same id into one
// directory:
//
//   * at submission (CheckNewRun): a run may write into DIR when DIR holds no checkpoint and no
//     owner, or when it resumes from a checkpoint in DIR that no checkpoint of DIR is newer
//     than (it continues that lineage, and its ids are all newer); otherwise FAILED_PRECONDITION
//     naming DIR's owner and what to do (--resume DIR, or another directory);
//   * at each commit (CommitAsOwner): DIR/OWNER is this run, or is written to say so when DIR
//     has no owner yet, or when its owner is the run whose checkpoint this one resumed from (it
//     takes the lineage over); anything else is FAILED_PRECONDITION and nothing is committed (a
//     run that a later run took over stops committing there).
//
// DIR/OWNER is text, "job NAME\nrun RUN\n", replaced atomically (written beside, fsynced,
// renamed, DIR fsynced). One committer per run (the scheduler); see commit.h for the rest.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/env.h"
#include "herd/v1/checkpoint.pb.h"

namespace herd::checkpoint {

inline constexpr std::string_view kOwnerFile = "OWNER";

struct Owner {
  std::string job;
  std::string run;
};

// DIR/OWNER (nullopt when there is none). DATA_LOSS when it is not an owner record.
absl::StatusOr<std::optional<Owner>> ReadOwner(Env& env, const std::string& dir);
absl::Status WriteOwner(Env& env, const std::string& dir, const Owner& owner);

// Whether a new run of `job` may commit into `dir` (see above). `resume_path` is the checkpoint
// the run resumes from as resolved (DIR/<id>; "" when it does not resume) and
// `resume_iteration` its iteration. OK when `dir` does not exist yet.
absl::Status CheckNewRun(Env& env, const std::string& dir, const std::string& job,
                         const std::string& resume_path, int64_t resume_iteration);

// Commits `manifest` (whose `job` and `run` name this run) into `dir` as its owner: checks or
// takes DIR/OWNER as above, then Commit (commit.h). `resumed_from` is the checkpoint this run
// resumed from ("" for none).
absl::Status CommitAsOwner(Env& env, const std::string& dir,
                           const herd::v1::CheckpointManifest& manifest,
                           const std::string& resumed_from);

// Whether `checkpoint` (DIR/<id>) lies in `dir`.
bool InDirectory(const std::string& checkpoint, const std::string& dir);

}  // namespace herd::checkpoint
