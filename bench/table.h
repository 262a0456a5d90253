#pragma once
// The human-readable output of `herd bench collectives`: one table per operation, a row per
// requested size, for each implementation (herd's algorithms, then the peers) its time per
// iteration in microseconds and its algorithm and bus bandwidths in GB/s (10^9 bytes/s), then
// herd's algbw divided by each peer's ("herd/mpi 1.23x": herd is 23% faster). herd's columns
// add "wait%": the share of its time per iteration its ranks spent blocked in the transport's
// wait() (mean over ranks); the rest is reductions, copies and posting requests.

#include <string>
#include <vector>

#include "bench/result.h"

namespace herd::bench {

// Results in any order; tables follow the order in which operations, implementations and
// sizes first appear. A result that failed its check is marked "!" and listed under its table;
// an unmeasured one shows "n/a" and its reason.
std::string RenderTables(const std::vector<BenchResult>& results);

}  // namespace herd::bench
