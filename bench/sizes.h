#pragma once
// Message sizes of the benchmarks: "4K", "64M", "1G" (powers of 1024) or plain byte counts.

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"

namespace herd::bench {

// Parses one size: digits with an optional suffix K, M or G (case-insensitive, an optional
// trailing "B" or "iB" is accepted: "4KiB"). Zero, empty text, unknown suffixes and values that
// overflow size_t are INVALID_ARGUMENT naming the text.
absl::StatusOr<size_t> ParseByteSize(std::string_view text);

// A comma-separated list of sizes, in the order given (duplicates kept out).
absl::StatusOr<std::vector<size_t>> ParseByteSizeList(std::string_view csv);

// A comma-separated list, each item read by `parse` (std::string_view -> absl::StatusOr<T>), in
// the order given, duplicates dropped; the first item's error otherwise.
template <typename T, typename Parse>
absl::StatusOr<std::vector<T>> ParseCsv(std::string_view csv, Parse parse) {
  std::vector<T> out;
  for (absl::string_view item : absl::StrSplit(absl::string_view(csv.data(), csv.size()), ',')) {
    absl::StatusOr<T> v = parse(std::string_view(item.data(), item.size()));
    if (!v.ok()) return v.status();
    if (std::find(out.begin(), out.end(), *v) == out.end()) out.push_back(*std::move(v));
  }
  return out;
}

// 4K, 16K, ..., 64M, 256M: the default sweep.
std::vector<size_t> DefaultSizes();

// The shortest exact spelling: 4096 -> "4K", 67108864 -> "64M", 4000012 -> "4000012".
std::string FormatByteSize(size_t bytes);

}  // namespace herd::bench
