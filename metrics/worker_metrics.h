#pragma once
// What a worker records (worker/session.cc, the session every worker runs, the Python one
// included): its iterations and their time split, its loss and samples, the bytes it sends to
// other workers and to the shards per mode, and the mode and plan epoch it follows. Names and
// labels: docs/metrics.md.
//
// Threading: any thread. RecordIteration and the counters SentBytes returns are lock-free;
// SentBytes and SetPlan look series up (a lock) and belong where a mode starts, not per call.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace herd::metrics {

class WorkerMetrics {
 public:
  static WorkerMetrics& Get();  // the process's, registered on first use

  struct Iteration {
    int64_t iteration = 0;
    double loss = 0;
    int64_t samples = 0;
    double seconds = 0;  // the whole iteration, as the session measured it
    double forward_seconds = 0;
    double backward_seconds = 0;
    double exposed_comm_seconds = 0;  // communication the computation did not hide
  };
  void RecordIteration(const Iteration& it);

  enum class Peer { kWorker, kServer };
  // The counter of bytes this worker sends in `mode` to `peer`s (keep the reference).
  prometheus::Counter& SentBytes(std::string_view mode, Peer peer);

  // The mode and plan epoch from this iteration on: herd_worker_mode{mode} is 1 for it and 0
  // for the modes run before.
  void SetPlan(std::string_view mode, uint64_t epoch);

  // Latencies of the calls to the shards (server/client/ps_client.cc), one per whole call.
  prometheus::Histogram& push_seconds() { return push_seconds_; }
  prometheus::Histogram& pull_seconds() { return pull_seconds_; }
  prometheus::Histogram& push_pull_seconds() { return push_pull_seconds_; }

 private:
  WorkerMetrics();

  prometheus::Counter& iterations_;
  prometheus::Counter& samples_;
  prometheus::Gauge& iteration_;
  prometheus::Gauge& loss_;
  prometheus::Gauge& samples_per_second_;
  prometheus::Family<prometheus::Counter>& phase_seconds_;
  prometheus::Counter& total_seconds_;
  prometheus::Counter& forward_seconds_;
  prometheus::Counter& backward_seconds_;
  prometheus::Counter& exposed_seconds_;
  prometheus::Family<prometheus::Gauge>& last_;
  prometheus::Gauge& last_total_;
  prometheus::Gauge& last_forward_;
  prometheus::Gauge& last_backward_;
  prometheus::Gauge& last_exposed_;
  prometheus::Family<prometheus::Counter>& sent_bytes_;
  prometheus::Family<prometheus::Gauge>& mode_;
  prometheus::Gauge& epoch_;
  prometheus::Family<prometheus::Histogram>& ps_call_seconds_;
  prometheus::Histogram& push_seconds_;
  prometheus::Histogram& pull_seconds_;
  prometheus::Histogram& push_pull_seconds_;
  prometheus::Gauge* current_mode_ = nullptr;  // SetPlan's last (SetPlan holds a lock)
};

}  // namespace herd::metrics
