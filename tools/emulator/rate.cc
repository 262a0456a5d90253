#include "tools/emulator/rate.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace herd::emulator {
namespace {

constexpr std::pair<const char*, uint64_t> kUnits[] = {
    {"gbit", 1'000'000'000ull}, {"mbit", 1'000'000ull}, {"kbit", 1'000ull}, {"bit", 1ull}};

}  // namespace

absl::StatusOr<uint64_t> ParseRate(std::string_view text) {
  const std::string lower = absl::AsciiStrToLower(std::string(text));
  absl::string_view digits = lower;
  uint64_t unit = 1;
  for (const auto& [suffix, factor] : kUnits) {
    if (absl::EndsWith(digits, suffix)) {
      digits.remove_suffix(absl::string_view(suffix).size());
      unit = factor;
      break;
    }
  }
  uint64_t value = 0;
  if (digits.empty() || !absl::SimpleAtoi(digits, &value) || value > kMaxRate / unit ||
      value * unit < kMinRate) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "'%s' is not a link rate between 1mbit and 400gbit (e.g. 1gbit, 10gbit, 200mbit)", text));
  }
  return value * unit;
}

std::string FormatRate(uint64_t bits_per_s) {
  for (const auto& [suffix, factor] : kUnits) {
    if (bits_per_s >= factor && bits_per_s % factor == 0) {
      return absl::StrFormat("%d%s", bits_per_s / factor, suffix);
    }
  }
  return absl::StrFormat("%dbit", bits_per_s);
}

}  // namespace herd::emulator
