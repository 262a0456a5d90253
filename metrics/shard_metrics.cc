#include "metrics/shard_metrics.h"

#include <string>

#include "metrics/registry.h"

namespace herd::metrics {

ShardMetrics& ShardMetrics::Get() {
  static auto* metrics = new ShardMetrics();
  return *metrics;
}

ShardMetrics::ShardMetrics()
    : rounds_(prometheus::BuildCounter()
                  .Name("herd_shard_rounds_total")
                  .Help("Rounds of keys this shard completed, by mode")
                  .Register(Registry())),
      calls_(prometheus::BuildHistogram()
                 .Name("herd_shard_call_seconds")
                 .Help("Time this shard took to serve a worker's call, by call: push, pull, "
                       "push_pull")
                 .Register(Registry())),
      push_(calls_.Add({{"call", "push"}}, LatencyBuckets())),
      pull_(calls_.Add({{"call", "pull"}}, LatencyBuckets())),
      push_pull_(calls_.Add({{"call", "push_pull"}}, LatencyBuckets())) {}

prometheus::Counter& ShardMetrics::Rounds(std::string_view mode) {
  return rounds_.Add({{"mode", std::string(mode)}});
}

}  // namespace herd::metrics
