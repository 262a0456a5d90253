#pragma once
// The fusion buffers of the dense collective modes. Tensors are grouped, in gradient-ready order
// (the reverse of forward order), into buckets of at most a byte threshold
// (algorithms/fusion/bucket_plan.h); each bucket owns one contiguous fp32 buffer into which its
// tensors' gradients are copied as they become ready, so one collective carries them all.
//
// Bucket 0 holds the last tensors of the forward pass (the first gradients of backward). In
// forward order the buckets come in reverse: forward bucket f is bucket (buckets - 1 - f).

#include <span>
#include <vector>

#include "worker/executor.h"

namespace herd::worker {

class FusedBuckets {
 public:
  FusedBuckets(const std::vector<ModelTensor>& tensors, size_t threshold_bytes);

  int buckets() const { return static_cast<int>(buckets_.size()); }
  int BucketOf(int tensor) const { return bucket_of_[tensor]; }
  size_t CountOf(int tensor) const { return count_[tensor]; }
  // The bucket's tensors, in forward order.
  std::span<const int> TensorsOf(int bucket) const { return buckets_[bucket].tensors; }
  float* data(int bucket) { return buckets_[bucket].buffer.data(); }
  size_t count(int bucket) const { return buckets_[bucket].buffer.size(); }
  size_t bytes(int bucket) const { return count(bucket) * sizeof(float); }
  // The tensor's gradient inside its bucket buffer.
  std::span<float> GradOf(int tensor);

  // Copies a tensor's gradient in and marks it ready (again: a second copy in one iteration
  // overwrites the first).
  void Store(int tensor, std::span<const float> grad);
  bool Complete(int bucket) const { return buckets_[bucket].missing == 0; }
  // Zero-fills the gradients that never became ready (parameters backward did not reach) and
  // marks the bucket complete.
  void FillMissing(int bucket);
  // Starts a new iteration: nothing is ready.
  void ResetReady();

 private:
  struct Bucket {
    std::vector<int> tensors;  // forward order
    std::vector<float> buffer;
    int missing = 0;
  };
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;
  std::vector<size_t> offset_;  // of each tensor in its bucket's buffer
  std::vector<size_t> count_;
  std::vector<bool> ready_;
};

}  // namespace herd::worker
