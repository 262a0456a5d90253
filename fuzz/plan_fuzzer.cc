// libFuzzer target: plan building from a spec. A YAML JobSpec that the scheduler accepts is
// turned into a job (as SubmitJob does) and the plans of a few iterations are built; every
// plan must put each chunk of each tensor on exactly one existing shard, and list the
// participating ranks once each.

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "herd/v1/scheduler.pb.h"
#include "scheduler/client/job_yaml.h"
#include "scheduler/job_spec.h"
#include "scheduler/plan_builder.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int iteration = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto parsed = herd::scheduler::ParseJobSpecYaml(text);
  if (!parsed.ok()) return 0;
  auto spec = herd::scheduler::NormalizeJobSpec(*parsed);
  if (!spec.ok()) return 0;
  herd::v1::JobStatus job;
  *job.mutable_spec() = *spec;
  job.set_state(herd::v1::JOB_RUNNING);
  job.set_epoch(1);
  job.set_completed_iteration(-1);
  job.set_issued_iteration(-1);
  for (int r = 0; r < spec->workers(); ++r) {
    auto* m = job.add_workers();
    m->set_rank(r);
    m->set_alive(r % 3 != 2 || iteration % 2 == 0);  // some ranks dead in odd iterations
  }
  for (int s = 0; s < spec->servers(); ++s) job.add_servers()->set_rank(s);
  auto* first = job.add_schedule();
  first->set_from_iteration(0);
  *first->mutable_mode() = spec->mode();
  const herd::v1::Plan plan = herd::scheduler::BuildPlan(job, iteration);
  int64_t last_tensor = -1, next_chunk = 0;
  for (const auto& e : plan.shards()) {
    Check(e.server() >= 0 && e.server() < spec->servers());
    Check(e.count() >= 1);
    if (e.tensor() != last_tensor) {
      Check(e.tensor() == last_tensor + 1 && e.chunk() == 0);
      last_tensor = e.tensor();
      next_chunk = 0;
    }
    Check(e.chunk() == next_chunk++);
  }
  return 0;
}
