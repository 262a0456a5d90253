#pragma once
// A JobSpec file as `herd job submit | validate` read it: scheduler::LoadJobSpecFile (the YAML
// reader's bounds and rules), and one YAML document only. A second document (after `---`) is
// refused rather than ignored: whoever wrote it meant something by it (two jobs in one file,
// a patch appended by a tool), and silently running the first is not what either meant.

#include <string>

#include "absl/status/statusor.h"
#include "herd/v1/job.pb.h"

namespace herd::cli {

// INVALID_ARGUMENT naming the file for a second document, or what LoadJobSpecFile says.
absl::StatusOr<herd::v1::JobSpec> LoadOneJobSpecFile(const std::string& path);

}  // namespace herd::cli
