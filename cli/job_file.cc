#include "cli/job_file.h"

#include <yaml-cpp/yaml.h>

#include <fstream>

#include "absl/strings/str_format.h"
#include "scheduler/client/job_yaml.h"
#include "scheduler/limits.h"

namespace herd::cli {

absl::StatusOr<herd::v1::JobSpec> LoadOneJobSpecFile(const std::string& path) {
  // The reader first: it bounds the file's size and nesting before any YAML is parsed, and
  // says what is wrong with the first document.
  auto spec = scheduler::LoadJobSpecFile(path);
  if (!spec.ok()) return spec.status();
  std::ifstream in(path, std::ios::binary);
  std::string text(scheduler::limits::kMaxSpecFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  int documents = 0;
  try {
    for (const YAML::Node& doc : YAML::LoadAll(text)) {
      documents += doc.IsNull() ? 0 : 1;  // an empty document (a trailing `---`) holds nothing
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: job spec is not valid YAML: %s", path, e.what()));
  }
  if (documents > 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s holds %d YAML documents (separated by ---); a job spec file holds one: put each job "
        "in a file of its own",
        path, documents));
  }
  return spec;
}

}  // namespace herd::cli
