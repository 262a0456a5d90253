#pragma once
// Checks of the bounds in limits.h that several scheduler files share: text fields, the size
// of a job's state, the shard map's size in closed form, and messages that echo input.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "herd/v1/scheduler.pb.h"

namespace herd::scheduler {

// `s` for an error message: cut to limits::kMaxEchoBytes (with the length that was cut) and
// with control bytes written as \xNN, so a megabyte or an escape sequence sent by a client
// never reaches a message, a log or an operator's terminal whole.
std::string Echo(std::string_view s);

// INVALID_ARGUMENT naming `field` unless `value` has 1..max_bytes bytes (0..max_bytes when
// `may_be_empty`) and no control byte (below 0x20, or 0x7f): names and reasons are printed in
// logs, tables and terminals.
absl::Status CheckText(std::string_view field, std::string_view value, size_t max_bytes,
                       bool may_be_empty = false);

// The number of shard-map entries the spec's tensors make (plan/shard_map.h), computed without
// building the map; saturates at INT64_MAX. Assumes dimensions >= 1.
int64_t ShardEntryCount(const herd::v1::JobSpec& spec);

// RESOURCE_EXHAUSTED when `next` serialized would exceed limits::kMaxJobStatusBytes; `what`
// says what would have grown it ("registering worker 'w3'").
absl::Status CheckJobStatusSize(const herd::v1::JobStatus& next, std::string_view what);

// `items` joined with `separator`, the first `named` of them, then "and N more": a list of
// members that goes into the job's state or a view (deaths, missing reports, empty ranks) stays
// a few hundred bytes however many thousand members it counts.
inline constexpr size_t kNamedInList = 4;
std::string NameSome(const std::vector<std::string>& items, std::string_view separator,
                     size_t named = kNamedInList);

// An error message cut to limits::kMaxErrorMessageBytes (the service edge applies it to every
// answer).
std::string CutMessage(std::string_view message);

}  // namespace herd::scheduler
