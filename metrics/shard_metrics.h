#pragma once
// What a parameter-server shard records (server/engine.cc, server/service.cc): the rounds it
// completed per mode and how long the workers' calls took to serve. Names and labels:
// docs/metrics.md.
//
// Threading: any thread; Rounds() looks a series up (a lock): an engine keeps its reference.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>

#include <string_view>

namespace herd::metrics {

class ShardMetrics {
 public:
  static ShardMetrics& Get();  // the process's, registered on first use

  // Rounds of keys completed (ps_sync, ps_ec: every worker pushed; ps_async: every push).
  prometheus::Counter& Rounds(std::string_view mode);
  // The time to serve one call, from its first message to its last answer (a push under
  // every-round includes waiting for the round to be written).
  prometheus::Histogram& push_seconds() { return push_; }
  prometheus::Histogram& pull_seconds() { return pull_; }
  prometheus::Histogram& push_pull_seconds() { return push_pull_; }

 private:
  ShardMetrics();

  prometheus::Family<prometheus::Counter>& rounds_;
  prometheus::Family<prometheus::Histogram>& calls_;
  prometheus::Histogram& push_;
  prometheus::Histogram& pull_;
  prometheus::Histogram& push_pull_;
};

}  // namespace herd::metrics
