#include "worker/fused_buckets.h"

#include <algorithm>
#include <cstring>

#include "algorithms/fusion/bucket_plan.h"

namespace herd::worker {

FusedBuckets::FusedBuckets(const std::vector<ModelTensor>& tensors, size_t threshold_bytes) {
  const int n = static_cast<int>(tensors.size());
  // Ready order is the reverse of forward order.
  std::vector<size_t> ready_bytes(n);
  for (int p = 0; p < n; ++p) ready_bytes[p] = tensors[n - 1 - p].count * sizeof(float);
  bucket_of_.assign(n, 0);
  offset_.assign(n, 0);
  count_.assign(n, 0);
  ready_.assign(n, false);
  for (const fusion::Bucket& fb : fusion::PlanBuckets(ready_bytes, threshold_bytes)) {
    Bucket b;
    // Ready positions [first, last] are forward tensors [n-1-last, n-1-first].
    for (int t = n - 1 - fb.last; t <= n - 1 - fb.first; ++t) b.tensors.push_back(t);
    size_t total = 0;
    for (int t : b.tensors) {
      bucket_of_[t] = static_cast<int>(buckets_.size());
      offset_[t] = total;
      count_[t] = tensors[t].count;
      total += tensors[t].count;
    }
    b.buffer.assign(total, 0.0f);
    b.missing = static_cast<int>(b.tensors.size());
    buckets_.push_back(std::move(b));
  }
}

std::span<float> FusedBuckets::GradOf(int tensor) {
  return std::span<float>(buckets_[bucket_of_[tensor]].buffer).subspan(offset_[tensor],
                                                                       count_[tensor]);
}

void FusedBuckets::Store(int tensor, std::span<const float> grad) {
  std::span<float> dst = GradOf(tensor);
  std::memcpy(dst.data(), grad.data(), std::min(dst.size(), grad.size()) * sizeof(float));
  if (!ready_[tensor]) {
    ready_[tensor] = true;
    --buckets_[bucket_of_[tensor]].missing;
  }
}

void FusedBuckets::FillMissing(int bucket) {
  for (int t : buckets_[bucket].tensors) {
    if (!ready_[t]) {
      std::span<float> g = GradOf(t);
      std::fill(g.begin(), g.end(), 0.0f);
      ready_[t] = true;
    }
  }
  buckets_[bucket].missing = 0;
}

void FusedBuckets::ResetReady() {
  std::fill(ready_.begin(), ready_.end(), false);
  for (Bucket& b : buckets_) b.missing = static_cast<int>(b.tensors.size());
}

}  // namespace herd::worker
