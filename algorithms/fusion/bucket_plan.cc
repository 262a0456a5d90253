#include "algorithms/fusion/bucket_plan.h"

namespace herd::fusion {

std::vector<Bucket> PlanBuckets(std::span<const size_t> tensor_bytes, size_t threshold_bytes) {
  std::vector<Bucket> buckets;
  const int n = static_cast<int>(tensor_bytes.size());
  for (int i = 0; i < n; ++i) {
    const size_t b = tensor_bytes[i];
    // `b <= threshold - open.bytes` instead of `open.bytes + b <= threshold`: no overflow for
    // absurd sizes. open.bytes <= threshold holds unless the open bucket is one huge tensor.
    if (!buckets.empty() && threshold_bytes > 0) {
      Bucket& open = buckets.back();
      if (open.bytes <= threshold_bytes && b <= threshold_bytes - open.bytes) {
        open.last = i;
        open.bytes += b;
        continue;
      }
    }
    buckets.push_back(Bucket{i, i, b});
  }
  return buckets;
}

}  // namespace herd::fusion
