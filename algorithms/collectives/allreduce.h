#pragma once
// All-reduce: on return every rank's `data` holds the reduction of all ranks' vectors.

#include "algorithms/collectives/options.h"

namespace herd::collectives {

struct AllReduceOptions : CommonOptions {
  void* data = nullptr;  // in place
  size_t count = 0;
  ReduceOp op = ReduceOp::kSum;
  size_t segment_bytes = size_t{1} << 20;  // ring: pipelining unit
  size_t block_bytes = size_t{256} << 10;  // linear pipeline: block size b of the paper
};

// RingReduceScatter then RingAllGather (the decoupled pair DeAR schedules separately).
absl::Status RingAllReduce(const AllReduceOptions& options);
// Linear Pipeline (chain 0 -> 1 -> ... -> P-1, blocks of block_bytes): reduce flowing down the
// chain, the finished blocks flowing back up. Extra memory: a few blocks.
absl::Status LinearPipelineAllReduce(const AllReduceOptions& options);
// Binomial-tree reduce to rank 0 then binomial broadcast: for short vectors (latency-bound).
absl::Status BinomialTreeAllReduce(const AllReduceOptions& options);

}  // namespace herd::collectives
