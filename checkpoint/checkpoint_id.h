#pragma once
// Checkpoint ids: "it-00000120" for the checkpoint taken at (before) iteration 120. Zero
// padded so that a directory listing sorts them by iteration; the catalog sorts by the parsed
// iteration anyway, so iterations past 8 digits ("it-123456789") still sort right.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "herd/v1/checkpoint.pb.h"

namespace herd::checkpoint {

// "it-%08d". `iteration` >= 0.
std::string CheckpointId(int64_t iteration);

// The iteration of id "it-<digits>" (at least one digit), nullopt for anything else.
std::optional<int64_t> ParseCheckpointId(std::string_view id);

// The files and directories of a checkpoint directory DIR (docs/checkpoint.md, "Layout"):
//   DIR/LATEST                 the id of the newest committed checkpoint (a hint for people)
//   DIR/<id>/MANIFEST          the committed record, written last
//   DIR/<id>/<process>.state   one state file per process
//   DIR/.tmp-<id>/             a checkpoint being written (never read; removed later)
//   DIR/.trash-<id>/           a checkpoint being deleted by retention (never read)
inline constexpr std::string_view kLatestFile = "LATEST";
inline constexpr std::string_view kManifestFile = "MANIFEST";
inline constexpr std::string_view kTempPrefix = ".tmp-";
inline constexpr std::string_view kTrashPrefix = ".trash-";
inline constexpr std::string_view kStateSuffix = ".state";

// "DIR/.tmp-<id>", "DIR/<id>", "<process>.state".
std::string TempDirOf(std::string_view dir, std::string_view id);
std::string CheckpointDirOf(std::string_view dir, std::string_view id);
std::string StateFileName(std::string_view process);

// A process's name in a checkpoint ("worker-3", "shard-1") is its state file's name less
// ".state": within a file system's 255-byte names.
inline constexpr int kMaxProcessNameBytes = 200;

// OK when every file of `manifest` is named <process>.state for a process name of at most
// kMaxProcessNameBytes printable bytes without '/', not starting with '.', that no other file
// has; INVALID_ARGUMENT naming the first that is not (a manifest must never point outside its
// checkpoint's directory, nor name one file by two names).
absl::Status CheckFileNames(const herd::v1::CheckpointManifest& manifest);

}  // namespace herd::checkpoint
