#pragma once
// The order in which a job sees its training samples: one permutation of the whole training
// set per epoch, the same for every worker count. An iteration takes the next global batch of
// P x B samples of that permutation, worker r the B of them starting at r x B. So the data
// position of a job is global (epoch, and the offset of the next global batch in the epoch):
// a checkpoint taken at P workers resumes at P' workers from the same sample, every sample is
// seen once per epoch, and a run at P workers of batch B sees the same samples per iteration
// as one worker with batch P x B.
//
// The permutation is a Fisher-Yates shuffle driven by splitmix64 (common/splitmix.h), defined
// bit for bit (std::shuffle is not specified across library versions), so any program can
// draw the same order: the Python front end's example does.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace herd::worker {

// The permutation of [0, count) that epoch `epoch` of a job seeded `seed` visits.
std::vector<int64_t> EpochOrder(int64_t count, uint64_t seed, int64_t epoch);

// Where a job is in its data: the next global batch starts at sample `offset` of epoch
// `epoch`'s order.
struct DataPosition {
  int64_t epoch = 0;
  int64_t offset = 0;
};

// Global batches of P x B samples an epoch of `count` samples holds (the last partial one is
// dropped, so every worker runs the same iterations); at least 1.
int64_t BatchesPerEpoch(int64_t count, int workers, int batch_size);

// The position after one more iteration at `workers` x `batch_size`: the next global batch,
// or the first of the next epoch when this epoch has no whole batch left.
DataPosition Advance(DataPosition at, int64_t count, int workers, int batch_size);

// Whether `at` is a position a job of `count` samples can be at: epoch at least 0 and the
// offset within the epoch (0 past the last epoch). A position read from a checkpoint's files
// or handed over by a peer is checked before it is used: a negative epoch would make
// IterationsLeft count forever, and an offset outside the epoch indexes past the samples.
// DATA_LOSS naming `source` when it is not.
absl::Status CheckPosition(DataPosition at, int64_t count, const std::string& source);

// Iterations from `at` to the end of epoch `epochs - 1`.
int64_t IterationsLeft(DataPosition at, int64_t count, int workers, int batch_size, int64_t epochs);

}  // namespace herd::worker
