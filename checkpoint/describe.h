#pragma once
// What `herd checkpoint list | inspect` print, computed here so the command line only parses
// flags: a table for people and JSON for programs.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/catalog.h"
#include "herd/v1/checkpoint.pb.h"

namespace herd::checkpoint {

// One row per checkpoint, oldest first: id, iteration, when, mode, workers, shards, size, and
// "ok" / "LATEST" / the problem. Checksums are not read (that is `verify`).
std::string ListTable(const std::vector<CheckpointInfo>& checkpoints);

// {"dir": DIR, "checkpoints": [{"id", "iteration", "created_unix_ms", "job", "mode",
// "workers", "shards", "bytes", "files", "latest", "whole", "problem"}, ...]} on one line.
std::string ListJson(const std::string& dir, const std::vector<CheckpointInfo>& checkpoints);

// The manifest as JSON: protobuf's mapping of CheckpointManifest (field names as in the
// .proto; 64-bit numbers, checksums included, as decimal strings), pretty-printed.
absl::StatusOr<std::string> ManifestJson(const herd::v1::CheckpointManifest& manifest);

// "1.5 GiB", "340 KiB", "12 B".
std::string HumanBytes(int64_t bytes);

}  // namespace herd::checkpoint
