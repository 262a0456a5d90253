#pragma once
// `herd bench collectives --tune FILE`: from herd's measured results (every host algorithm of
// each operation at each size, one rank count), the decision table rules that pick the fastest
// (algorithms/collectives/decision_table.h), merged into FILE.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "algorithms/collectives/decision_table.h"
#include "bench/result.h"

namespace herd::bench {

// For each operation with a decision table (allreduce, reduce_scatter, allgather, broadcast,
// reduce) among `results` (herd's, not "auto"): the fastest algorithm at each measured size,
// except that the previous size's pick stays while it is within 10 % of the fastest (noise
// between near-equal algorithms must not make the table zig-zag); consecutive sizes with the
// same pick make one rule; where the winner changes between sizes
// a and b the bound is sqrt(a b) (the sizes are a geometric series), and the winner at the
// largest size extends to every larger one. Unmeasured results are ignored.
// Where the pick is shm or hier (which run only on some layouts) the rule's fallback is the
// fastest of the other algorithms at that size. The rules are for `ranks` ranks on `hosts` hosts.
std::vector<collectives::DecisionRule> RulesFromResults(const std::vector<BenchResult>& results,
                                                        int ranks, size_t dtype_bytes,
                                                        int hosts = 1);

// The sizes a tuning run measures when --sizes is not given: 1 KiB to 16 MiB, powers of 4 (the
// ring wins from a few MiB up on every machine measured; larger sizes only cost time).
std::vector<size_t> DefaultTuneSizes();

// Reads `path` if it exists (an invalid file is an error: nothing is written), replaces the
// groups `rules` bring, writes it back atomically (a temporary file renamed over it).
absl::Status MergeIntoTableFile(const std::string& path,
                                const std::vector<collectives::DecisionRule>& rules);

}  // namespace herd::bench
