#include "checkpoint/commit.h"

namespace herd::checkpoint {

absl::Status Commit(Env& env, const std::string& dir,
                    const herd::v1::CheckpointManifest& manifest) {
  return absl::UnimplementedError("Commit");
}

absl::Status Abort(Env& env, const std::string& dir, const std::string& id) {
  return absl::UnimplementedError("Abort");
}

absl::Status ApplyRetention(Env& env, const std::string& dir, int keep_last, int keep_every) {
  return absl::UnimplementedError("ApplyRetention");
}

}  // namespace herd::checkpoint
