#include "algorithms/fusion/bucket_plan.h"

namespace herd::fusion {

std::vector<Bucket> PlanBuckets(std::span<const size_t> tensor_bytes, size_t threshold_bytes) {
  std::vector<Bucket> buckets;
  for (size_t i = 0; i < tensor_bytes.size(); ++i) {
    const int pos = static_cast<int>(i);
    const size_t b = tensor_bytes[i];
    if (!buckets.empty() && threshold_bytes > 0 && buckets.back().bytes + b <= threshold_bytes) {
      buckets.back().last = pos;
      buckets.back().bytes += b;
    } else {
      buckets.push_back({pos, pos, b});
    }
  }
  return buckets;
}

}  // namespace herd::fusion
