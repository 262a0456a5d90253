#include "checkpoint/reader.h"

namespace herd::checkpoint {

CheckpointReader::CheckpointReader(Env& env, std::string path,
                                   herd::v1::CheckpointManifest manifest)
    : env_(env), path_(std::move(path)), manifest_(std::move(manifest)) {}
CheckpointReader::~CheckpointReader() = default;

bool CheckpointReader::Has(std::string_view process, std::string_view name) const { return false; }

absl::Status CheckpointReader::Read(std::string_view process, std::string_view name, int64_t total,
                                    int64_t offset, std::span<float> out) const {
  return absl::UnimplementedError("CheckpointReader::Read");
}

std::optional<std::string> CheckpointReader::Value(std::string_view process,
                                                   std::string_view key) const {
  return std::nullopt;
}

std::vector<std::string> CheckpointReader::processes() const { return {}; }

absl::StatusOr<ProcessState> CheckpointReader::ReadProcess(std::string_view process) const {
  return absl::UnimplementedError("CheckpointReader::ReadProcess");
}

absl::Status CheckpointReader::CheckLayout(
    const std::vector<herd::v1::TensorLayout>& layout) const {
  return absl::UnimplementedError("CheckpointReader::CheckLayout");
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> OpenCheckpoint(Env& env,
                                                                 const std::string& path) {
  return absl::UnimplementedError("OpenCheckpoint");
}

}  // namespace herd::checkpoint
