#include "metrics/worker_metrics.h"

#include <mutex>

#include "metrics/registry.h"

namespace herd::metrics {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;

}  // namespace

WorkerMetrics& WorkerMetrics::Get() {
  static auto* metrics = new WorkerMetrics();
  return *metrics;
}

WorkerMetrics::WorkerMetrics()
    : iterations_(BuildCounter()
                      .Name("herd_worker_iterations_total")
                      .Help("Training iterations this worker completed")
                      .Register(Registry())
                      .Add({})),
      samples_(BuildCounter()
                   .Name("herd_worker_samples_total")
                   .Help("Training samples this worker processed")
                   .Register(Registry())
                   .Add({})),
      iteration_(BuildGauge()
                     .Name("herd_worker_iteration")
                     .Help("The last iteration this worker completed")
                     .Register(Registry())
                     .Add({})),
      loss_(BuildGauge()
                .Name("herd_worker_loss")
                .Help("Training loss of this worker's last iteration")
                .Register(Registry())
                .Add({})),
      samples_per_second_(BuildGauge()
                              .Name("herd_worker_samples_per_second")
                              .Help("This worker's samples per second in its last iteration")
                              .Register(Registry())
                              .Add({})),
      phase_seconds_(BuildCounter()
                         .Name("herd_worker_iteration_seconds_total")
                         .Help("Time of this worker's iterations by phase: total, forward, "
                               "backward, exposed_comm (communication not hidden)")
                         .Register(Registry())),
      total_seconds_(phase_seconds_.Add({{"phase", "total"}})),
      forward_seconds_(phase_seconds_.Add({{"phase", "forward"}})),
      backward_seconds_(phase_seconds_.Add({{"phase", "backward"}})),
      exposed_seconds_(phase_seconds_.Add({{"phase", "exposed_comm"}})),
      last_(BuildGauge()
                .Name("herd_worker_last_iteration_seconds")
                .Help("This worker's last iteration by phase: total, forward, backward, "
                      "exposed_comm")
                .Register(Registry())),
      last_total_(last_.Add({{"phase", "total"}})),
      last_forward_(last_.Add({{"phase", "forward"}})),
      last_backward_(last_.Add({{"phase", "backward"}})),
      last_exposed_(last_.Add({{"phase", "exposed_comm"}})),
      sent_bytes_(BuildCounter()
                      .Name("herd_worker_sent_bytes_total")
                      .Help("Bytes this worker sent, by mode and peer kind (worker: collectives "
                            "and peer exchanges; server: pushes to the shards)")
                      .Register(Registry())),
      mode_(BuildGauge()
                .Name("herd_worker_mode")
                .Help("1 for the mode this worker runs now, 0 for modes it ran before")
                .Register(Registry())),
      epoch_(BuildGauge()
                 .Name("herd_worker_plan_epoch")
                 .Help("The plan epoch this worker follows (membership or mode changes)")
                 .Register(Registry())
                 .Add({})),
      ps_call_seconds_(prometheus::BuildHistogram()
                           .Name("herd_worker_ps_call_seconds")
                           .Help("Latency of this worker's calls to parameter-server shards, by "
                                 "call: push, pull, push_pull")
                           .Register(Registry())),
      push_seconds_(ps_call_seconds_.Add({{"call", "push"}}, LatencyBuckets())),
      pull_seconds_(ps_call_seconds_.Add({{"call", "pull"}}, LatencyBuckets())),
      push_pull_seconds_(ps_call_seconds_.Add({{"call", "push_pull"}}, LatencyBuckets())) {}

void WorkerMetrics::RecordIteration(const Iteration& it) {
  iterations_.Increment();
  samples_.Increment(static_cast<double>(it.samples));
  iteration_.Set(static_cast<double>(it.iteration));
  loss_.Set(it.loss);
  if (it.seconds > 0) samples_per_second_.Set(static_cast<double>(it.samples) / it.seconds);
  total_seconds_.Increment(it.seconds);
  forward_seconds_.Increment(it.forward_seconds);
  backward_seconds_.Increment(it.backward_seconds);
  exposed_seconds_.Increment(it.exposed_comm_seconds);
  last_total_.Set(it.seconds);
  last_forward_.Set(it.forward_seconds);
  last_backward_.Set(it.backward_seconds);
  last_exposed_.Set(it.exposed_comm_seconds);
}

prometheus::Counter& WorkerMetrics::SentBytes(std::string_view mode, Peer peer) {
  return sent_bytes_.Add(
      {{"mode", std::string(mode)}, {"peer", peer == Peer::kWorker ? "worker" : "server"}});
}

void WorkerMetrics::SetPlan(std::string_view mode, uint64_t epoch) {
  static std::mutex mu;  // SetPlan is rare; the lock keeps the 1 on one mode
  std::lock_guard<std::mutex> lock(mu);
  prometheus::Gauge& now = mode_.Add({{"mode", std::string(mode)}});
  if (current_mode_ != nullptr && current_mode_ != &now) current_mode_->Set(0);
  now.Set(1);
  current_mode_ = &now;
  epoch_.Set(static_cast<double>(epoch));
}

}  // namespace herd::metrics
