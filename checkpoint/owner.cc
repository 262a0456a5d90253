#include "checkpoint/owner.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "checkpoint/catalog.h"
#include "checkpoint/commit.h"

namespace herd::checkpoint {
namespace {

// An owner record is two short lines.
constexpr uint64_t kMaxOwnerBytes = 4096;

std::string Normal(const std::string& path) {
  std::string p = std::filesystem::path(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::string Describe(const Owner& o) { return absl::StrFormat("job '%s' (run %s)", o.job, o.run); }

// Who DIR's checkpoints belong to, in words: its owner, or the newest manifest's job.
std::string Holder(const std::optional<Owner>& owner, const std::vector<CheckpointInfo>& list) {
  std::string who;
  if (owner.has_value()) {
    who = Describe(*owner);
  } else {
    for (auto it = list.rbegin(); it != list.rend() && who.empty(); ++it) {
      if (it->manifest_ok) {
        who = it->manifest.run().empty() ? absl::StrFormat("job '%s'", it->manifest.job())
                                         : Describe(Owner{it->manifest.job(), it->manifest.run()});
      }
    }
    if (who.empty()) who = "another run";
  }
  if (!list.empty()) who += absl::StrFormat("; newest checkpoint %s", list.back().id);
  return who;
}

}  // namespace

bool InDirectory(const std::string& checkpoint, const std::string& dir) {
  const std::filesystem::path parent = std::filesystem::path(Normal(checkpoint)).parent_path();
  if (Normal(parent.string()) == Normal(dir)) return true;
  std::error_code ec;
  return std::filesystem::equivalent(parent, dir, ec) && !ec;
}

absl::StatusOr<std::optional<Owner>> ReadOwner(Env& env, const std::string& dir) {
  const std::string path = JoinPath(dir, kOwnerFile);
  auto info = env.Stat(path);
  if (absl::IsNotFound(info.status())) return std::optional<Owner>();
  if (!info.ok()) return info.status();
  auto text = env.ReadFile(path, kMaxOwnerBytes);
  if (!text.ok()) return text.status();
  Owner o;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "job ")) o.job = std::string(line.substr(4));
    if (absl::StartsWith(line, "run ")) o.run = std::string(line.substr(4));
  }
  if (o.job.empty() || o.run.empty()) {
    return absl::DataLossError(
        absl::StrFormat("%s is not an owner record (\"job NAME\\nrun RUN\\n\")", path));
  }
  return std::optional<Owner>(std::move(o));
}

absl::Status WriteOwner(Env& env, const std::string& dir, const Owner& owner) {
  const std::string path = JoinPath(dir, kOwnerFile);
  const std::string tmp = path + ".tmp";
  absl::Status s = env.WriteFile(tmp, absl::StrFormat("job %s\nrun %s\n", owner.job, owner.run));
  if (s.ok()) s = env.Rename(tmp, path);
  if (s.ok()) s = env.SyncDir(dir);
  return s;
}

absl::Status CheckNewRun(Env& env, const std::string& dir, const std::string& job,
                         const std::string& resume_path, int64_t resume_iteration) {
  auto info = env.Stat(dir);
  if (absl::IsNotFound(info.status())) return absl::OkStatus();
  if (!info.ok()) return info.status();
  if (!info->is_dir) {
    return absl::FailedPreconditionError(
        absl::StrFormat("checkpoint directory %s is not a directory", dir));
  }
  auto owner = ReadOwner(env, dir);
  if (!owner.ok()) return owner.status();
  auto list = ListCheckpoints(env, dir);
  if (!list.ok()) return list.status();
  if (!owner->has_value() && list->empty()) return absl::OkStatus();
  if (!resume_path.empty() && InDirectory(resume_path, dir)) {
    // Continuing the lineage: its ids start after the checkpoint it resumes from, so none
    // may be there already.
    for (const CheckpointInfo& c : *list) {
      if (c.iteration > resume_iteration) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "job '%s' resumes from %s into checkpoint directory %s, which holds the newer %s: "
            "its checkpoints would take the ids of what is there. Resume from the newest "
            "checkpoint, move %s/%s away, or give another checkpoint directory",
            job, resume_path, dir, c.id, dir, c.id));
      }
    }
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "checkpoint directory %s belongs to %s: a new run of job '%s' would mix its checkpoints "
      "with them. Resume from it to continue it (--resume %s, resume_from: %s), or give another "
      "checkpoint directory",
      dir, Holder(*owner, *list), job, dir, dir));
}

absl::Status CommitAsOwner(Env& env, const std::string& dir,
                           const herd::v1::CheckpointManifest& manifest,
                           const std::string& resumed_from) {
  const Owner me{manifest.job(), manifest.run()};
  if (me.job.empty() || me.run.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "commit of %s into %s: the manifest names no job and run", manifest.id(), dir));
  }
  auto owner = ReadOwner(env, dir);
  if (!owner.ok()) return owner.status();
  const bool resumed_here = !resumed_from.empty() && InDirectory(resumed_from, dir);
  bool take = false;
  std::string holder;
  if (owner->has_value()) {
    const Owner& o = **owner;
    if (o.job == me.job && o.run == me.run) return Commit(env, dir, manifest);
    // The lineage passes to a run that resumed from its owner's checkpoint here.
    if (resumed_here) {
      auto from = ReadManifest(env, resumed_from);
      take = from.ok() && from->run() == o.run;
    }
    holder = Describe(o);
  } else {
    auto list = ListCheckpoints(env, dir);
    if (!list.ok()) return list.status();
    bool others = false;
    for (const CheckpointInfo& c : *list) {
      others |= !(c.manifest_ok && c.manifest.job() == me.job && c.manifest.run() == me.run);
    }
    take = !others || resumed_here;
    holder = Holder(std::nullopt, *list);
  }
  if (!take) {
    return absl::FailedPreconditionError(
        absl::StrFormat("checkpoint %s of %s is not committed into %s: the directory belongs to %s",
                        manifest.id(), Describe(me), dir, holder));
  }
  if (absl::Status s = WriteOwner(env, dir, me); !s.ok()) return s;
  return Commit(env, dir, manifest);
}

}  // namespace herd::checkpoint
