#pragma once
// Runs a probe (probe.h) with one process per rank of an emulated cluster and returns what
// rank 0 measured.

#include <string>

#include "absl/status/statusor.h"
#include "bench/emulator/cluster.h"
#include "bench/emulator/probe.h"

namespace herd::emulator {

// `exe` is the herd-emu binary (it runs `exe probe-rank ...` in every rank's namespace);
// `probe` gives the probe and its sizes (rank, ranks and store_dir are filled in here).
// Errors: a rank that failed (its last stderr lines), or no result line from rank 0.
absl::StatusOr<ProbeResult> MeasureInCluster(const Cluster& cluster, const std::string& exe,
                                             ProbeOptions probe);

}  // namespace herd::emulator
