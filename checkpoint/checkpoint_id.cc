#include "checkpoint/checkpoint_id.h"

#include <charconv>

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

}  // namespace herd::checkpoint
