#pragma once
// What every process's /metrics says from its first scrape, before it has done anything (as
// Prometheus' own exporters do): which build and role it is, since when it runs, and the
// role's families with their unlabelled series at zero, so that a dashboard or an alert on
// `rate(herd_heartbeats_missed_total[5m])` has a series from the start instead of "no data".
// Names: docs/metrics.md, "Every process".
//
// Threading: any thread.

namespace herd::metrics {

enum class Role { kScheduler, kShard, kWorker };
const char* RoleName(Role role);  // "scheduler", "shard", "worker"

// herd_build_info{version, role} 1, herd_process_start_time_seconds and herd_uptime_seconds,
// and the role's metrics (scheduler_metrics.h, shard_metrics.h or worker_metrics.h, and
// process_metrics.h) registered. The first call wins; StartProcessEndpoint makes it.
void RegisterProcess(Role role);

// herd_uptime_seconds brought up to date: the endpoint calls it before each scrape.
void UpdateUptime();

}  // namespace herd::metrics
