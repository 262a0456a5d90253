#pragma once
// What the scheduler records (scheduler/job_metrics.cc maps its jobs' status onto it): every
// job's state, mode, plan epoch and progress, rank 0's loss, samples/s and exposed
// communication as the workers report them, checkpoints committed and aborted with their
// durations, heartbeats and the processes declared dead for missing them. Series carry the
// job's name as the label `job_name` (`job` is the label Prometheus gives the scrape target).
// Names: docs/metrics.md.
//
// Threading: any thread; the per-job calls look series up under a lock (the scheduler calls
// them once per report, never per element).

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace herd::metrics {

class SchedulerMetrics {
 public:
  static SchedulerMetrics& Get();  // the process's, registered on first use

  struct JobView {
    std::string job;
    std::string state;  // PENDING, RUNNING, COMPLETED, ...
    std::string mode;   // of the newest iteration planned
    uint64_t epoch = 0;
    int64_t completed_iteration = -1;
    int64_t checkpoints_committed = 0;
  };
  void SetJob(const JobView& job);
  // Rank 0's figures of one iteration; samples_per_second is the whole job's.
  void RecordIteration(const std::string& job, double loss, double samples_per_second,
                       double exposed_comm_seconds);
  // A checkpoint that ended: committed (with its size) or aborted, `seconds` after the request.
  void CheckpointEnded(const std::string& job, bool committed, double seconds, int64_t bytes);

  prometheus::Counter& heartbeats() { return heartbeats_; }
  prometheus::Counter& nodes_lost() { return nodes_lost_; }
  // The calls the scheduler answered, by method (a Follow stream counts each message up), so
  // an operator sees where its load comes from.
  prometheus::Counter& Rpc(const std::string& method);
  // Open Follow streams: the processes connected now.
  prometheus::Gauge& follow_streams() { return follow_streams_; }
  // Events sent down Follow streams (views, horizons, completions, notices).
  prometheus::Counter& follow_events() { return follow_events_; }

 private:
  SchedulerMetrics();
  // The 1 of a one-hot gauge family (state, mode) moves to `value` for `job`.
  void OneHot(prometheus::Family<prometheus::Gauge>& family,
              std::map<std::string, std::string>& now, const std::string& job,
              const std::string& label, const std::string& value);

  std::mutex mu_;
  prometheus::Family<prometheus::Gauge>& state_;
  prometheus::Family<prometheus::Gauge>& mode_;
  prometheus::Family<prometheus::Gauge>& epoch_;
  prometheus::Family<prometheus::Gauge>& completed_;
  prometheus::Family<prometheus::Gauge>& loss_;
  prometheus::Family<prometheus::Gauge>& samples_per_second_;
  prometheus::Family<prometheus::Gauge>& exposed_;
  prometheus::Family<prometheus::Counter>& iterations_;
  prometheus::Family<prometheus::Counter>& checkpoints_;
  prometheus::Family<prometheus::Histogram>& checkpoint_seconds_;
  prometheus::Family<prometheus::Gauge>& checkpoint_bytes_;
  prometheus::Counter& heartbeats_;
  prometheus::Counter& nodes_lost_;
  prometheus::Family<prometheus::Counter>& rpcs_;
  prometheus::Gauge& follow_streams_;
  prometheus::Counter& follow_events_;
  std::map<std::string, prometheus::Counter*> rpc_now_;  // guarded by mu_: method -> series
  std::map<std::string, std::string> state_now_;         // guarded by mu_: job -> its state label
  std::map<std::string, std::string> mode_now_;          // guarded by mu_: job -> its mode label
};

}  // namespace herd::metrics
