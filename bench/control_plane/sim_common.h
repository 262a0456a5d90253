#pragma once
// What both simulated protocols share: the job, the clients (several workers per channel), the
// registration of every worker, percentiles.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/control_plane/sim.h"
#include "herd/v1/scheduler.pb.h"
#include "scheduler/client/scheduler_client.h"

namespace herd::bench::control_plane {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// One channel per `per_channel` workers (each its own connection).
absl::StatusOr<std::vector<std::unique_ptr<scheduler::SchedulerClient>>> MakeClients(
    const std::string& address, int workers, int per_channel);

// The benchmark's job: allreduce, `workers` workers, no shards, a small declared model, elastic
// (so that a death shrinks it instead of failing it).
herd::v1::JobSpec BenchJob(const std::string& name, int workers);

// Registers every worker (from a few threads, as many processes would), calling `registered`
// with each answer (on those threads). The UCX address each one registers is `ucx_bytes` long.
absl::Status RegisterAll(
    const std::vector<std::unique_ptr<scheduler::SchedulerClient>>& clients, const std::string& job,
    int workers, int per_channel, int ucx_bytes,
    const std::function<void(int, const herd::v1::RegisterNodeResponse&)>& registered);

// The q-quantile (0..1) of `values` (sorts them).
double Quantile(std::vector<double>& values, double q);

}  // namespace herd::bench::control_plane
