#pragma once
// All-gather: on entry chunk rank() of `data` holds this rank's part (chunk layout of
// options.h); on return every chunk holds its owner's part. In place: every algorithm sends from
// and receives into `data` and needs no extra memory.

#include "algorithms/collectives/options.h"

namespace herd::collectives {

struct AllGatherOptions : CommonOptions {
  void* data = nullptr;
  size_t count = 0;                        // elements of the whole gathered vector
  size_t segment_bytes = size_t{1} << 20;  // ring: largest single message
};

// P-1 steps, each forwarding the chunk received last; bandwidth-optimal for long vectors.
// (P-1) S messages each way per rank (S segments per chunk). Extra memory: none.
// With a communicator whose memory is not host memory, runs the backend's native op.
absl::Status RingAllGather(const AllGatherOptions& options);
// ceil(log2 P) steps exchanging doubling sets of chunks; for P not a power of two the ranks
// beyond the largest power of two fold into a partner first and get the result at the end.
// At most 2 log2(p2) + 2 messages each way per rank (p2: largest power of two <= P), whole
// chunk ranges, no segmentation. Extra memory: none.
absl::Status RecursiveDoublingAllGather(const AllGatherOptions& options);
// Bruck: ceil(log2 P) steps for any P; data kept rotated during the steps, rotated back in
// place at the end. ceil(log2 P) messages each way per rank. Extra memory: none.
absl::Status BruckAllGather(const AllGatherOptions& options);
// One round: this rank's chunk straight to every other rank, P-1 messages each way, received in
// place. For short vectors. Extra memory: none.
absl::Status OneShotAllGather(const AllGatherOptions& options);
// Shared memory, every rank on one host: each rank copies its chunk into its stages a piece at a
// time and every other rank copies it out. Extra memory: the segment.
absl::Status ShmAllGather(const AllGatherOptions& options);
// Hierarchical: a ring all-gather among each rail (the ranks with one local index), then a shm
// all-gather within each host of what the rail gathered. Needs the same number of ranks on
// every host.
absl::Status HierarchicalAllGather(const AllGatherOptions& options);

}  // namespace herd::collectives
