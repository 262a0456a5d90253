#include "metrics/registry.h"

namespace herd::metrics {

std::shared_ptr<prometheus::Registry> SharedRegistry() {
  // Never destroyed: metrics are touched from threads that may outlive static destruction.
  static auto* registry =
      new std::shared_ptr<prometheus::Registry>(std::make_shared<prometheus::Registry>());
  return *registry;
}

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
      0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
  return *buckets;
}

}  // namespace herd::metrics
