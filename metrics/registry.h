#pragma once
// The process's one metrics registry. Every role's metrics (worker_metrics.h,
// shard_metrics.h, scheduler_metrics.h, process_metrics.h) register their families here the
// first time they are used, and the endpoint (endpoint.h) serves it. A process that never
// starts an endpoint still counts: the counters are a few atomics, cheaper than a branch on
// "is anyone listening" at every call site.
//
// Threading: prometheus-cpp's metrics are thread-safe; counters and gauges are lock-free
// atomics. Family::Add (finding the series of a label set) takes the family's lock, so call
// sites look their series up once and keep the reference (series are never removed).

#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>

namespace herd::metrics {

std::shared_ptr<prometheus::Registry> SharedRegistry();
inline prometheus::Registry& Registry() { return *SharedRegistry(); }

// Bucket boundaries of latencies, in seconds: 100 us to 60 s, about x2.5 apart (an RPC on
// loopback to a checkpoint of a large model).
const prometheus::Histogram::BucketBoundaries& LatencyBuckets();

}  // namespace herd::metrics
