#pragma once
// Committing, aborting and retiring checkpoints: the steps after every process has written its
// state file into DIR/.tmp-<id>/ (writer.h). One committer per DIR at a time (the scheduler,
// or `herd local`); the processes only write their files.
//
// The crash argument (docs/checkpoint.md, "Atomicity"): a checkpoint is the directory DIR/<id>
// and nothing else; DIR/<id> appears by one rename(2) of a directory whose files, MANIFEST last,
// were all fsynced before, so a reader sees either no DIR/<id> or a whole one. LATEST is only
// a hint (replaced by rename too); readers find checkpoints by listing DIR.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "checkpoint/env.h"
#include "herd/v1/checkpoint.pb.h"

namespace herd::checkpoint {

// The format of the files this library writes (CheckpointManifest.format_version).
inline constexpr int kFormatVersion = 1;

// Commits checkpoint `manifest.id()`: checks that every file the manifest names is in
// DIR/.tmp-<id> with its size, writes MANIFEST (checksummed) there, fsyncs it and the
// directory, renames DIR/.tmp-<id> to DIR/<id>, fsyncs DIR, replaces DIR/LATEST atomically
// (write LATEST.tmp, fsync, rename, fsync DIR), and then removes the temporary directories of
// checkpoints older than this one (a crashed or aborted save) and retention's trash.
// The manifest's format_version is set when 0. Errors: INVALID_ARGUMENT for a manifest without
// an id, ALREADY_EXISTS when DIR/<id> is there, DATA_LOSS naming a missing or short file, the
// Env's error otherwise. On error nothing committed changed (DIR/.tmp-<id> may be left: Abort).
absl::Status Commit(Env& env, const std::string& dir, const herd::v1::CheckpointManifest& manifest);

// Gives up checkpoint `id`: removes DIR/.tmp-<id>. OK when there is none.
absl::Status Abort(Env& env, const std::string& dir, const std::string& id);

// Deletes committed checkpoints of run `run` in DIR beyond the policy: of that run's
// checkpoints (their manifest's `run`), keeps the newest `keep_last` (all when <= 0), every one
// whose iteration is a multiple of `keep_every` (none such when <= 0), and in any case the
// newest. Only checkpoints older than the run's newest whole one (manifest valid, every file
// present with its size) are deleted, so nothing goes before a newer checkpoint has committed.
// Checkpoints of other runs and jobs (and those whose manifest cannot be read) are never
// touched (owner.h). An empty `run` applies the policy to every checkpoint of DIR (tools and
// tests). A deleted checkpoint is first renamed to DIR/.trash-<id>, so a half-deleted one never
// looks like a checkpoint.
absl::Status ApplyRetention(Env& env, const std::string& dir, int keep_last, int keep_every,
                            const std::string& run = "");

}  // namespace herd::checkpoint
