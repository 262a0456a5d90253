#include "checkpoint/writer.h"

namespace herd::checkpoint {

CheckpointWriter::CheckpointWriter(Env& env) : env_(env) {}
CheckpointWriter::~CheckpointWriter() = default;

void CheckpointWriter::Stage(std::string dir, std::string id, ProcessState state, WriteDone done) {
  done(absl::UnimplementedError("CheckpointWriter::Stage"));
}

absl::Status CheckpointWriter::Drain(Deadline deadline) { return absl::OkStatus(); }

int64_t CheckpointWriter::pending_bytes() const { return 0; }

absl::StatusOr<herd::v1::CheckpointFile> WriteStateFile(Env& env, const std::string& dir,
                                                        const std::string& id,
                                                        const ProcessState& state) {
  return absl::UnimplementedError("WriteStateFile");
}

}  // namespace herd::checkpoint
