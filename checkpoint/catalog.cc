#include "checkpoint/catalog.h"

#include <algorithm>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_id.h"
#include "checkpoint/commit.h"
#include "checkpoint/manifest_check.h"
#include "checkpoint/manifest_file.h"
#include "checkpoint/state_file.h"

namespace herd::checkpoint {
namespace {

std::string BaseName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// "" when every file the manifest names is in `path` with its size, else what is wrong.
std::string MissingFiles(Env& env, const std::string& path,
                         const herd::v1::CheckpointManifest& manifest) {
  for (const auto& file : manifest.files()) {
    const std::string name = JoinPath(path, file.file());
    auto info = env.Stat(name);
    if (!info.ok()) return absl::StrFormat("%s is missing (%s's state)", name, file.process());
    if (!info->is_regular) return std::string(RegularFileProblem(env, name).message());
    if (info->size != static_cast<uint64_t>(file.bytes())) {
      return absl::StrFormat("%s: size expected %d bytes, actual %d", name, file.bytes(),
                             info->size);
    }
  }
  return "";
}

}  // namespace

absl::Status RegularFileProblem(Env& env, const std::string& path) {
  // The Env says why without opening it (NewRandomAccessFile refuses special files by stat).
  auto opened = env.NewRandomAccessFile(path);
  if (!opened.ok()) return opened.status();
  return absl::OkStatus();
}

bool IsCheckpointPath(Env& env, const std::string& path) {
  return env.Exists(JoinPath(path, kManifestFile)) || ParseCheckpointId(BaseName(path)).has_value();
}

absl::StatusOr<herd::v1::CheckpointManifest> ReadManifest(Env& env, const std::string& path) {
  const std::string file = JoinPath(path, kManifestFile);
  // A manifest is kilobytes (a few hundred bytes per extent); anything huge is not one.
  constexpr uint64_t kMaxManifestBytes = kMaxWholeFileBytes;
  if (auto info = env.Stat(file); info.ok() && info->size > kMaxManifestBytes) {
    return absl::DataLossError(absl::StrFormat("%s: %d bytes, not a manifest (at most %d)", file,
                                               info->size, kMaxManifestBytes));
  }
  auto data = env.ReadFile(file, kMaxManifestBytes);
  if (!data.ok()) {
    if (absl::IsNotFound(data.status())) {
      return absl::NotFoundError(
          absl::StrFormat("%s has no %s: not a committed checkpoint", path, kManifestFile));
    }
    return data.status();
  }
  auto manifest = DecodeManifest(*data, file);
  if (!manifest.ok()) return manifest.status();
  if (manifest->format_version() > kFormatVersion || manifest->format_version() < 1) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: format version %d; this herd reads versions 1 to %d", file,
                        manifest->format_version(), kFormatVersion));
  }
  if (absl::Status s = CheckFileNames(*manifest); !s.ok()) {
    return absl::DataLossError(absl::StrFormat("%s: %s", file, s.message()));
  }
  // Nothing a manifest says is used before it is checked (manifest_check.h).
  if (absl::Status s = CheckManifest(*manifest, file); !s.ok()) return s;
  return manifest;
}

absl::StatusOr<std::vector<CheckpointInfo>> ListCheckpoints(Env& env, const std::string& dir) {
  auto info = env.Stat(dir);
  if (!info.ok()) return info.status();
  if (!info->is_dir) {
    return absl::FailedPreconditionError(absl::StrFormat("%s is not a directory", dir));
  }
  auto names = env.ListDir(dir);
  if (!names.ok()) return names.status();
  std::string latest;
  // LATEST is a hint of a few bytes: anything else there (a FIFO, a huge file) is ignored.
  if (auto text = env.ReadFile(JoinPath(dir, kLatestFile), 256); text.ok()) {
    latest = std::string(absl::StripAsciiWhitespace(*text));
  }
  std::vector<CheckpointInfo> out;
  for (const std::string& name : *names) {
    const auto iteration = ParseCheckpointId(name);
    if (!iteration.has_value()) continue;
    CheckpointInfo c;
    c.id = name;
    c.path = JoinPath(dir, name);
    c.iteration = *iteration;
    c.latest = name == latest;
    auto manifest = ReadManifest(env, c.path);
    if (!manifest.ok()) {
      c.problem = std::string(manifest.status().message());
    } else {
      c.manifest_ok = true;
      c.manifest = *std::move(manifest);
      // The sizes come from the file: a negative one, or a sum past int64, is no writer's.
      bool sizes_add_up = true;
      for (const auto& f : c.manifest.files()) {
        sizes_add_up &=
            f.bytes() >= 0 && f.bytes() <= std::numeric_limits<int64_t>::max() - c.bytes;
        if (!sizes_add_up) break;
        c.bytes += f.bytes();
      }
      if (!sizes_add_up) {
        c.bytes = 0;
        c.problem = absl::StrFormat(
            "%s/%s lists a file size that is negative or makes the total "
            "pass 2^63 bytes",
            c.path, kManifestFile);
      } else if (c.manifest.id() != name) {
        c.problem =
            absl::StrFormat("%s/%s is of checkpoint %s", c.path, kManifestFile, c.manifest.id());
      } else {
        c.problem = MissingFiles(env, c.path, c.manifest);
      }
      c.files = c.manifest.files_size();
      c.manifest.clear_files();
      c.manifest.clear_layout();
    }
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) {
    return a.iteration != b.iteration ? a.iteration < b.iteration : a.id < b.id;
  });
  return out;
}

namespace {

// VerifyCheckpoint, answering with the manifest it verified (the one a resume must use: a
// second read could find another).
absl::StatusOr<herd::v1::CheckpointManifest> VerifiedManifest(Env& env, const std::string& path) {
  auto manifest = ReadManifest(env, path);
  if (!manifest.ok()) {
    // A checkpoint without its manifest (or with a broken one) has lost data.
    if (absl::IsNotFound(manifest.status()) && env.Exists(path)) {
      return absl::DataLossError(manifest.status().message());
    }
    return manifest.status();
  }
  if (absl::Status s = CheckManifestOfCheckpoint(*manifest, path); !s.ok()) return s;
  for (const auto& file : manifest->files()) {
    absl::Status s = VerifyStateFile(env, path, file);
    if (!s.ok()) return s;
  }
  return manifest;
}

}  // namespace

absl::Status CheckManifestOfCheckpoint(const herd::v1::CheckpointManifest& manifest,
                                       const std::string& path) {
  if (manifest.id() != BaseName(path)) {
    return absl::DataLossError(
        absl::StrFormat("%s/%s is of checkpoint %s", path, kManifestFile, manifest.id()));
  }
  // What export and a resume take from it besides: every tensor's parameters, whole.
  return CheckCoverage(manifest, JoinPath(path, kManifestFile));
}

absl::Status VerifyCheckpoint(Env& env, const std::string& path) {
  return VerifiedManifest(env, path).status();
}

absl::StatusOr<ResolvedCheckpoint> ResolveCheckpoint(Env& env, const std::string& path) {
  auto info = env.Stat(path);
  if (!info.ok()) return info.status();
  if (!info->is_dir) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is not a checkpoint directory (not a directory)", path));
  }
  if (IsCheckpointPath(env, path)) {
    auto manifest = VerifiedManifest(env, path);
    if (!manifest.ok()) return manifest.status();
    ResolvedCheckpoint r;
    r.path = path;
    r.manifest = *std::move(manifest);
    r.id = r.manifest.id();
    return r;
  }
  auto listed = ListCheckpoints(env, path);
  if (!listed.ok()) return listed.status();
  if (listed->empty()) {
    return absl::NotFoundError(
        absl::StrFormat("%s holds no checkpoint (no directory named like it-00000120)", path));
  }
  ResolvedCheckpoint r;
  size_t unlisted = 0;  // skipped beyond kMaxSkippedListed
  auto count_unlisted = [&] {
    if (unlisted > 0) {
      r.skipped.push_back(absl::StrFormat("and %d older broken checkpoint(s)", unlisted));
    }
  };
  for (auto it = listed->rbegin(); it != listed->rend(); ++it) {
    absl::StatusOr<herd::v1::CheckpointManifest> verified =
        it->problem.empty()
            ? VerifiedManifest(env, it->path)
            : absl::StatusOr<herd::v1::CheckpointManifest>(absl::DataLossError(it->problem));
    if (!verified.ok()) {
      const absl::Status& s = verified.status();
      if (r.skipped.size() < ResolvedCheckpoint::kMaxSkippedListed) {
        std::string why = absl::StrFormat("%s: %s", it->id, s.message());
        if (why.size() > ResolvedCheckpoint::kMaxSkippedBytes) {
          why.resize(ResolvedCheckpoint::kMaxSkippedBytes);
          why += " ...";
        }
        r.skipped.push_back(std::move(why));
      } else {
        ++unlisted;
      }
      continue;
    }
    count_unlisted();
    r.path = it->path;
    r.id = it->id;
    r.manifest = *std::move(verified);
    return r;
  }
  count_unlisted();
  return absl::NotFoundError(
      absl::StrFormat("%s holds no good checkpoint: %s", path, absl::StrJoin(r.skipped, "; ")));
}

}  // namespace herd::checkpoint
