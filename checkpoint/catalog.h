#pragma once
// Finding and checking the checkpoints of a directory: what `herd checkpoint list | verify`
// show, and which checkpoint `--resume DIR` takes.
//
// A path names either a checkpoint directory DIR (holding checkpoints DIR/<id>) or one
// checkpoint DIR/<id> (a directory with a MANIFEST).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/env.h"
#include "herd/v1/checkpoint.pb.h"

namespace herd::checkpoint {

// Whether `path` names one checkpoint (DIR/<id>: a MANIFEST in it, or named like an id) rather
// than a directory of them.
bool IsCheckpointPath(Env& env, const std::string& path);

struct CheckpointInfo {
  std::string id;
  std::string path;       // DIR/<id>
  int64_t iteration = 0;  // from the id
  // Whether the manifest was read and its checksum holds; `manifest` is set only then, as its
  // header: what it says of the job, the run and the mode, without its files and layout (a
  // directory of many checkpoints of a large model would hold them all at once; a reader
  // that needs them reads the one checkpoint it chose).
  bool manifest_ok = false;
  herd::v1::CheckpointManifest manifest;
  int files = 0;  // the files the manifest names
  // Why this is not a whole checkpoint ("" when manifest_ok and every file is present with its
  // size; checksums of the files are not read by ListCheckpoints: VerifyCheckpoint does that).
  std::string problem;
  int64_t bytes = 0;    // the files the manifest names, by the manifest
  bool latest = false;  // DIR/LATEST names it
};

// The checkpoints of DIR, oldest first: every entry named like an id (checkpoint_id.h),
// including broken ones (with `problem`). Temporary and trash directories are not listed.
// NOT_FOUND when DIR does not exist, FAILED_PRECONDITION when it is not a directory.
absl::StatusOr<std::vector<CheckpointInfo>> ListCheckpoints(Env& env, const std::string& dir);

// Reads DIR/<id>/MANIFEST and checks its checksum, its format and what it says
// (manifest_check.h). DATA_LOSS naming the file when it is corrupt, truncated or says what its
// files cannot hold, NOT_FOUND when there is none, FAILED_PRECONDITION for a format version this
// build does not read or a MANIFEST that is not a regular file.
absl::StatusOr<herd::v1::CheckpointManifest> ReadManifest(Env& env, const std::string& path);

// Reads every byte of checkpoint `path` (DIR/<id>) and checks every checksum: the manifest's,
// every file's size and checksum, every extent's checksum and bounds; and what export and a
// resume rely on besides (manifest_check.h: every tensor of the layout has its parameters,
// whole). The first failure as DATA_LOSS naming the file, the extent, the expected and the
// actual checksum (or size); FAILED_PRECONDITION for a file that is not a regular file.
absl::Status VerifyCheckpoint(Env& env, const std::string& path);

// What VerifyCheckpoint checks of checkpoint `path`'s manifest alone (no state file read): it
// is the manifest of DIR/<id> (its id), and every tensor's parameters are whole where a
// resume reads them (manifest_check.h, CheckCoverage). DATA_LOSS naming what is wrong.
absl::Status CheckManifestOfCheckpoint(const herd::v1::CheckpointManifest& manifest,
                                       const std::string& path);

// Why `path`, which is there, cannot be a checkpoint's file (FAILED_PRECONDITION "not a
// regular file"); OK when it is a regular file.
absl::Status RegularFileProblem(Env& env, const std::string& path);

struct ResolvedCheckpoint {
  std::string path;  // DIR/<id>
  std::string id;
  herd::v1::CheckpointManifest manifest;
  // Newer checkpoints passed over, each "<id>: <why>" (a DATA_LOSS message, a missing file),
  // newest first: at most kMaxSkippedListed of them, each cut to kMaxSkippedBytes, then one
  // line counting the rest. It is kept in the job's status and printed to the operator, so a
  // directory of a thousand broken checkpoints must not make it grow with them.
  std::vector<std::string> skipped;
  static constexpr size_t kMaxSkippedListed = 8;
  static constexpr size_t kMaxSkippedBytes = 512;
};

// The checkpoint `path` names, verified (VerifyCheckpoint):
//  - DIR/<id>: that one, or its error (no fallback: the caller asked for it);
//  - DIR: the newest checkpoint that verifies, newer broken ones listed in `skipped`;
//    NOT_FOUND (with what was skipped and why) when none verifies or DIR holds none.
absl::StatusOr<ResolvedCheckpoint> ResolveCheckpoint(Env& env, const std::string& path);

}  // namespace herd::checkpoint
