#pragma once
// Message sizes of the benchmarks: "4K", "64M", "1G" (powers of 1024) or plain byte counts.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::bench {

// Parses one size: digits with an optional suffix K, M or G (case-insensitive, an optional
// trailing "B" or "iB" is accepted: "4KiB"). Zero, empty text, unknown suffixes and values that
// overflow size_t are INVALID_ARGUMENT naming the text.
absl::StatusOr<size_t> ParseByteSize(std::string_view text);

// A comma-separated list of sizes, in the order given (duplicates kept out).
absl::StatusOr<std::vector<size_t>> ParseByteSizeList(std::string_view csv);

// 4K, 16K, ..., 64M, 256M: the default sweep.
std::vector<size_t> DefaultSizes();

// The shortest exact spelling: 4096 -> "4K", 67108864 -> "64M", 4000012 -> "4000012".
std::string FormatByteSize(size_t bytes);

}  // namespace herd::bench
