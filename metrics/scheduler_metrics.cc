#include "metrics/scheduler_metrics.h"

#include "metrics/registry.h"

namespace herd::metrics {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;

prometheus::Family<prometheus::Gauge>& Gauge(const char* name, const char* help) {
  return BuildGauge().Name(name).Help(help).Register(Registry());
}

}  // namespace

SchedulerMetrics& SchedulerMetrics::Get() {
  static auto* metrics = new SchedulerMetrics();
  return *metrics;
}

SchedulerMetrics::SchedulerMetrics()
    : state_(Gauge("herd_scheduler_job_state", "1 for the job's current state, else 0")),
      mode_(Gauge("herd_scheduler_job_mode",
                  "1 for the mode of the job's newest planned iteration, 0 for earlier modes")),
      epoch_(Gauge("herd_scheduler_plan_epoch",
                   "The job's plan epoch (it changes with membership and mode)")),
      completed_(Gauge("herd_scheduler_completed_iteration",
                       "The newest iteration every live worker of the job completed")),
      loss_(Gauge("herd_scheduler_job_loss", "Rank 0's loss in its last reported iteration")),
      samples_per_second_(Gauge("herd_scheduler_job_samples_per_second",
                                "The job's samples per second in rank 0's last reported "
                                "iteration (workers x rank 0's rate)")),
      exposed_(Gauge("herd_scheduler_job_exposed_comm_seconds",
                     "Rank 0's exposed communication in its last reported iteration")),
      iterations_(BuildCounter()
                      .Name("herd_scheduler_job_iterations_total")
                      .Help("Iterations rank 0 of the job reported")
                      .Register(Registry())),
      checkpoints_(BuildCounter()
                       .Name("herd_scheduler_checkpoints_total")
                       .Help("Checkpoints that ended, by outcome: committed or aborted")
                       .Register(Registry())),
      checkpoint_seconds_(prometheus::BuildHistogram()
                              .Name("herd_scheduler_checkpoint_seconds")
                              .Help("From a checkpoint's request to its commit")
                              .Register(Registry())),
      checkpoint_bytes_(Gauge("herd_scheduler_checkpoint_bytes",
                              "Size of the job's newest committed checkpoint (every file)")),
      heartbeats_(BuildCounter()
                      .Name("herd_scheduler_heartbeats_total")
                      .Help("Heartbeats the scheduler received")
                      .Register(Registry())
                      .Add({})),
      nodes_lost_(BuildCounter()
                      .Name("herd_scheduler_heartbeat_timeouts_total")
                      .Help("Processes declared dead because their heartbeats stopped")
                      .Register(Registry())
                      .Add({})),
      rpcs_(BuildCounter()
                .Name("herd_scheduler_rpcs_total")
                .Help("Calls the scheduler answered, by method (Follow: messages up its streams)")
                .Register(Registry())),
      follow_streams_(Gauge("herd_scheduler_connected_processes",
                            "Processes following their job now (open Follow streams)")
                          .Add({})),
      follow_events_(BuildCounter()
                         .Name("herd_scheduler_follow_events_total")
                         .Help("Events sent down Follow streams (views, horizons, answers)")
                         .Register(Registry())
                         .Add({})) {}

prometheus::Counter& SchedulerMetrics::Rpc(const std::string& method) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& series = rpc_now_[method];
  if (series == nullptr) series = &rpcs_.Add({{"method", method}});
  return *series;
}

void SchedulerMetrics::OneHot(prometheus::Family<prometheus::Gauge>& family,
                              std::map<std::string, std::string>& now, const std::string& job,
                              const std::string& label, const std::string& value) {
  auto it = now.find(job);
  if (it != now.end() && it->second == value) return;
  if (it != now.end()) family.Add({{"job_name", job}, {label, it->second}}).Set(0);
  family.Add({{"job_name", job}, {label, value}}).Set(1);
  now[job] = value;
}

void SchedulerMetrics::SetJob(const JobView& job) {
  std::lock_guard<std::mutex> lock(mu_);
  OneHot(state_, state_now_, job.job, "state", job.state);
  if (!job.mode.empty()) OneHot(mode_, mode_now_, job.job, "mode", job.mode);
  epoch_.Add({{"job_name", job.job}}).Set(static_cast<double>(job.epoch));
  completed_.Add({{"job_name", job.job}}).Set(static_cast<double>(job.completed_iteration));
}

void SchedulerMetrics::RecordIteration(const std::string& job, double loss,
                                       double samples_per_second, double exposed_comm_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  const prometheus::Labels labels = {{"job_name", job}};
  loss_.Add(labels).Set(loss);
  samples_per_second_.Add(labels).Set(samples_per_second);
  exposed_.Add(labels).Set(exposed_comm_seconds);
  iterations_.Add(labels).Increment();
}

void SchedulerMetrics::CheckpointEnded(const std::string& job, bool committed, double seconds,
                                       int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  checkpoints_.Add({{"job_name", job}, {"outcome", committed ? "committed" : "aborted"}})
      .Increment();
  if (!committed) return;
  checkpoint_seconds_.Add({{"job_name", job}}, LatencyBuckets()).Observe(seconds);
  checkpoint_bytes_.Add({{"job_name", job}}).Set(static_cast<double>(bytes));
}

}  // namespace herd::metrics
