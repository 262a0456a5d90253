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

// Chain ending at the root, blocks of block_bytes; extra memory: two blocks.
absl::Status LinearPipelineReduce(const ReduceOptions& options);
// Binomial tree (MST); extra memory: one copy of the vector (meant for short messages).
absl::Status BinomialReduce(const ReduceOptions& options);

}  // namespace herd::collectives
