#include "checkpoint/commit.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_format.h"
#include "checkpoint/catalog.h"
#include "checkpoint/checkpoint_id.h"
#include "checkpoint/manifest_file.h"
#include "common/logging.h"

namespace herd::checkpoint {
namespace {

// Removes what crashed or aborted saves and interrupted deletions left in DIR: temporary
// directories of checkpoints older than `committed` (no one will commit them any more: the
// committer moved past them) and every trash directory. Newer temporary directories may belong
// to a save in flight and stay. Best effort: a leftover is retried by the next commit.
void RemoveStale(Env& env, const std::string& dir, int64_t committed) {
  auto names = env.ListDir(dir);
  if (!names.ok()) return;
  for (const std::string& name : *names) {
    bool stale = name.starts_with(kTrashPrefix);
    if (name.starts_with(kTempPrefix)) {
      auto iteration = ParseCheckpointId(std::string_view(name).substr(kTempPrefix.size()));
      stale = !iteration.has_value() || *iteration < committed;
    }
    if (!stale) continue;
    absl::Status s = env.RemoveAll(JoinPath(dir, name));
    if (!s.ok()) Log().warn("checkpoint: could not remove {}: {}", name, s.ToString());
  }
}

}  // namespace

absl::Status Commit(Env& env, const std::string& dir,
                    const herd::v1::CheckpointManifest& manifest) {
  const auto iteration = ParseCheckpointId(manifest.id());
  if (!iteration.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("commit: '%s' is not a checkpoint id", manifest.id()));
  }
  if (absl::Status s = CheckFileNames(manifest); !s.ok()) return s;
  const std::string tmp = TempDirOf(dir, manifest.id());
  const std::string final_dir = CheckpointDirOf(dir, manifest.id());
  if (env.Exists(final_dir)) {
    return absl::AlreadyExistsError(
        absl::StrFormat("commit: checkpoint %s already exists", final_dir));
  }
  auto tmp_info = env.Stat(tmp);
  if (!tmp_info.ok()) {
    return absl::NotFoundError(
        absl::StrFormat("commit: %s does not exist: no process wrote its state", tmp));
  }
  // Every file the manifest names must be there whole before the manifest vouches for it.
  for (const auto& file : manifest.files()) {
    const std::string path = JoinPath(tmp, file.file());
    auto info = env.Stat(path);
    if (!info.ok()) {
      return absl::DataLossError(
          absl::StrFormat("commit: %s (%s's state) is missing", path, file.process()));
    }
    if (!info->is_regular) return RegularFileProblem(env, path);
    if (info->size != static_cast<uint64_t>(file.bytes())) {
      return absl::DataLossError(absl::StrFormat("commit: %s has %d bytes, %s reported %d", path,
                                                 info->size, file.process(), file.bytes()));
    }
  }

  herd::v1::CheckpointManifest record = manifest;
  if (record.format_version() == 0) record.set_format_version(kFormatVersion);
  record.set_iteration(*iteration);
  // The manifest last, then the directory's entries, then the one rename that commits.
  absl::Status s = env.WriteFile(JoinPath(tmp, kManifestFile), EncodeManifest(record));
  if (s.ok()) s = env.SyncDir(tmp);
  if (s.ok()) s = env.Rename(tmp, final_dir);
  if (s.ok()) s = env.SyncDir(dir);
  if (!s.ok()) return s;

  // Committed. LATEST is a hint for people and tools (readers list DIR), replaced atomically.
  const std::string latest = JoinPath(dir, kLatestFile);
  const std::string latest_tmp = latest + ".tmp";
  s = env.WriteFile(latest_tmp, manifest.id() + "\n");
  if (s.ok()) s = env.Rename(latest_tmp, latest);
  if (s.ok()) s = env.SyncDir(dir);
  if (!s.ok()) {
    Log().warn("checkpoint {} committed, but LATEST was not updated: {}", manifest.id(),
               s.ToString());
  }
  RemoveStale(env, dir, *iteration);
  return absl::OkStatus();
}

absl::Status Abort(Env& env, const std::string& dir, const std::string& id) {
  if (!ParseCheckpointId(id).has_value()) {
    return absl::InvalidArgumentError(absl::StrFormat("abort: '%s' is not a checkpoint id", id));
  }
  return env.RemoveAll(TempDirOf(dir, id));
}

absl::Status ApplyRetention(Env& env, const std::string& dir, int keep_last, int keep_every,
                            const std::string& run) {
  auto listed = ListCheckpoints(env, dir);
  if (!listed.ok()) return listed.status();
  std::vector<CheckpointInfo> all;  // oldest first: the run's own (every one for run "")
  for (CheckpointInfo& c : *listed) {
    if (run.empty() || (c.manifest_ok && c.manifest.run() == run)) all.push_back(std::move(c));
  }
  // The newest whole checkpoint: nothing at or after it is deleted.
  int64_t newest_whole = -1;
  for (const CheckpointInfo& c : all) {
    if (c.problem.empty()) newest_whole = std::max(newest_whole, c.iteration);
  }
  if (newest_whole < 0) return absl::OkStatus();

  absl::Status first_error;
  const int n = static_cast<int>(all.size());
  for (int i = 0; i < n; ++i) {
    const CheckpointInfo& c = all[i];
    const bool recent = keep_last <= 0 || i >= n - keep_last;
    const bool milestone = keep_every > 0 && c.iteration % keep_every == 0;
    if (recent || milestone || c.iteration >= newest_whole) continue;
    // Renamed out of the catalog first, so a deletion cut short leaves no half checkpoint.
    const std::string trash = JoinPath(dir, std::string(kTrashPrefix) + c.id);
    absl::Status s = env.RemoveAll(trash);
    if (s.ok()) s = env.Rename(c.path, trash);
    if (s.ok()) s = env.SyncDir(dir);
    if (s.ok()) s = env.RemoveAll(trash);
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  return first_error;
}

}  // namespace herd::checkpoint
