#pragma once
// The YAML form of a JobSpec, read by `herd job submit FILE` (format: docs/scheduler.md).
// Only syntax and types are checked here (INVALID_ARGUMENT with the line of the problem);
// the scheduler validates the meaning.
//
//   name: j1
//   mode: decentralized          # and its parameters at the top level:
//   topology: random             #   topology, teams, density, block_bytes, staleness, compressor
//   workers: 6
//   servers: 2
//   seed: 7
//   chunk_bytes: 1048576
//   optimizer: {name: sgd, learning_rate: 0.1}
//   tensors:
//     - {name: fc1.weight, shape: [128, 784], dtype: fp32}

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "herd/v1/job.pb.h"

namespace herd::scheduler {

absl::StatusOr<herd::v1::JobSpec> ParseJobSpecYaml(std::string_view text);
absl::StatusOr<herd::v1::JobSpec> LoadJobSpecFile(const std::string& path);

}  // namespace herd::scheduler
