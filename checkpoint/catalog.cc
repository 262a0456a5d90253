#include "checkpoint/catalog.h"

namespace herd::checkpoint {

absl::StatusOr<std::vector<CheckpointInfo>> ListCheckpoints(Env& env, const std::string& dir) {
  return absl::UnimplementedError("ListCheckpoints");
}

absl::StatusOr<herd::v1::CheckpointManifest> ReadManifest(Env& env, const std::string& path) {
  return absl::UnimplementedError("ReadManifest");
}

absl::Status VerifyCheckpoint(Env& env, const std::string& path) {
  return absl::UnimplementedError("VerifyCheckpoint");
}

absl::StatusOr<ResolvedCheckpoint> ResolveCheckpoint(Env& env, const std::string& path) {
  return absl::UnimplementedError("ResolveCheckpoint");
}

}  // namespace herd::checkpoint
