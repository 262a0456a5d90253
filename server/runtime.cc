#include "server/runtime.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/env.h"
#include "checkpoint/reader.h"
#include "common/logging.h"
#include "common/retry.h"
#include "common/status.h"
#include "plan/modes.h"
#include "scheduler/client/epoch_plan.h"
#include "scheduler/client/follower.h"
#include "scheduler/client/job_states.h"
#include "scheduler/client/job_wait.h"
#include "server/engine.h"
#include "server/recovery_check.h"
#include "server/shard_checkpoints.h"
#include "server/state/shard_store.h"

namespace herd::server {
namespace {

using herd::v1::JobState;

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

bool IsPsMode(const std::string& mode) {
  const plan::ModeInfo* m = plan::FindMode(mode);
  return m != nullptr && m->needs_servers;
}

// The parameter-server mode this shard serves: the mode of the job's plan when it is one,
// else the first ps_* mode of its schedule (a job that starts in a collective mode and
// switches later); nullopt while the job runs no ps_* mode at all.
std::optional<herd::v1::ModeSpec> ServedMode(const herd::v1::Plan& plan,
                                             const herd::v1::JobStatus& job) {
  if (IsPsMode(plan.mode().mode())) return plan.mode();
  for (const auto& sw : job.schedule()) {
    if (IsPsMode(sw.mode().mode())) return sw.mode();
  }
  return std::nullopt;
}

class ShardProcess {
 public:
  explicit ShardProcess(ShardOptions o) : o_(std::move(o)) {}

  absl::Status Run() {
    std::error_code ec;
    const std::string state = std::filesystem::absolute(o_.state_dir, ec).lexically_normal();
    if (o_.name.empty()) o_.name = "server-" + HostName() + ":" + state;
    // The state first: a second shard on the same directory stops here, before registering.
    HERD_ASSIGN_OR_RETURN(store_, ShardStore::Open(state, {o_.accept_data_loss, nullptr}));
    state_dir_ = state;
    HERD_ASSIGN_OR_RETURN(listener_, ShardServer::Start(o_.service));
    HERD_ASSIGN_OR_RETURN(sched_, scheduler::SchedulerClient::Connect(o_.scheduler));
    absl::Status st = Serve();
    // Checkpoint files in flight are finished and reported first (a preempted job's last one).
    checkpoints_.reset();
    // Serving stops first, so nothing is acknowledged after the final write.
    listener_->Shutdown();
    watching_.store(false);
    if (watcher_.joinable()) watcher_.join();
    follower_.reset();
    FinalWrite();
    return st;
  }

 private:
  absl::Status Serve() {
    const Deadline wait = Deadline::After(o_.wait_for_job);
    if (o_.job.empty()) {
      HERD_ASSIGN_OR_RETURN(o_.job, ChooseJobWaiting(wait));
    }
    HERD_ASSIGN_OR_RETURN(herd::v1::JobStatus job,
                          scheduler::WaitForJob(*sched_, o_.job, wait, "server"));
    // Checked before registering, so a refused start leaves no trace with the scheduler.
    if (scheduler::IsTerminal(job.state())) return EndedBeforeStart(job);
    HERD_RETURN_IF_ERROR(CheckThreads(job.spec()));
    checkpoints_job_ = !job.spec().checkpoint().dir().empty();
    HERD_ASSIGN_OR_RETURN(herd::v1::RegisterNodeResponse reg, Register());
    shard_ = reg.rank();
    spec_ = job.spec();
    // One stream to the scheduler: the heartbeats up (each reports the version on disk, which a
    // restart must recover), the epoch's views down.
    scheduler::FollowerOptions follow;
    follow.job = o_.job;
    follow.what = absl::StrFormat("server (shard %d)", shard_);
    follow.worker = false;
    follow.fill = [this](herd::v1::FollowRequest& req) {
      const Engine* engine = engine_ptr_.load();
      if (engine == nullptr) return;
      if (std::optional<int64_t> v = engine->DurableVersion()) req.set_durable_version(*v);
    };
    follower_ = std::make_unique<scheduler::Follower>(*sched_, std::move(follow), reg);
    // The checkpoints announced from now on (and the one pending, which expects this shard).
    HERD_ASSIGN_OR_RETURN(job, sched_->GetJob(o_.job));
    const int64_t first =
        job.checkpoints_requested() - (job.pending_checkpoint().id().empty() ? 0 : 1);
    checkpoints_ = std::make_unique<ShardCheckpoints>(
        *sched_, o_.job, reg.node_id(), shard_, [this] { return engine_ptr_.load(); }, first);

    // Follow the plan from now on; each new epoch may start the engine, move ps_async's
    // staleness bound, or end the job.
    watching_.store(true);
    watcher_ = std::thread([this] { Watch(); });
    return WaitForTheEnd();
  }

  // Waits for a stop signal or the job's end, whichever comes first.
  absl::Status WaitForTheEnd() {
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    const timespec slice = {0, 200 * 1000 * 1000};
    std::optional<Deadline> preempting;
    for (;;) {
      const int sig = sigtimedwait(&stop, nullptr, &slice);
      if (sig > 0) {
        // SIGTERM of a running job with checkpoints: preemption. The job saves a last
        // checkpoint and stops; this shard serves until then (within the grace). Another
        // signal, or a job that cannot checkpoint, stops it at once.
        if (sig == SIGTERM && !preempting.has_value() && Preempt()) {
          preempting = Deadline::After(o_.preempt_grace);
          continue;
        }
        Log().info("server: signal {}, shutting down", sig);
        return absl::OkStatus();
      }
      if (preempting.has_value() && preempting->expired()) {
        return absl::DeadlineExceededError(
            "the job did not stop within the preemption grace after SIGTERM");
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (!outcome_.has_value()) continue;
      return *outcome_;
    }
  }

  // Asks the scheduler for the preemption checkpoint; false when the job cannot take one.
  bool Preempt() {
    if (!checkpoints_job_) return false;  // nowhere to write one: no need to ask
    herd::v1::RequestCheckpointRequest req;
    req.set_job(o_.job);
    req.set_preempt(true);
    req.set_who(absl::StrFormat("server '%s' (shard %d) got SIGTERM", o_.name, shard_));
    auto record = sched_->RequestCheckpoint(req);
    if (!record.ok()) {
      Log().warn("server: SIGTERM: no checkpoint before stopping: {}", record.status().ToString());
      return false;
    }
    Log().info("server: SIGTERM: the job stops after checkpoint {} (iteration {})", record->id(),
               record->iteration());
    return true;
  }

  // Follows the views the stream brings; each new one may start the engine, move the live
  // workers (ps_async's staleness, ps_sync's rounds), or end the job.
  void Watch() {
    std::shared_ptr<const herd::v1::EpochView> seen;
    while (watching_.load()) {
      const scheduler::Follower::State state = follower_->WaitFor(
          [&](const scheduler::Follower::State& s) {
            return !watching_.load() || s.view != seen || absl::IsDataLoss(s.refused);
          },
          Deadline::After(std::chrono::milliseconds(500)));
      if (absl::IsDataLoss(state.refused)) {
        // The scheduler refuses its state (it went back in time): no plan can be trusted, and
        // the refusal stands until an operator acts. The shard ends with it; its own state
        // is untouched.
        Log().error("server: {}", state.refused.ToString());
        std::lock_guard<std::mutex> lock(mu_);
        outcome_ = state.refused;
        return;
      }
      if (state.view == nullptr || state.view == seen) continue;
      seen = state.view;
      // A job whose spec listed no tensors learns its layout from its first worker; the view
      // says when it is known, and the shard reads the spec again once.
      if (spec_.tensors_size() == 0 && seen->tensor_count() > 0) {
        auto job = sched_->GetJobBrief(o_.job);
        if (!job.ok()) {
          Log().warn("server: reading the job's layout: {}", job.status().ToString());
          seen = nullptr;  // tried again with the next view or slice
          continue;
        }
        spec_ = job->spec();
      }
      OnPlan(scheduler::BuildPlan(spec_, *seen, seen->epoch_start_iteration()));
    }
  }

  void OnPlan(const herd::v1::Plan& plan) {
    if (scheduler::IsTerminal(plan.job_state())) {
      const absl::Status outcome =
          scheduler::JobEndedStatus(o_.job, plan.job_state(), plan.end_reason());
      if (outcome.ok()) Log().info("server: job '{}' completed", o_.job);
      std::lock_guard<std::mutex> lock(mu_);
      outcome_ = outcome;
      return;
    }
    // The engine needs the shard map, so the model's layout (a job whose spec lists no tensors
    // learns it from its first worker).
    if (plan.shards_size() == 0) return;
    if (engine_ == nullptr) {
      if (auto st = StartEngine(plan); !st.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        outcome_ = st;
        return;
      }
    }
    if (engine_ != nullptr && plan.ranks_size() > 0) {
      // The process holding each live rank: a worker back in its slot is a new incarnation
      // (the epoch it registered at), so its return is told from no change.
      std::map<int, uint64_t> incarnation;
      for (const auto& inc : plan.incarnations()) incarnation[inc.rank()] = inc.epoch();
      std::vector<uint64_t> nodes;
      for (int r : plan.ranks()) {
        auto it = incarnation.find(r);
        nodes.push_back(it != incarnation.end() ? it->second : 0);
      }
      engine_->SetLiveWorkers({plan.ranks().begin(), plan.ranks().end()}, nodes);
    }
    // --port-file says "serving": written once the engine answers (or the shard stands by).
    if (!port_written_ && (engine_ != nullptr || standing_by_)) {
      if (auto st = WritePortFile(); !st.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        outcome_ = st;
        return;
      }
      port_written_ = true;
    }
  }

  // Builds the engine once the job runs a ps_* mode (or has one scheduled) and the shard map
  // is known; restores this shard's keys from the state directory.
  absl::Status StartEngine(const herd::v1::Plan& plan) {
    HERD_ASSIGN_OR_RETURN(herd::v1::JobStatus job, ReadJobThroughARestart());
    std::optional<herd::v1::ModeSpec> mode = ServedMode(plan, job);
    if (!mode.has_value()) {
      if (!standing_by_) {
        Log().info(
            "server: shard {} of job '{}' stands by: the job runs collective mode {} "
            "and schedules no ps_* mode yet",
            shard_, o_.job, plan.mode().mode());
        standing_by_ = true;
      }
      return absl::OkStatus();
    }
    herd::v1::Plan served = plan;
    *served.mutable_mode() = *mode;
    HERD_ASSIGN_OR_RETURN(ShardConfig config,
                          ShardConfigFromJob(job.spec(), served, shard_, o_.durability));
    auto engine = Engine::Create(config, store_.get());
    HERD_ASSIGN_OR_RETURN(std::vector<KeyRecord> records, store_->Load(o_.job));
    for (const auto& r : records) HERD_RETURN_IF_ERROR(engine->Restore(r));
    // Not behind what this shard had on disk before (server/recovery_check.h).
    RecoveredState recovered{o_.job,       shard_,         state_dir_, store_->replayed_logs(),
                             std::nullopt, engine->Keys(), records,    o_.accept_data_loss};
    if (shard_ < job.servers_size() && job.servers(shard_).has_durable_version()) {
      recovered.reported = job.servers(shard_).durable_version();
    }
    HERD_RETURN_IF_ERROR(CheckNotBehind(recovered));
    // A resumed job's shard starts from the checkpoint (re-mapped to this shard map); a shard
    // restarted later in that job has its own state and keeps it.
    if (records.empty() && !plan.resume_from().empty()) {
      HERD_ASSIGN_OR_RETURN(auto reader,
                            checkpoint::OpenCheckpoint(checkpoint::PosixEnv(), plan.resume_from()));
      HERD_RETURN_IF_ERROR(engine->ImportState(*reader));
      HERD_RETURN_IF_ERROR(engine->WriteAll().status());
      Log().info("server: shard {} imported its keys from {}", shard_, plan.resume_from());
    }
    durability_ = config.durability;
    engine_ = std::move(engine);
    engine_ptr_.store(engine_.get());
    listener_->SetEngine(engine_.get());
    Log().info("server: shard {} of job '{}' ({}, {}): {} keys, {} recovered from {}", shard_,
               o_.job, ModeName(config.mode), DurabilityName(config.durability),
               engine_->Keys().size(), records.size(), state_dir_);
    return absl::OkStatus();
  }

  // A clean stop keeps everything: the policies that write less write it all now.
  void FinalWrite() {
    if (engine_ == nullptr || durability_.kind == Durability::Kind::kEveryRound) return;
    auto n = engine_->WriteAll();
    if (!n.ok()) Log().error("server: final write failed: {}", n.status().ToString());
  }

  absl::Status EndedBeforeStart(const herd::v1::JobStatus& job) {
    absl::Status outcome = scheduler::JobEndedStatus(job);
    if (outcome.ok()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "job '%s' has already completed; there is nothing left for this shard to serve", o_.job));
    }
    return outcome;
  }

  // Without --job: the one job that has not ended and has a shard slot that is free, dead,
  // or held by this shard's name (a restart). Waits for one to appear until `deadline`.
  absl::StatusOr<std::string> ChooseJobWaiting(Deadline deadline) {
    for (;;) {
      auto chosen = ChooseJob();
      if (chosen.ok() || !absl::IsNotFound(chosen.status()) || deadline.expired()) return chosen;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }

  absl::StatusOr<std::string> ChooseJob() {
    HERD_ASSIGN_OR_RETURN(herd::v1::ListJobsResponse jobs, sched_->ListJobs());
    std::vector<std::string> open;
    for (const auto& j : jobs.jobs()) {
      if (scheduler::IsTerminal(j.state()) || j.spec().servers() == 0) continue;
      bool slot = false;
      for (const auto& m : j.servers())
        slot |= m.name().empty() || !m.alive() || m.name() == o_.name;
      if (slot) open.push_back(j.spec().name());
    }
    if (open.size() == 1) return open[0];
    if (open.empty()) {
      return absl::NotFoundError(absl::StrFormat(
          "no job on the scheduler at %s waits for a parameter-server shard: submit one with "
          "servers > 0, or name the job with --job",
          o_.scheduler.address));
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "several jobs on the scheduler wait for parameter-server shards (%s): name one with --job",
        absl::StrJoin(open, ", ")));
  }

  // Every worker can hold a push and a pull call on a shard at once, each on a serving thread;
  // with fewer threads a round's calls would wait on each other until their deadlines.
  absl::Status CheckThreads(const herd::v1::JobSpec& spec) const {
    const int needed = 2 * spec.workers() + 1;
    const int threads = o_.service.threads;
    if (threads == 0 || threads >= needed) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrFormat(
        "--threads %d is too few for job '%s' with %d workers: each worker may hold two calls "
        "on this shard at once; use at least %d, or 0 for gRPC's default",
        threads, spec.name(), spec.workers(), needed));
  }

  absl::StatusOr<herd::v1::RegisterNodeResponse> Register() {
    std::string address = o_.advertise;
    if (address.empty()) {
      const std::string& listen = o_.service.listen;
      const std::string host = listen.substr(0, listen.rfind(':'));
      address = (host.empty() || host == "0.0.0.0" || host == "[::]" ? HostName() : host) + ":" +
                std::to_string(listener_->port());
    }
    herd::v1::RegisterNodeRequest req;
    req.set_job(o_.job);
    req.set_role(herd::v1::ROLE_SERVER);
    req.set_name(o_.name);
    req.set_address(address);
    req.set_host(HostName());
    if (o_.shard >= 0) req.set_requested_rank(o_.shard);
    const Deadline deadline = Deadline::After(o_.register_timeout);
    for (;;) {
      auto resp = sched_->RegisterNode(req);
      if (resp.ok()) {
        Log().info("server: registered as shard {} of job '{}' at {}", resp->rank(), o_.job,
                   address);
        return resp;
      }
      // A restarted shard: its previous instance is still alive to the scheduler until the
      // heartbeat timeout; a scheduler that is restarting is UNAVAILABLE for a moment.
      const bool wait = absl::IsAlreadyExists(resp.status()) || absl::IsUnavailable(resp.status());
      if (!wait || deadline.expired()) return resp.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  // The job's state, waiting out a scheduler that is restarting (UNAVAILABLE: the view that
  // started the engine may arrive just before the scheduler goes away) for at most
  // --register-timeout; any other answer (a refusal, DATA_LOSS) at once.
  absl::StatusOr<herd::v1::JobStatus> ReadJobThroughARestart() {
    return RetryWhileUnavailable([&] { return sched_->GetJob(o_.job); },
                                 Deadline::After(o_.register_timeout));
  }

  absl::Status WritePortFile() const {
    if (o_.port_file.empty()) return absl::OkStatus();
    const std::string tmp = o_.port_file + ".tmp";
    std::ofstream(tmp) << listener_->port() << "\n";
    std::error_code ec;
    std::filesystem::rename(tmp, o_.port_file, ec);
    if (ec) return absl::InternalError("cannot write --port-file " + o_.port_file);
    return absl::OkStatus();
  }

  ShardOptions o_;
  std::string state_dir_;
  std::unique_ptr<ShardStore> store_;
  std::unique_ptr<ShardServer> listener_;
  std::unique_ptr<scheduler::SchedulerClient> sched_;
  std::unique_ptr<scheduler::Follower> follower_;
  herd::v1::JobSpec spec_;  // the job's, with the model's layout once it is known
  int shard_ = -1;
  // Touched by the watcher thread only, until it is joined.
  std::unique_ptr<Engine> engine_;
  std::atomic<Engine*> engine_ptr_{nullptr};  // engine_, for the checkpoint thread
  std::unique_ptr<ShardCheckpoints> checkpoints_;
  bool checkpoints_job_ = false;  // the job has a checkpoint directory (SIGTERM preempts)
  Durability durability_;
  bool standing_by_ = false;
  bool port_written_ = false;
  std::atomic<bool> watching_{false};
  std::thread watcher_;
  std::mutex mu_;
  std::optional<absl::Status> outcome_;  // set when the job ended (or the engine failed)
};

}  // namespace

absl::Status RunShard(ShardOptions options) {
  class ShardProcess process(std::move(options));  // the class, not server::ShardProcess()
  return process.Run();
}

}  // namespace herd::server
