#include "bench/sizes.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "absl/strings/str_format.h"

namespace herd::bench {
namespace {

// Lower-cased copy for suffix comparison (absl's helpers take absl::string_view here).
std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

absl::StatusOr<size_t> ParseByteSize(std::string_view text) {
  std::string_view s = Trim(text);
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bad size '%s': %s (examples: 4K, 64M, 1G, 4000012)", text, why));
  };
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  if (digits == 0) return bad("expected a number of bytes");

  const std::string suffix = Lower(s.substr(digits));
  int shift = 0;
  if (suffix.empty() || suffix == "b") {
    shift = 0;
  } else if (suffix == "k" || suffix == "kb" || suffix == "kib") {
    shift = 10;
  } else if (suffix == "m" || suffix == "mb" || suffix == "mib") {
    shift = 20;
  } else if (suffix == "g" || suffix == "gb" || suffix == "gib") {
    shift = 30;
  } else {
    return bad("unknown suffix (use K, M or G, powers of 1024)");
  }

  size_t value = 0;
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  for (size_t i = 0; i < digits; ++i) {
    const size_t d = static_cast<size_t>(s[i] - '0');
    if (value > (kMax - d) / 10) return bad("too large");
    value = value * 10 + d;
  }
  if (value > (kMax >> shift)) return bad("too large");
  value <<= shift;
  if (value == 0) return bad("must be at least one byte");
  return value;
}

absl::StatusOr<std::vector<size_t>> ParseByteSizeList(std::string_view csv) {
  return ParseCsv<size_t>(csv, ParseByteSize);
}

std::vector<size_t> DefaultSizes() {
  std::vector<size_t> sizes;
  for (size_t s = size_t{4} << 10; s <= size_t{256} << 20; s *= 4) sizes.push_back(s);
  return sizes;
}

std::string FormatByteSize(size_t bytes) {
  if (bytes != 0 && bytes % (size_t{1} << 30) == 0) return absl::StrFormat("%uG", bytes >> 30);
  if (bytes != 0 && bytes % (size_t{1} << 20) == 0) return absl::StrFormat("%uM", bytes >> 20);
  if (bytes != 0 && bytes % (size_t{1} << 10) == 0) return absl::StrFormat("%uK", bytes >> 10);
  return absl::StrFormat("%u", bytes);
}

}  // namespace herd::bench
