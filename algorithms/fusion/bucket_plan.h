#pragma once
// Tensor fusion: consecutive tensors (in gradient-ready order) grouped into buckets of at most
// a byte threshold, so that one collective carries many small tensors.
#include <cstddef>
#include <span>
#include <vector>

namespace herd::fusion {

struct Bucket {
  int first;     // position of the bucket's first tensor in ready order
  int last;      // position of its last tensor (inclusive)
  size_t bytes;  // their total size
};

// Groups consecutive tensors into buckets of at most `threshold_bytes` each; a single tensor
// larger than the threshold is a bucket of its own; threshold 0 gives one bucket per tensor.
// Every tensor is in exactly one bucket and the order is kept.
std::vector<Bucket> PlanBuckets(std::span<const size_t> tensor_bytes, size_t threshold_bytes);

}  // namespace herd::fusion
