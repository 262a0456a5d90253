// `herd server`: one parameter-server shard (docs/parameter_server.md). Starts listening,
// registers with the scheduler for --job, learns its shard id, the job and the shard map from
// the plan, recovers its keys from --state, then serves until SIGINT or SIGTERM while it
// heartbeats and follows the plan (live workers bound ps_async's staleness).

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/command.h"
#include "common/logging.h"
#include "herd/v1/scheduler.pb.h"
#include "proto/rpc/grpc_support.h"
#include "scheduler/client/heartbeat_loop.h"
#include "scheduler/client/scheduler_client.h"
#include "scheduler/service.h"
#include "server/engine.h"
#include "server/service.h"
#include "server/shard_config.h"
#include "server/state/shard_store.h"

namespace herd::cli {
namespace {

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

class ServerCommand : public Command {
 public:
  void Configure(CLI::App& app) override {
    app.add_option("--scheduler", scheduler_.address, "host:port of the scheduler")->required();
    app.add_option("--job", job_,
                   "The job whose keys this shard serves (default: the only job on the scheduler "
                   "with a free shard slot)");
    app.add_option("--state", state_dir_,
                   "Directory of the shard's RocksDB state; a shard restarted on the same "
                   "directory recovers what it acknowledged")
        ->required();
    app.add_option("--durability", durability_,
                   "When state is written: every-round (before a round is acknowledged), "
                   "every-k:K (every K rounds of a key) or checkpoint-only (Checkpoint calls "
                   "and clean shutdown)")
        ->capture_default_str();
    app.add_option("--listen", service_.listen, "host:port to serve on (port 0: pick a free one)")
        ->capture_default_str();
    app.add_option("--advertise", advertise_,
                   "host:port the workers should dial (default: the --listen host and the bound "
                   "port)");
    app.add_option("--name", name_,
                   "Stable identity with the scheduler (default: server-HOST:STATE-DIR, so a "
                   "restart on the same directory retakes its shard id)");
    app.add_option("--shard", shard_, "Ask for this shard id (default: the scheduler's choice)");
    app.add_option("--threads", service_.threads,
                   "Most threads serving calls at once (0: gRPC's default); at least twice the "
                   "job's workers plus one")
        ->check(CLI::Range(0, 4096));
    app.add_option("--tls-cert", service_.tls_cert_file, "PEM certificate: serve with TLS");
    app.add_option("--tls-key", service_.tls_key_file, "PEM private key of --tls-cert");
    app.add_option("--token-file", token_file_,
                   "File holding the bearer token: required of every call to this shard and "
                   "sent to the scheduler");
    app.add_flag("--scheduler-tls", scheduler_.tls, "Connect to the scheduler with TLS");
    app.add_option("--scheduler-ca", scheduler_.tls_ca_file,
                   "PEM roots that sign the scheduler's certificate");
    app.add_option("--port-file", port_file_,
                   "Write the bound port to this file once serving (for scripts and tests)");
    app.add_option("--register-timeout", register_timeout_s_,
                   "Seconds to keep trying to register (a restarted shard waits for the "
                   "scheduler to declare its previous instance dead)")
        ->capture_default_str();
  }

  int Run() override {
    auto durability = server::ParseDurability(durability_);
    if (!durability.ok()) {
      std::fprintf(stderr, "herd server: %s\n", std::string(durability.status().message()).c_str());
      return kExitUsage;
    }
    if (!token_file_.empty()) {
      auto token = rpc::ReadTokenFile(token_file_);
      if (!token.ok()) return Fail(token.status());
      service_.token = *token;
      scheduler_.token = *token;
    }
    std::error_code ec;
    const auto state = std::filesystem::absolute(state_dir_, ec).lexically_normal().string();
    if (name_.empty()) name_ = "server-" + HostName() + ":" + state;

    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);

    // The state first: a second shard on the same directory stops here, before registering.
    auto store = server::ShardStore::Open(state);
    if (!store.ok()) return Fail(store.status());
    auto listener = server::ShardServer::Start(service_);
    if (!listener.ok()) return Fail(listener.status());
    auto sched = scheduler::SchedulerClient::Connect(scheduler_);
    if (!sched.ok()) return Fail(sched.status());

    if (job_.empty()) {
      auto chosen = ChooseJob(**sched);
      if (!chosen.ok()) return Fail(chosen.status());
      job_ = *chosen;
    }
    // The job is checked before registering, so a refused start leaves no trace with the
    // scheduler.
    auto job = (*sched)->GetJob(job_);
    if (!job.ok()) return Fail(job.status());
    if (auto st = CheckThreads(job->spec()); !st.ok()) return Fail(st);
    auto reg = Register(**sched, (*listener)->port());
    if (!reg.ok()) return Fail(reg.status());
    const int shard = reg->rank();
    auto plan = CurrentPlan(**sched);
    if (!plan.ok()) return Fail(plan.status());
    // A job that runs a collective mode now and switches to a server mode later (its schedule
    // says so) gets shards that serve that server mode.
    if (plan->mode().mode().rfind("ps_", 0) != 0) {
      for (const auto& sw : job->schedule()) {
        if (sw.mode().mode().rfind("ps_", 0) == 0) {
          *plan->mutable_mode() = sw.mode();
          break;
        }
      }
    }
    auto config = server::ShardConfigFromJob(job->spec(), *plan, shard, *durability);
    if (!config.ok()) return Fail(config.status());
    auto engine = server::Engine::Create(*config, store->get());
    auto records = (*store)->Load(job_);
    if (!records.ok()) return Fail(records.status());
    for (const auto& r : *records) {
      if (auto st = engine->Restore(r); !st.ok()) return Fail(st);
    }
    if (plan->ranks_size() > 0) {
      engine->SetLiveWorkers({plan->ranks().begin(), plan->ranks().end()});
    }
    (*listener)->SetEngine(engine.get());
    Log().info("server: shard {} of job '{}' ({}, {}): {} keys, {} recovered from {}", shard, job_,
               server::ModeName(config->mode), server::DurabilityName(config->durability),
               engine->Keys().size(), records->size(), state);
    if (!port_file_.empty()) {
      const std::string tmp = port_file_ + ".tmp";
      std::ofstream(tmp) << (*listener)->port() << "\n";
      std::filesystem::rename(tmp, port_file_, ec);
      if (ec) {
        (*listener)->Shutdown();  // before `engine` goes: serving threads may be using it
        return Fail(absl::InternalError("cannot write --port-file " + port_file_));
      }
    }

    std::atomic<bool> stopping{false};
    auto heartbeats = std::make_unique<scheduler::HeartbeatLoop>(**sched, job_, *reg, "server");
    std::thread watcher([&] { Watch(**sched, *engine, stopping); });
    int sig = 0;
    sigwait(&stop, &sig);
    Log().info("server: signal {}, shutting down", sig);
    stopping.store(true);
    // Serving stops first, so no push is acknowledged after the final write.
    (*listener)->Shutdown();
    // A clean stop keeps everything: the policies that write less write it all now.
    if (config->durability.kind != server::Durability::Kind::kEveryRound) {
      auto n = engine->WriteAll();
      if (!n.ok()) Log().error("server: final checkpoint failed: {}", n.status().ToString());
    }
    heartbeats.reset();
    watcher.join();
    return kExitOk;
  }

 private:
  // Without --job: the one job that is not cancelled and has a shard slot that is free, dead,
  // or held by this shard's name (a restart).
  absl::StatusOr<std::string> ChooseJob(scheduler::SchedulerClient& sched) {
    auto jobs = sched.ListJobs();
    if (!jobs.ok()) return jobs.status();
    std::vector<std::string> open;
    for (const auto& j : jobs->jobs()) {
      if (j.state() == herd::v1::JOB_CANCELLED || j.spec().servers() == 0) continue;
      bool slot = false;
      for (const auto& m : j.servers()) slot |= m.name().empty() || !m.alive() || m.name() == name_;
      if (slot || j.servers_size() < j.spec().servers()) open.push_back(j.spec().name());
    }
    if (open.size() == 1) return open[0];
    if (open.empty()) {
      return absl::NotFoundError(absl::StrFormat(
          "no job on the scheduler at %s waits for a parameter-server shard: submit one with "
          "servers > 0, or name the job with --job",
          scheduler_.address));
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "several jobs on the scheduler wait for parameter-server shards (%s): name one with --job",
        absl::StrJoin(open, ", ")));
  }

  // Every worker can hold a push and a pull call on a shard at once, each on a serving thread;
  // with fewer threads a round's calls would wait on each other until their deadlines.
  absl::Status CheckThreads(const herd::v1::JobSpec& spec) const {
    const int needed = 2 * spec.workers() + 1;
    if (service_.threads == 0 || service_.threads >= needed) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrFormat(
        "--threads %d is too few for job '%s' with %d workers: each worker may hold two calls "
        "on this shard at once; use at least %d, or 0 for gRPC's default",
        service_.threads, spec.name(), spec.workers(), needed));
  }

  absl::StatusOr<herd::v1::RegisterNodeResponse> Register(scheduler::SchedulerClient& sched,
                                                          int port) {
    std::string address = advertise_;
    if (address.empty()) {
      const std::string host = service_.listen.substr(0, service_.listen.rfind(':'));
      address = (host.empty() || host == "0.0.0.0" || host == "[::]" ? HostName() : host) + ":" +
                std::to_string(port);
    }
    herd::v1::RegisterNodeRequest req;
    req.set_job(job_);
    req.set_role(herd::v1::ROLE_SERVER);
    req.set_name(name_);
    req.set_address(address);
    req.set_host(HostName());
    if (shard_ >= 0) req.set_requested_rank(shard_);
    const Deadline deadline = Deadline::After(std::chrono::seconds(register_timeout_s_));
    for (;;) {
      auto resp = sched.RegisterNode(req);
      if (resp.ok()) {
        Log().info("server: registered as shard {} of job '{}' at {}", resp->rank(), job_, address);
        return resp;
      }
      // A restarted shard: its previous instance is still alive to the scheduler until the
      // heartbeat timeout; a scheduler that is restarting is UNAVAILABLE for a moment.
      const bool wait = absl::IsAlreadyExists(resp.status()) || absl::IsUnavailable(resp.status());
      if (!wait || deadline.expired()) return resp.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  absl::StatusOr<herd::v1::Plan> CurrentPlan(scheduler::SchedulerClient& sched) {
    absl::StatusOr<herd::v1::Plan> got = absl::UnavailableError("the scheduler sent no plan");
    herd::v1::WatchPlanRequest req;
    req.set_job(job_);
    auto st = sched.WatchPlan(req, Deadline::After(std::chrono::seconds(10)),
                              [&](const herd::v1::Plan& plan) {
                                got = plan;
                                return false;
                              });
    if (!st.ok()) return st;
    return got;
  }

  // Follows the plan so that workers the scheduler declared dead leave ps_async's bound.
  void Watch(scheduler::SchedulerClient& sched, server::Engine& engine,
             std::atomic<bool>& stopping) {
    uint64_t seen = 0;
    while (!stopping.load()) {
      herd::v1::WatchPlanRequest req;
      req.set_job(job_);
      req.set_after_epoch(seen);
      auto st = sched.WatchPlan(
          req, Deadline::After(std::chrono::milliseconds(500)), [&](const herd::v1::Plan& plan) {
            seen = plan.epoch();
            if (plan.ranks_size() > 0) {
              engine.SetLiveWorkers({plan.ranks().begin(), plan.ranks().end()});
            }
            return !stopping.load();
          });
      if (!st.ok() && !stopping.load()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  static int Fail(const absl::Status& st) {
    std::fprintf(stderr, "herd server: %s\n", std::string(st.message()).c_str());
    return kExitFailure;
  }

  scheduler::ClientOptions scheduler_;
  server::ServiceOptions service_;
  std::string job_;
  std::string state_dir_;
  std::string durability_ = "every-round";
  std::string advertise_;
  std::string name_;
  int shard_ = -1;
  std::string token_file_;
  std::string port_file_;
  int register_timeout_s_ = 60;
};

HERD_REGISTER_COMMAND(ServerCommand, "server", 15,
                      "Run one parameter-server shard of a job (ps_sync, ps_async, ps_ec)");

}  // namespace
}  // namespace herd::cli
