// libFuzzer target: a JobSpec YAML file (what `herd job submit` reads) through the YAML reader
// and the scheduler's validation. Any input must come back as a JobSpec or an error; a spec
// that validates must validate again unchanged (normalisation is idempotent).

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "google/protobuf/util/message_differencer.h"
#include "scheduler/client/job_yaml.h"
#include "scheduler/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = herd::scheduler::ParseJobSpecYaml(text);
  if (!spec.ok()) return 0;
  auto normal = herd::scheduler::NormalizeJobSpec(*spec);
  if (!normal.ok()) return 0;
  auto again = herd::scheduler::NormalizeJobSpec(*normal);
  if (!again.ok() || !google::protobuf::util::MessageDifferencer::Equals(*again, *normal)) {
    std::abort();  // a valid spec must stay valid and unchanged
  }
  return 0;
}
