// The legacy protocol's simulated workers (the one herd spoke before the Follow stream): at the
// start of every iteration each worker asks for its plan (GetPlan), at its end it reports it
// (ReportIteration), and every heartbeat interval it sends a Heartbeat. The calls are
// asynchronous (gRPC's callback API), so all N workers' calls are in flight at once, as N
// processes' would be. See sim.h.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_format.h"
#include "bench/control_plane/sim.h"
#include "bench/control_plane/sim_common.h"
#include "common/status.h"
#include "herd/v1/scheduler.grpc.pb.h"

namespace herd::bench::control_plane {
namespace {

using Stub = herd::v1::Scheduler::Stub;

// Counts calls in flight and their bytes; Wait() returns once all answered.
class Calls {
 public:
  void Begin() {
    std::lock_guard<std::mutex> lock(mu_);
    ++in_flight_;
  }
  void End(size_t bytes, bool ok) {
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    ++done_;
    bytes_ += bytes;
    if (!ok) ++failed_;
    cv_.notify_all();
  }
  bool Wait(Deadline deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    while (in_flight_ > 0 && !deadline.expired()) cv_.wait_for(lock, std::chrono::milliseconds(50));
    return in_flight_ == 0;
  }
  uint64_t done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  uint64_t bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
  }
  uint64_t failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t in_flight_ = 0;
  uint64_t done_ = 0, bytes_ = 0, failed_ = 0;
};

// The callback form of a method of the stub (the name alone is overloaded).
#define HERD_ASYNC(Method)                                                     \
  [](Stub::async_interface* a, grpc::ClientContext* c, const auto* q, auto* p, \
     std::function<void(grpc::Status)> f) { a->Method(c, q, p, std::move(f)); }

// One asynchronous unary call; `answered` runs with its latency once the answer is there.
template <typename Req, typename Resp, typename Method>
void Call(Stub& stub, Method method, const Req& req, Calls& calls,
          std::function<void(const Resp&, double)> answered = nullptr) {
  struct State {
    grpc::ClientContext ctx;
    Req req;
    Resp resp;
    Clock::time_point begin = Clock::now();
  };
  auto* st = new State;
  st->req = req;
  st->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  calls.Begin();
  method(stub.async(), &st->ctx, &st->req, &st->resp, [st, &calls, answered](grpc::Status s) {
    const double ms = 1000.0 * std::chrono::duration<double>(Clock::now() - st->begin).count();
    if (s.ok() && answered) answered(st->resp, ms);
    calls.End(st->req.ByteSizeLong() + st->resp.ByteSizeLong(), s.ok());
    delete st;
  });
}

}  // namespace

absl::StatusOr<SimResult> RunLegacySim(const SimOptions& o, const SchedulerGauges& gauges) {
  SimResult result;
  result.protocol = "legacy";
  result.workers = o.workers;
  HERD_ASSIGN_OR_RETURN(auto clients, MakeClients(o.scheduler, o.workers, o.workers_per_channel));
  std::vector<std::unique_ptr<Stub>> stubs;
  for (size_t c = 0; c < clients.size(); ++c) {
    grpc::ChannelArguments args;
    args.SetInt("herd.legacy_channel", static_cast<int>(c) + 1);
    stubs.push_back(herd::v1::Scheduler::NewStub(
        grpc::CreateCustomChannel(o.scheduler, grpc::InsecureChannelCredentials(), args)));
  }
  auto stub_of = [&](int r) -> Stub& {
    return *stubs[static_cast<size_t>(r / o.workers_per_channel)];
  };
  const std::string job = absl::StrFormat("cp-legacy-%d", o.workers);
  HERD_RETURN_IF_ERROR(clients[0]->SubmitJob(BenchJob(job, o.workers)).status());

  std::vector<uint64_t> node(static_cast<size_t>(o.workers));
  int64_t interval_ms = 0;
  std::mutex mu;
  const auto register_begin = Clock::now();
  HERD_RETURN_IF_ERROR(RegisterAll(clients, job, o.workers, o.workers_per_channel,
                                   o.ucx_address_bytes,
                                   [&](int r, const herd::v1::RegisterNodeResponse& reg) {
                                     std::lock_guard<std::mutex> lock(mu);
                                     node[static_cast<size_t>(r)] = reg.node_id();
                                     interval_ms = reg.heartbeat_interval_ms();
                                   }));
  // The legacy workers poll the job until it runs (one poller here: the sim is kind to it).
  const Deadline limit = Deadline::After(o.limit);
  for (;;) {
    auto s = clients[0]->GetJob(job);
    if (s.ok() && s->state() == herd::v1::JOB_RUNNING) break;
    if (limit.expired()) return absl::DeadlineExceededError("the job did not start in time");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  result.register_s = SecondsSince(register_begin);

  // Heartbeats: every worker every interval, spread over the interval.
  Calls beats;
  std::atomic<bool> beating{true};
  std::atomic<int> dead{-1};            // the worker whose heartbeats stop (a death)
  std::atomic<uint64_t> seen_epoch{0};  // set by the survivors once they see a new epoch
  std::thread heart([&] {
    const auto step =
        std::chrono::milliseconds(std::max<int64_t>(interval_ms, 50)) / std::max(1, o.workers);
    auto next = Clock::now();
    for (int r = 0; beating.load(); r = (r + 1) % o.workers) {
      if (r != dead.load()) {
        herd::v1::HeartbeatRequest req;
        req.set_job(job);
        req.set_node_id(node[static_cast<size_t>(r)]);
        Call<herd::v1::HeartbeatRequest, herd::v1::HeartbeatResponse>(
            stub_of(r), HERD_ASYNC(Heartbeat), req, beats);
      }
      next += step;
      std::this_thread::sleep_until(next);
    }
  });

  const auto period = std::chrono::duration<double>(1.0 / o.rate);
  int64_t iteration = 0;
  Calls plans, reports;
  std::vector<double> stalls;
  std::string switched_mode;
  std::vector<int64_t> switched_at(static_cast<size_t>(o.workers), -1);
  auto run = [&](int64_t count, bool record, const std::function<bool()>& stop) -> absl::Status {
    auto next = Clock::now();
    for (int64_t k = 0; k < count; ++k, ++iteration) {
      std::this_thread::sleep_until(next);
      std::mutex m;
      std::vector<double> waits;
      for (int r = 0; r < o.workers; ++r) {
        if (r == dead.load()) continue;
        herd::v1::GetPlanRequest req;
        req.set_job(job);
        req.set_iteration(iteration);
        req.set_node_id(node[static_cast<size_t>(r)]);
        Call<herd::v1::GetPlanRequest, herd::v1::Plan>(
            stub_of(r), HERD_ASYNC(GetPlan), req, plans,
            [&, r, it = iteration](const herd::v1::Plan& plan, double ms) {
              std::lock_guard<std::mutex> lock(m);
              waits.push_back(ms);
              if (plan.mode().mode() == "dear" && switched_at[static_cast<size_t>(r)] < 0) {
                switched_at[static_cast<size_t>(r)] = it;
              }
            });
      }
      if (!plans.Wait(limit)) return absl::DeadlineExceededError("GetPlan answers too late");
      for (int r = 0; r < o.workers; ++r) {
        if (r == dead.load()) continue;
        herd::v1::ReportIterationRequest req;
        req.set_job(job);
        req.set_node_id(node[static_cast<size_t>(r)]);
        req.set_iteration(iteration);
        req.mutable_stats()->set_loss(1.0);
        req.mutable_stats()->set_samples(64);
        Call<herd::v1::ReportIterationRequest, herd::v1::ReportIterationResponse>(
            stub_of(r), HERD_ASYNC(ReportIteration), req, reports);
      }
      if (!reports.Wait(limit)) return absl::DeadlineExceededError("reports answered too late");
      if (record) stalls.insert(stalls.end(), waits.begin(), waits.end());
      if (stop && stop()) {
        ++iteration;
        return absl::OkStatus();
      }
      next = std::max(next + std::chrono::duration_cast<Clock::duration>(period), Clock::now());
    }
    return absl::OkStatus();
  };

  absl::Status st = run(static_cast<int64_t>(o.rate), false, nullptr);
  const uint64_t calls_before = plans.done() + reports.done() + beats.done();
  const uint64_t bytes_before = plans.bytes() + reports.bytes() + beats.bytes();
  const double cpu_before = gauges.cpu_seconds();
  const auto begin = Clock::now();
  if (st.ok()) st = run(o.iterations, true, nullptr);
  const double seconds = SecondsSince(begin);
  if (st.ok()) {
    result.iterations = o.iterations;
    result.achieved_rate = o.iterations / seconds;
    result.scheduler_cpu_cores = (gauges.cpu_seconds() - cpu_before) / seconds;
    result.scheduler_rss_mib = gauges.rss_mib();
    const double wi = static_cast<double>(o.workers) * o.iterations;
    result.rpcs_per_worker_iteration =
        static_cast<double>(plans.done() + reports.done() + beats.done() - calls_before) / wi;
    result.bytes_per_worker_iteration =
        static_cast<double>(plans.bytes() + reports.bytes() + beats.bytes() - bytes_before) / wi;
    result.stall_p50_ms = Quantile(stalls, 0.5);
    result.stall_p99_ms = Quantile(stalls, 0.99);
    result.stall_max_ms = stalls.empty() ? 0 : stalls.back();
  }
  if (st.ok() && o.changes) {
    herd::v1::SetModeRequest set;
    set.set_job(job);
    set.mutable_mode()->set_mode("dear");
    const auto switch_begin = Clock::now();
    st = clients[0]->SetMode(set).status();
    if (st.ok()) {
      st = run(static_cast<int64_t>(o.rate * 60), false, [&] {
        for (int64_t a : switched_at) {
          if (a < 0) return false;
        }
        return true;
      });
    }
    if (st.ok()) {
      result.mode_switch_s = SecondsSince(switch_begin);
      result.switched_together = true;
      for (int64_t a : switched_at) result.switched_together &= a == switched_at[0];
    }
    if (st.ok()) {
      // A death: the last worker's heartbeats stop; each survivor hears the new epoch in a
      // heartbeat answer and reads the job (as the legacy workers did), until all have.
      auto job_now = clients[0]->GetJob(job);
      const uint64_t epoch = job_now.ok() ? job_now->epoch() : 0;
      const auto kill = Clock::now();
      dead.store(o.workers - 1);
      Calls reads;
      std::vector<bool> heard(static_cast<size_t>(o.workers), false);
      int missing = o.workers - 1;
      while (missing > 0 && !limit.expired()) {
        for (int r = 0; r + 1 < o.workers; ++r) {
          if (heard[static_cast<size_t>(r)]) continue;
          herd::v1::HeartbeatRequest req;
          req.set_job(job);
          req.set_node_id(node[static_cast<size_t>(r)]);
          std::atomic<bool> newer{false};
          Call<herd::v1::HeartbeatRequest, herd::v1::HeartbeatResponse>(
              stub_of(r), HERD_ASYNC(Heartbeat), req, reads,
              [&newer, epoch](const herd::v1::HeartbeatResponse& a, double) {
                if (a.epoch() > epoch) newer.store(true);
              });
          reads.Wait(limit);
          if (!newer.load()) break;  // not declared yet: everyone asks again later
          herd::v1::GetJobRequest g;
          g.set_name(job);
          Call<herd::v1::GetJobRequest, herd::v1::JobStatus>(stub_of(r), HERD_ASYNC(GetJob), g,
                                                             reads);
          heard[static_cast<size_t>(r)] = true;
          --missing;
        }
        reads.Wait(limit);
        if (missing > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (missing == 0) {
        result.membership_change_s =
            SecondsSince(kill) - std::chrono::duration<double>(o.heartbeat_timeout).count();
      }
    }
  }
  beating.store(false);
  heart.join();
  beats.Wait(Deadline::After(std::chrono::seconds(30)));
  (void)clients[0]->CancelJob(job, "benchmark done");
  if (!st.ok()) return st;
  return result;
}

}  // namespace herd::bench::control_plane
