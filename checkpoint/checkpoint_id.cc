#include "checkpoint/checkpoint_id.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "absl/strings/escaping.h"
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
    // A process name becomes a file name: no separator, no hidden name, and no NUL or other
    // control byte (a NUL would cut the path short: "worker-0\0x" would name DIR/<id>/worker-0),
    // of a length a file system takes. Names are cut in the message: they come from the file.
    const bool printable = std::none_of(p.begin(), p.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    const bool name_ok = !p.empty() && p.size() <= static_cast<size_t>(kMaxProcessNameBytes) &&
                         printable && p.find('/') == std::string::npos && p[0] != '.' &&
                         f.file() == StateFileName(p);
    if (!name_ok) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "checkpoint %s: file '%s' of process '%s' is not named <process>%s (a process name "
          "of 1 to %d printable bytes, no '/', not starting with '.')",
          manifest.id(), absl::CEscape(f.file().substr(0, 80)), absl::CEscape(p.substr(0, 80)),
          kStateSuffix, kMaxProcessNameBytes));
    }
    if (!seen.insert(p).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("checkpoint %s: process '%s' has two files", manifest.id(), p));
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::checkpoint
