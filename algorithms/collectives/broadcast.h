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
absl::Status LinearPipelineBroadcast(const BroadcastOptions& options);
// Binomial tree (MST): ceil(log2 P) rounds of whole messages; for short messages.
absl::Status BinomialBroadcast(const BroadcastOptions& options);

}  // namespace herd::collectives
