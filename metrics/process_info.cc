#include "metrics/process_info.h"

#include <prometheus/gauge.h>

#include <chrono>
#include <mutex>

#include "metrics/process_metrics.h"
#include "metrics/registry.h"
#include "metrics/scheduler_metrics.h"
#include "metrics/shard_metrics.h"
#include "metrics/worker_metrics.h"

namespace herd::metrics {
namespace {

// Steady time for the up-time (immune to clock steps), wall time for the start (what
// Prometheus' process_start_time_seconds means).
struct Start {
  std::chrono::steady_clock::time_point steady = std::chrono::steady_clock::now();
  std::chrono::system_clock::time_point wall = std::chrono::system_clock::now();
};

const Start& ProcessStart() {
  static const auto* start = new Start();
  return *start;
}
// Taken while the process loads, so the start is the process's, not its endpoint's.
[[maybe_unused]] const Start& start_at_load = ProcessStart();

prometheus::Gauge& Uptime() {
  static auto& gauge = prometheus::BuildGauge()
                           .Name("herd_uptime_seconds")
                           .Help("Seconds since this process started")
                           .Register(Registry())
                           .Add({});
  return gauge;
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kScheduler:
      return "scheduler";
    case Role::kShard:
      return "shard";
    case Role::kWorker:
      return "worker";
  }
  return "unknown";
}

void RegisterProcess(Role role) {
  static std::once_flag once;
  std::call_once(once, [role] {
    const Start& start = ProcessStart();
    prometheus::BuildGauge()
        .Name("herd_build_info")
        .Help("Always 1: the version of herd this process runs, and its role")
        .Register(Registry())
        .Add({{"version", HERD_VERSION}, {"role", RoleName(role)}})
        .Set(1);
    prometheus::BuildGauge()
        .Name("herd_process_start_time_seconds")
        .Help("When this process started, in seconds since the Unix epoch")
        .Register(Registry())
        .Add({})
        .Set(std::chrono::duration<double>(start.wall.time_since_epoch()).count());
    UpdateUptime();
    ProcessMetrics::Get();
    switch (role) {
      case Role::kScheduler:
        SchedulerMetrics::Get();
        break;
      case Role::kShard:
        ShardMetrics::Get();
        break;
      case Role::kWorker:
        WorkerMetrics::Get();
        break;
    }
  });
}

void UpdateUptime() {
  Uptime().Set(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - ProcessStart().steady)
          .count());
}

}  // namespace herd::metrics
