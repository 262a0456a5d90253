#pragma once
// Reduce: on return the root's `data` holds the reduction of every rank's vector; the other
// ranks' `data` is left as scratch.

#include "algorithms/collectives/options.h"

namespace herd::collectives {

struct ReduceOptions : CommonOptions {
  void* data = nullptr;
  size_t count = 0;
  int root = 0;
  ReduceOp op = ReduceOp::kSum;
  size_t block_bytes = size_t{256} << 10;  // linear pipeline block size b
};

// Chain root+1, ..., root-1, root, blocks of block_bytes, each reduced into `data` and
// forwarded: ceil(n / block_bytes) messages each way per inner rank. Extra memory: two blocks
// (2 min(block_bytes, n)) on every rank but the head of the chain.
absl::Status LinearPipelineReduce(const ReduceOptions& options);
// Binomial tree (MST): ceil(log2 P) rounds of whole messages, children reduced in turn.
// Extra memory: one copy of the vector on ranks with children (meant for short messages).
absl::Status BinomialReduce(const ReduceOptions& options);

}  // namespace herd::collectives
