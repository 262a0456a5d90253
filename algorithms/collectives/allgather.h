#pragma once
// All-gather: on entry chunk rank() of `data` holds this rank's part (chunk layout of
// options.h); on return every chunk holds its owner's part. In place, no extra memory.

#include "algorithms/collectives/options.h"

namespace herd::collectives {

struct AllGatherOptions : CommonOptions {
  void* data = nullptr;
  size_t count = 0;                        // elements of the whole gathered vector
  size_t segment_bytes = size_t{1} << 20;  // ring: largest single message
};

// P-1 steps, each forwarding the chunk received last; bandwidth-optimal for long vectors.
absl::Status RingAllGather(const AllGatherOptions& options);
// ceil(log2 P) steps exchanging doubling sets of chunks; for P not a power of two the ranks
// beyond the largest power of two fold into a partner first and get the result at the end.
absl::Status RecursiveDoublingAllGather(const AllGatherOptions& options);
// Bruck: ceil(log2 P) steps for any P; data kept rotated during the steps, rotated back in
// place at the end.
absl::Status BruckAllGather(const AllGatherOptions& options);

}  // namespace herd::collectives
