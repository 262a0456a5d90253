#pragma once
// `herd-emu elastic`: the elastic figures of docs/BENCHMARKS.md ("Elastic membership") with the
// workers on emulated hosts. A real job — `herd scheduler` on a host of its own, four
// `herd worker`s each on its own host, every host behind a link of `rate` (cluster.h) — loses
// a worker to SIGKILL a third into training; the same worker is started again at once and
// rejoins. Measured from the scheduler's membership events and the workers' reports: kill to
// detection, detection to every survivor done with an iteration of the new epoch, the rejoin
// time against the state's bytes over the link (the target: 2 s + 1.25 x bytes / rate), and
// the test accuracy against the same job undisturbed.

#include <chrono>
#include <string>

#include "absl/status/statusor.h"

namespace herd::emulator {

struct ElasticBenchOptions {
  std::string herd;  // the herd binary
  std::string mode = "allreduce";
  uint64_t rate = 1'000'000'000;  // bits per second per link and direction
  int workers = 4;
  int samples = 30000;
  int batch = 32;
  double kill_at = 1.0 / 3;  // of the planned iterations
  std::chrono::seconds heartbeat_timeout{3};
  std::chrono::seconds timeout{600};  // the whole run
  std::string work_dir;               // state and logs; kept
};

struct ElasticBenchResult {
  int64_t killed_at_iteration = 0;
  double kill_to_detection_ms = 0;
  double detection_to_resumed_ms = 0;  // every survivor done with an iteration of the new epoch
  int64_t iterations_rerun = 0;
  double rejoin_ms = 0;  // the newcomer's registration to every worker past the new epoch
  double handover_bytes = 0;
  double handover_ms = 0;
  // The newcomer's start-up: from opening its session to its join (its model and data, the
  // wait for its predecessor to be declared dead), and the part of it after it registered
  // (what the live workers waited for beyond the communicator and the state).
  double newcomer_startup_ms = 0;
  double newcomer_startup_registered_ms = 0;
  double commit_ms_per_iteration = 0;
  double iteration_ms = 0;
  double accuracy = -1;
  double undisturbed_accuracy = -1;  // the same job without the kill
};

// Runs the undisturbed job, then the disturbed one, each in a fresh cluster.
absl::StatusOr<ElasticBenchResult> RunElasticBench(const ElasticBenchOptions& options);

}  // namespace herd::emulator
