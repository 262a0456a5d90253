// Engine::ExportState / ImportState: a shard's keys as topology-free training state
// (engine.h documents the names and the rules).

#include "absl/strings/str_format.h"
#include "server/engine.h"

namespace herd::server {

std::string ShardProcess(int shard) { return absl::StrFormat("shard-%d", shard); }

absl::StatusOr<checkpoint::ProcessState> Engine::ExportState(int64_t version, Deadline deadline) {
  return absl::UnimplementedError("Engine::ExportState");
}

absl::Status Engine::ImportState(const checkpoint::StateSource& from) {
  return absl::UnimplementedError("Engine::ImportState");
}

}  // namespace herd::server
