#pragma once
// Reduce-scatter: afterwards rank r holds chunk r (ChunkBegin/ChunkSize) of the reduction of
// every rank's vector. The first half of RingAllReduce, and the half DeAR runs during backward.

#include "algorithms/collectives/options.h"

namespace herd::collectives {

struct ReduceScatterOptions : CommonOptions {
  // In place: `count` elements on entry; on return chunk rank() holds the reduction (for kAverage
  // divided by P) and the other chunks hold partial sums (scratch).
  void* data = nullptr;
  size_t count = 0;
  ReduceOp op = ReduceOp::kSum;
  // Each chunk moves in segments of at most this many bytes so that the reduction of one
  // segment overlaps the transfer of the next. Tests lower it to exercise the many-segment path.
  size_t segment_bytes = size_t{1} << 20;
};

// P-1 steps around the ring, each chunk moving in S = ceil(largest chunk / segment_bytes)
// segments: (P-1) S messages each way per rank, (P-1)/P of the vector sent and received.
// Extra memory: four segments (4 min(segment_bytes, chunk bytes)), the receive window
// scratch; sends read `data` directly.
// With a communicator whose memory is not host memory, runs the backend's native op.
absl::Status RingReduceScatter(const ReduceScatterOptions& options);
// Recursive halving: log2(p2) steps (p2 the largest power of two <= P; the other ranks fold
// their vector into a partner first and receive their chunk from it at the end), each halving
// what a rank holds; at most 2 messages each way per step, no segmentation. For short and
// medium vectors. Extra memory: about half the vector (the whole vector on fold partners).
absl::Status RecursiveHalvingReduceScatter(const ReduceScatterOptions& options);
// One round: chunk q straight to rank q, P-1 messages each way, the ring's volume. For short
// vectors. Extra memory: P-1 chunks.
absl::Status OneShotReduceScatter(const ReduceScatterOptions& options);
// Shared memory, every rank on one host: each rank copies its vector into its stages a piece at
// a time; rank r reduces its chunk from all P stages in one pass, straight into `data`. The other
// chunks are left as they were (not partial sums). Extra memory: the segment.
absl::Status ShmReduceScatter(const ReduceScatterOptions& options);
// Hierarchical: shm reduce-scatter within each host of the chunks of each rail (local rank l
// gets its host's sums of the chunks of the ranks with index l on every host), then a ring
// reduce-scatter of those among the rail. Needs the same number of ranks on every host.
absl::Status HierarchicalReduceScatter(const ReduceScatterOptions& options);

}  // namespace herd::collectives
