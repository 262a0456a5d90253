#include "checkpoint/checkpoint_id.h"

#include <charconv>
#include <set>

#include "absl/strings/str_format.h"

namespace herd::checkpoint {

std::string CheckpointId(int64_t iteration) { return absl::StrFormat("it-%08d", iteration); }

std::optional<int64_t> ParseCheckpointId(std::string_view id) {
  constexpr std::string_view kPrefix = "it-";
  if (id.size() <= kPrefix.size() || id.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const std::string_view digits = id.substr(kPrefix.size());
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  int64_t iteration = 0;
  auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), iteration);
  if (err != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return iteration;
}

std::string TempDirOf(std::string_view dir, std::string_view id) {
  return absl::StrFormat("%s/%s%s", dir, kTempPrefix, id);
}

std::string CheckpointDirOf(std::string_view dir, std::string_view id) {
  return absl::StrFormat("%s/%s", dir, id);
}

std::string StateFileName(std::string_view process) {
  return absl::StrFormat("%s%s", process, kStateSuffix);
}

absl::Status CheckFileNames(const herd::v1::CheckpointManifest& manifest) {
  std::set<std::string> seen;
  for (const auto& f : manifest.files()) {
    const std::string& p = f.process();
    const bool name_ok = !p.empty() && p.find('/') == std::string::npos && p[0] != '.' &&
                         f.file() == StateFileName(p);
    if (!name_ok) {
      return absl::InvalidArgumentError(
          absl::StrFormat("checkpoint %s: file '%s' of process '%s' is not named <process>%s",
                          manifest.id(), f.file(), p, kStateSuffix));
    }
    if (!seen.insert(p).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("checkpoint %s: process '%s' has two files", manifest.id(), p));
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::checkpoint
