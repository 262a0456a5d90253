// The follow protocol's simulated workers: each one a scheduler::Follower (the library
// `herd worker` uses), all driven in lockstep by one thread, as a synchronous job's workers move
// together. See sim.h.

#include <atomic>
#include <thread>

#include "absl/strings/str_format.h"
#include "bench/control_plane/sim.h"
#include "bench/control_plane/sim_common.h"
#include "common/logging.h"
#include "common/status.h"
#include "scheduler/client/epoch_plan.h"
#include "scheduler/client/follower.h"

namespace herd::bench::control_plane {
namespace {

struct Worker {
  std::unique_ptr<scheduler::Follower> follower;
  int64_t switched_at = -1;  // the first iteration it began in the new mode
};

// Counters of every follower together.
struct Totals {
  uint64_t up = 0, down = 0, bytes = 0;
};

Totals Count(const std::vector<Worker>& workers) {
  Totals t;
  for (const auto& w : workers) {
    if (!w.follower) continue;
    t.up += w.follower->messages_sent();
    t.down += w.follower->events_taken();
    t.bytes += w.follower->bytes_sent() + w.follower->bytes_taken();
  }
  return t;
}

}  // namespace

absl::StatusOr<SimResult> RunFollowSim(const SimOptions& o, const SchedulerGauges& gauges) {
  SimResult result;
  result.protocol = "follow";
  result.workers = o.workers;
  HERD_ASSIGN_OR_RETURN(auto clients, MakeClients(o.scheduler, o.workers, o.workers_per_channel));
  const std::string job = absl::StrFormat("cp-follow-%d", o.workers);
  const herd::v1::JobSpec spec = BenchJob(job, o.workers);
  HERD_RETURN_IF_ERROR(clients[0]->SubmitJob(spec).status());

  // Register every worker; each starts following its job at once, as a worker process does.
  std::vector<Worker> workers(static_cast<size_t>(o.workers));
  const auto register_begin = Clock::now();
  HERD_RETURN_IF_ERROR(RegisterAll(
      clients, job, o.workers, o.workers_per_channel, o.ucx_address_bytes,
      [&](int r, const herd::v1::RegisterNodeResponse& reg) {
        scheduler::FollowerOptions f;
        f.job = job;
        f.what = absl::StrFormat("simulated worker %d", r);
        f.report_interval = r == 0 ? std::chrono::milliseconds(250) : std::chrono::milliseconds(0);
        workers[static_cast<size_t>(r)].follower = std::make_unique<scheduler::Follower>(
            *clients[static_cast<size_t>(r / o.workers_per_channel)], std::move(f), reg);
      }));
  const Deadline limit = Deadline::After(o.limit);
  for (auto& w : workers) {
    auto s = w.follower->WaitFor(
        [](const scheduler::Follower::State& s) {
          return s.view != nullptr && s.view->job_state() == herd::v1::JOB_RUNNING;
        },
        limit);
    if (s.view == nullptr || s.view->job_state() != herd::v1::JOB_RUNNING) {
      return absl::DeadlineExceededError("the job did not start within the limit");
    }
  }
  result.register_s = SecondsSince(register_begin);

  // The driver: iteration i of every worker begins at t0 + i / rate, or when its horizon
  // covers it if that is later (the stall), and completes at once.
  const auto period = std::chrono::duration<double>(1.0 / o.rate);
  int64_t iteration = 0;
  std::vector<double> stalls;
  herd::v1::IterationStats stats;
  stats.set_loss(1.0);
  stats.set_iteration_seconds(period.count());
  stats.set_samples(64);
  auto run = [&](int64_t count, std::vector<double>* record,
                 const std::function<bool(int64_t)>& stop) -> absl::Status {
    auto next = Clock::now();
    for (int64_t k = 0; k < count; ++k, ++iteration) {
      std::this_thread::sleep_until(next);
      const auto due = Clock::now();
      for (size_t r = 0; r < workers.size(); ++r) {
        Worker& w = workers[r];
        if (!w.follower) continue;
        // Its stall: none when the horizon was already there; else until it came (the time the
        // driver spends on the workers before it is the simulation's, not the worker's).
        double stalled_ms = 0;
        auto s = w.follower->Current();
        if (s.horizon < iteration) {
          w.follower->AskHorizon(iteration);
          s = w.follower->WaitFor(
              [&](const scheduler::Follower::State& now) { return now.horizon >= iteration; },
              limit);
          if (s.horizon < iteration) return absl::DeadlineExceededError("no horizon in time");
          stalled_ms = 1000.0 * std::chrono::duration<double>(Clock::now() - due).count();
        }
        if (record != nullptr) record->push_back(stalled_ms);
        // The mode of this worker's iteration, from the view that governs it.
        if (w.switched_at < 0) {
          auto view = w.follower->ViewFor(iteration);
          if (view != nullptr &&
              scheduler::ModeAt(spec, view->schedule(), iteration).mode() == "dear") {
            w.switched_at = iteration;
          }
        }
        w.follower->Completed(iteration, stats);
      }
      if (stop && stop(iteration)) {
        ++iteration;
        return absl::OkStatus();
      }
      next = std::max(next + std::chrono::duration_cast<Clock::duration>(period), Clock::now());
    }
    return absl::OkStatus();
  };

  // A warm-up second (the rate estimate settles), then the measured stretch.
  HERD_RETURN_IF_ERROR(run(static_cast<int64_t>(o.rate), nullptr, nullptr));
  const Totals before = Count(workers);
  const double cpu_before = gauges.cpu_seconds();
  const auto begin = Clock::now();
  HERD_RETURN_IF_ERROR(run(o.iterations, &stalls, nullptr));
  const double seconds = SecondsSince(begin);
  const Totals after = Count(workers);
  result.iterations = o.iterations;
  result.achieved_rate = o.iterations / seconds;
  result.scheduler_cpu_cores = (gauges.cpu_seconds() - cpu_before) / seconds;
  result.scheduler_rss_mib = gauges.rss_mib();
  const double worker_iterations = static_cast<double>(o.workers) * o.iterations;
  result.rpcs_per_worker_iteration = static_cast<double>(after.up - before.up) / worker_iterations;
  result.down_messages_per_worker_iteration =
      static_cast<double>(after.down - before.down) / worker_iterations;
  result.bytes_per_worker_iteration =
      static_cast<double>(after.bytes - before.bytes) / worker_iterations;
  result.stall_p50_ms = Quantile(stalls, 0.5);
  result.stall_p99_ms = Quantile(stalls, 0.99);
  result.stall_max_ms = stalls.empty() ? 0 : stalls.back();
  if (!o.changes) return result;

  // A mode switch: from SetMode until every worker runs the new mode.
  herd::v1::SetModeRequest set;
  set.set_job(job);
  set.mutable_mode()->set_mode("dear");
  const auto switch_begin = Clock::now();
  HERD_RETURN_IF_ERROR(clients[0]->SetMode(set).status());
  HERD_RETURN_IF_ERROR(run(static_cast<int64_t>(o.rate * 60), nullptr, [&](int64_t) {
    for (const auto& w : workers) {
      if (w.switched_at < 0) return false;
    }
    return true;
  }));
  result.mode_switch_s = SecondsSince(switch_begin);
  result.switched_together = true;
  for (const auto& w : workers) result.switched_together &= w.switched_at == workers[0].switched_at;

  // A membership change: the last worker stops (its heartbeats end); the others stop at their
  // boundary as a synchronous job's survivors do, until every one has the new epoch's view.
  const int32_t generation = workers[0].follower->Current().view->membership_generation();
  const auto kill = Clock::now();
  workers.back().follower.reset();
  for (size_t r = 0; r + 1 < workers.size(); ++r) {
    auto s = workers[r].follower->WaitFor(
        [&](const scheduler::Follower::State& now) {
          return now.view != nullptr && now.view->membership_generation() > generation;
        },
        limit);
    if (s.view == nullptr || s.view->membership_generation() <= generation) {
      return absl::DeadlineExceededError("the survivors did not hear of the death in time");
    }
  }
  result.membership_change_s =
      SecondsSince(kill) - std::chrono::duration<double>(o.heartbeat_timeout).count();
  (void)clients[0]->CancelJob(job, "benchmark done");
  return result;
}

}  // namespace herd::bench::control_plane
