#pragma once
// `herd bench control-plane`: the scheduler's cost as the job grows, today's protocol beside
// the per-iteration one it replaced (bench/control_plane/sim.h). For each worker count and
// protocol a fresh `herd scheduler` process; one JSON line (or table row) each with the
// figures of docs/BENCHMARKS.md, "Control plane".

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace herd::bench::control_plane {

struct BenchOptions {
  std::vector<int> workers = {64, 256, 1024};
  std::vector<std::string> protocols = {"follow", "legacy"};
  int iterations = 100;
  double rate = 10;
  int ucx_address_bytes = 250;
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::string scheduler_binary;         // "" : this herd
  std::string legacy_scheduler_binary;  // the legacy protocol's scheduler ("": the same)
  bool changes = true;
  bool json = false;
};

absl::Status RunControlPlaneBench(const BenchOptions& options);

}  // namespace herd::bench::control_plane
