#pragma once
// Link rates of the emulator, spelled like tc spells them: "1gbit", "10gbit", "200mbit",
// "500kbit" (powers of 1000, bits per second) or a plain number of bits per second.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace herd::emulator {

// INVALID_ARGUMENT naming the text for anything else, and for rates outside
// [kMinRate, kMaxRate] (below it tbf's token bucket is coarser than one packet; above it no
// emulated link on one machine is meaningful).
absl::StatusOr<uint64_t> ParseRate(std::string_view text);
inline constexpr uint64_t kMinRate = 1'000'000;           // 1 Mbit/s
inline constexpr uint64_t kMaxRate = 400'000'000'000ull;  // 400 Gbit/s

// The shortest exact spelling: 1000000000 -> "1gbit", 1500000 -> "1500kbit", 7 -> "7bit".
std::string FormatRate(uint64_t bits_per_s);

}  // namespace herd::emulator
