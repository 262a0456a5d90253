#include "worker/data/epoch_order.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_format.h"
#include "common/splitmix.h"

namespace herd::worker {

std::vector<int64_t> EpochOrder(int64_t count, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(count, 0)));
  std::iota(order.begin(), order.end(), 0);
  // One stream per (seed, epoch): the seed mixed once, then the epoch folded in.
  SplitMix64 rng(Mix64(Mix64(seed) ^ static_cast<uint64_t>(epoch)));
  for (size_t i = order.size(); i > 1; --i) {
    std::swap(order[i - 1], order[static_cast<size_t>(rng.Below(i))]);
  }
  return order;
}

int64_t BatchesPerEpoch(int64_t count, int workers, int batch_size) {
  const int64_t global = static_cast<int64_t>(std::max(1, workers)) * std::max(1, batch_size);
  return std::max<int64_t>(1, count / global);
}

DataPosition Advance(DataPosition at, int64_t count, int workers, int batch_size) {
  const int64_t global = static_cast<int64_t>(std::max(1, workers)) * std::max(1, batch_size);
  at.offset += global;
  // A batch that would run past the epoch's end starts the next epoch instead (an epoch
  // smaller than one global batch still runs one, wrapping around its samples).
  if (at.offset + global > count && at.offset > 0) {
    ++at.epoch;
    at.offset = 0;
  }
  return at;
}

absl::Status CheckPosition(DataPosition at, int64_t count, const std::string& source) {
  // offset 0 is valid in any epoch: an epoch smaller than one global batch starts at 0.
  if (at.epoch >= 0 && at.offset >= 0 && (at.offset == 0 || at.offset < count)) {
    return absl::OkStatus();
  }
  return absl::DataLossError(absl::StrFormat(
      "%s: data position epoch %d, offset %d is not one of a training set of %d samples "
      "(the epoch must be at least 0, the offset in [0, %d))",
      source, at.epoch, at.offset, count, std::max<int64_t>(count, 1)));
}

int64_t IterationsLeft(DataPosition at, int64_t count, int workers, int batch_size,
                       int64_t epochs) {
  int64_t n = 0;
  while (at.epoch < epochs) {
    ++n;
    at = Advance(at, count, workers, batch_size);
  }
  return n;
}

}  // namespace herd::worker
