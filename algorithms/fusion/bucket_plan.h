#pragma once
// Tensor fusion: which consecutive gradients travel together in one collective.
//
// Tensors are given in gradient-READY order (the order backward produces them, i.e. the
// reverse of the forward order). A bucket is a run of consecutive ready positions; its
// reduce-scatter can start only when its last tensor is ready, and in DeAR its all-gather
// must finish before the forward of its earliest layer (the bucket's `last` position). So
// the threshold trades startup latency (fewer, larger buckets) against overlap (smaller
// buckets start earlier and finish before the forward needs them); the tuner picks it.

#include <cstddef>
#include <span>
#include <vector>

namespace herd::fusion {

// Tensors [first, last] (inclusive positions in ready order) and their total size.
struct Bucket {
  int first;
  int last;
  size_t bytes;
};

// Greedy in ready order: a tensor joins the open bucket while the bucket stays within
// `threshold_bytes`; otherwise it opens a new one. A single tensor larger than the threshold
// is a bucket of its own. threshold 0 = one bucket per tensor (zero-sized tensors included).
// Every tensor is in exactly one bucket, buckets are in order and cover [0, n). Empty input
// gives no buckets. This is the grouping of the DeAR paper (layers are grouped while their
// total does not exceed the buffer size x); a bucket never overshoots the threshold unless
// one tensor alone is larger.
std::vector<Bucket> PlanBuckets(std::span<const size_t> tensor_bytes, size_t threshold_bytes);

}  // namespace herd::fusion
