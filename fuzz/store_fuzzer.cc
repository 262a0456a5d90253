// libFuzzer target: the scheduler's per-job bootstrap store (StoreSet / StoreGet) on a real
// SchedulerCore over RocksDB in a temporary directory. The input is a sequence of operations
// on two jobs (one running, one unknown): whatever keys and values arrive, a set key reads
// back exactly, a second set of it is ALREADY_EXISTS, and nothing crashes.

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "common/temp_dir.h"
#include "scheduler/scheduler_core.h"

namespace {

struct World {
  herd::TempDir dir = *herd::TempDir::Create("herd-store-fuzz");
  std::unique_ptr<herd::scheduler::SchedulerCore> core;
  World() {
    herd::scheduler::SchedulerOptions o;
    o.state_dir = dir.path() + "/state";
    core = *herd::scheduler::SchedulerCore::Open(o);
    herd::v1::JobSpec spec;
    spec.set_name("j");
    spec.set_workers(2);
    spec.mutable_mode()->set_mode("allreduce");
    auto* t = spec.add_tensors();
    t->set_name("w");
    t->add_shape(4);
    t->set_dtype("fp32");
    if (!core->SubmitJob(spec).ok()) std::abort();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();  // one database for the whole run
  static uint64_t input = 0;
  ++input;
  std::map<std::string, std::string> set;  // what this input set, by full key
  size_t at = 0;
  while (at + 3 <= size) {
    const uint8_t op = data[at];
    const size_t klen = std::min<size_t>(data[at + 1], size - at - 3);
    const size_t vlen = std::min<size_t>(data[at + 2] * 16, size - at - 3 - klen);
    // Keys are made unique per input so inputs do not see each other's keys.
    const std::string key = std::to_string(input) + "/" +
                            std::string(reinterpret_cast<const char*>(data + at + 3), klen);
    const std::string value(reinterpret_cast<const char*>(data + at + 3 + klen), vlen);
    at += 3 + klen + vlen;
    const std::string job = (op & 2) ? "unknown" : "j";
    if (op & 1) {
      auto got =
          world->core->StoreGet(job, key, herd::Deadline::After(std::chrono::milliseconds(0)));
      auto it = set.find(job + '\0' + key);
      if (it != set.end() && (!got.ok() || *got != it->second)) std::abort();
    } else {
      const absl::Status st = world->core->StoreSet(job, key, value);
      auto [it, fresh] = set.emplace(job + '\0' + key, value);
      if (st.ok() && !fresh) std::abort();   // a key is written once
      if (!st.ok() && fresh) set.erase(it);  // refused: not set
    }
  }
  return 0;
}
