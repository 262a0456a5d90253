#include "scheduler/bounds.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/dtype.h"
#include "scheduler/limits.h"

namespace herd::scheduler {
namespace {

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7f; }

}  // namespace

std::string Echo(std::string_view s) {
  const std::string_view head = s.substr(0, limits::kMaxEchoBytes);
  std::string out;
  out.reserve(head.size() + 32);
  for (unsigned char c : head) {
    if (IsControl(c)) {
      out += absl::StrFormat("\\x%02x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (s.size() > head.size()) {
    out += absl::StrFormat("... (%d bytes)", s.size());
  }
  return out;
}

absl::Status CheckText(std::string_view field, std::string_view value, size_t max_bytes,
                       bool may_be_empty) {
  if (value.empty() && !may_be_empty) {
    return absl::InvalidArgumentError(absl::StrFormat("%s is empty", field));
  }
  if (value.size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s has %d bytes, more than the limit of %d ('%s')", field, value.size(),
                        max_bytes, Echo(value)));
  }
  const auto bad = std::find_if(value.begin(), value.end(),
                                [](char c) { return IsControl(static_cast<unsigned char>(c)); });
  if (bad != value.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s contains the control byte 0x%02x at offset %d ('%s'); use printable "
                        "characters",
                        field, static_cast<unsigned char>(*bad), bad - value.begin(), Echo(value)));
  }
  return absl::OkStatus();
}

int64_t ShardEntryCount(const herd::v1::JobSpec& spec) {
  constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max();
  int64_t total = 0;
  for (const auto& t : spec.tensors()) {
    auto dt = ParseDType(t.dtype());
    const int64_t esize = dt.ok() ? std::max<int64_t>(DTypeSize(*dt), 1) : 1;
    const int64_t per_chunk = std::max<int64_t>(spec.chunk_bytes() / esize, 1);
    // Elements, saturating: the caller may not have bounded the shape yet.
    int64_t elements = 1;
    for (int64_t d : t.shape()) {
      if (d < 1) return kSaturated;
      if (elements > kSaturated / d) return kSaturated;
      elements *= d;
    }
    const int64_t chunks = elements / per_chunk + (elements % per_chunk != 0);
    if (total > kSaturated - chunks) return kSaturated;
    total += chunks;
  }
  return total;
}

absl::Status CheckJobStatusSize(const herd::v1::JobStatus& next, std::string_view what) {
  const size_t bytes = next.ByteSizeLong();
  if (bytes > limits::kMaxJobStatusBytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s would make the state of job '%s' %d bytes, more than the limit of %d (every status "
        "and plan answer carries it); use shorter names and addresses, fewer tensors or metrics",
        what, Echo(next.spec().name()), bytes, limits::kMaxJobStatusBytes));
  }
  return absl::OkStatus();
}

std::string NameSome(const std::vector<std::string>& items, std::string_view separator,
                     size_t named) {
  const std::string sep(separator);
  if (items.size() <= named) return absl::StrJoin(items, sep);
  return absl::StrFormat("%s%sand %d more",
                         absl::StrJoin(items.begin(), items.begin() + named, sep), sep,
                         items.size() - named);
}

std::string CutMessage(std::string_view message) {
  if (message.size() <= limits::kMaxErrorMessageBytes) return std::string(message);
  return absl::StrFormat("%s ... (%d bytes cut)", message.substr(0, limits::kMaxErrorMessageBytes),
                         message.size() - limits::kMaxErrorMessageBytes);
}

}  // namespace herd::scheduler
