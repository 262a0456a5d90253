#pragma once
// Runs one program per rank of an emulated cluster and returns what rank 0 reports: the lines
// it prints that start with '{' (JSON lines). Everything else the ranks print goes to stderr
// prefixed by the rank's label.

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/emulator/cluster.h"
#include "bench/emulator/probe.h"

namespace herd::emulator {

// Rank r runs `argv` + {"--rank", r, "--ranks", P, "--store", <a fresh directory>} in its
// namespace. `silence_timeout`: how long the ranks may print nothing before they are killed.
// Errors: a rank that failed (with its last stderr lines), or no JSON line from rank 0.
absl::StatusOr<std::vector<std::string>> RunInCluster(const Cluster& cluster,
                                                      const std::string& label,
                                                      const std::vector<std::string>& argv,
                                                      std::chrono::seconds silence_timeout);

// The probe of probe.h: `exe` is the herd-emu binary (`exe probe-rank ...` on every rank).
absl::StatusOr<ProbeResult> MeasureInCluster(const Cluster& cluster, const std::string& exe,
                                             ProbeOptions probe);

}  // namespace herd::emulator
