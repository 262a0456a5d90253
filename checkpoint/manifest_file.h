#pragma once
// The MANIFEST file of a checkpoint (docs/checkpoint.md, "Format"):
//
//   "HERDMANI"  u64 payload length  payload (CheckpointManifest, binary protobuf)
//   u64 XXH3-64 of everything before it
//
// so a truncated, extended or altered manifest is refused before its contents are trusted.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "herd/v1/checkpoint.pb.h"

namespace herd::checkpoint {

std::string EncodeManifest(const herd::v1::CheckpointManifest& manifest);

// DATA_LOSS naming `path` (used in messages only) when `data` is not a whole manifest.
absl::StatusOr<herd::v1::CheckpointManifest> DecodeManifest(std::string_view data,
                                                            const std::string& path);

}  // namespace herd::checkpoint
