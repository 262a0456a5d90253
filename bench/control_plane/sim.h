#pragma once
// `herd bench control-plane` (docs/BENCHMARKS.md, "Control plane"): a real `herd scheduler`
// process, and N simulated workers in this process speaking its real protocol, running one
// allreduce job at a fixed iteration rate. Two protocols side by side:
//
// - follow: the protocol herd's workers speak (docs/scheduler.md, "Following a job"): one
//   Follow stream per worker through scheduler::Follower, the library `herd worker` uses; each
//   iteration's plan computed from the view, progress batched with the heartbeats.
// - legacy: the per-iteration protocol herd spoke before (GetPlan at the start of every
//   iteration, ReportIteration at its end, a Heartbeat call every interval), with asynchronous
//   calls so that N workers' calls are in flight at once, as N processes' would be.
//
// The simulated workers do no training: an iteration begins when its plan is there (follow:
// the horizon covers it; legacy: GetPlan answered) and ends at once. What the run measures is
// the control plane's cost alone.

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace herd::bench::control_plane {

struct SimOptions {
  std::string scheduler;  // host:port of the running scheduler
  int workers = 64;
  int iterations = 100;  // measured, after a warm-up second
  double rate = 10;      // iterations per second the job runs at (when the scheduler keeps up)
  int ucx_address_bytes = 250;
  int workers_per_channel = 128;
  std::chrono::milliseconds heartbeat_timeout{10000};
  bool changes = true;              // also measure a mode switch and a membership change
  std::chrono::seconds limit{600};  // give up a phase that takes longer
};

struct SimResult {
  std::string protocol;
  int workers = 0;
  int iterations = 0;
  double achieved_rate = 0;  // iterations per second over the measured stretch
  double rpcs_per_worker_iteration = 0;
  double bytes_per_worker_iteration = 0;
  double down_messages_per_worker_iteration = 0;
  double stall_p50_ms = 0, stall_p99_ms = 0, stall_max_ms = 0;
  double register_s = 0;
  double membership_change_s = -1;  // -1: not measured
  double mode_switch_s = -1;
  bool switched_together = false;  // every worker began the new mode at the same iteration
  // Filled by the caller (the scheduler process).
  double scheduler_cpu_cores = 0;
  double scheduler_rss_mib = 0;
  double bootstrap_rpcs_per_rank = -1;
};

// Callbacks the driver gives a run: the scheduler's CPU seconds and RSS now.
struct SchedulerGauges {
  std::function<double()> cpu_seconds;
  std::function<double()> rss_mib;
};

absl::StatusOr<SimResult> RunFollowSim(const SimOptions& options, const SchedulerGauges& gauges);
absl::StatusOr<SimResult> RunLegacySim(const SimOptions& options, const SchedulerGauges& gauges);

}  // namespace herd::bench::control_plane
