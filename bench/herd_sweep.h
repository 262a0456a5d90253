#pragma once
// herd's side of `herd bench collectives`: every rank process runs the same sweep over its
// Communicator; rank 0 turns the ranks' reports into results.
//
// For each (op, algorithm) of the plan and each size: with --check, fill the inputs from the
// per-rank pattern, run once and verify; run the warm-up iterations; barrier; time the
// iterations; gather every rank's time per iteration on rank 0, which reports the slowest.
//
// Memory per rank: one buffer of the largest size (in place for every operation), plus for
// alltoall an output of P * ceil(count / P) elements, plus the algorithm's own scratch (two
// segments for ring reduce-scatter/allreduce, two blocks for lp; see the collectives' headers).

#include <functional>

#include "absl/status/status.h"
#include "bench/result.h"
#include "bench/sweep_spec.h"
#include "transport/communicator.h"

namespace herd::bench {

// Runs the sweep; on rank 0 `emit` receives each result as soon as it is known, in plan order.
// Returns the first collective or transport error, prefixed with the measurement it broke
// ("allreduce ring 64M: ..."); the communicator is aborted then. A check mismatch is not an
// error: it is in the result (check "failed", detail naming the rank and the first bad index).
//
// `progress`, if set, is called on rank 0 at most about once a second while a measurement runs
// (e.g. "allreduce ring 256M: 4/10 timed"), so a supervisor can tell a long measurement from a
// hang.
absl::Status RunHerdSweep(transport::Communicator& comm, const SweepSpec& spec,
                          const std::function<void(const BenchResult&)>& emit,
                          const std::function<void(const std::string&)>& progress = {});

}  // namespace herd::bench
