#pragma once
// The names `herd local` gives its processes: each worker's and shard's name with the scheduler
// (`--name`), its log (`logs/NAME.log`) and its metrics target. A restarted worker keeps its
// name, so it takes its slot back.

#include <charconv>
#include <optional>
#include <string>
#include <string_view>

namespace herd::cli {

inline constexpr std::string_view kLocalWorkerPrefix = "worker-";
inline constexpr std::string_view kLocalServerPrefix = "server-";

inline std::string LocalWorkerName(int w) {
  return std::string(kLocalWorkerPrefix) + std::to_string(w);
}
inline std::string LocalServerName(int s) {
  return std::string(kLocalServerPrefix) + std::to_string(s);
}

// The index of worker `name` ("worker-3": 3); nullopt for any other process.
inline std::optional<int> LocalWorkerIndex(std::string_view name) {
  if (!name.starts_with(kLocalWorkerPrefix)) return std::nullopt;
  const std::string_view digits = name.substr(kLocalWorkerPrefix.size());
  int w = -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), w);
  if (error != std::errc() || end != digits.data() + digits.size() || w < 0) return std::nullopt;
  return w;
}

}  // namespace herd::cli
