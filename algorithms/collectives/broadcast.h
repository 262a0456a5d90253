#pragma once
// Broadcast: on return every rank's `data` equals the root's.

#include "algorithms/collectives/options.h"

namespace herd::collectives {

struct BroadcastOptions : CommonOptions {
  void* data = nullptr;
  size_t count = 0;
  int root = 0;
  size_t block_bytes = size_t{256} << 10;  // linear pipeline block size b
};

// Chain from the root, blocks of block_bytes: cost ~ (b(P-1) + n) beta, nearly invariant in P.
// ceil(n / block_bytes) messages each way per inner rank. Extra memory: none (blocks land in
// `data` and are forwarded from there).
absl::Status LinearPipelineBroadcast(const BroadcastOptions& options);
// Binomial tree (MST): ceil(log2 P) rounds of whole messages; for short messages.
// P-1 messages in all, at most ceil(log2 P) sent by one rank. Extra memory: none.
absl::Status BinomialBroadcast(const BroadcastOptions& options);
// Shared memory, every rank on one host: the root copies its vector into its stages a piece at
// a time, every other rank copies it out. Extra memory: the segment.
absl::Status ShmBroadcast(const BroadcastOptions& options);
// Hierarchical: a broadcast among one rank per host (the root, and each other host's lowest
// rank; lp or tree as the table picks for H ranks), then a shm broadcast within each host.
absl::Status HierarchicalBroadcast(const BroadcastOptions& options);

}  // namespace herd::collectives
