// `herd scheduler`: runs the coordinator (gRPC herd.v1.Scheduler, docs/scheduler.md) until
// SIGINT or SIGTERM.

#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/time/time.h"
#include "cli/command.h"
#include "common/logging.h"
#include "metrics/endpoint.h"
#include "proto/rpc/grpc_support.h"
#include "scheduler/job_spec.h"
#include "scheduler/scheduler_core.h"
#include "scheduler/service.h"

namespace herd::cli {
namespace {

class SchedulerCommand : public Command {
 public:
  void Configure(CLI::App& app) override {
    app.add_option("--listen", server_.listen, "host:port to serve on (port 0: pick a free one)")
        ->capture_default_str();
    app.add_option("--state", state_dir_,
                   "Directory of the RocksDB state (jobs, membership, epochs); a restarted "
                   "scheduler on the same directory resumes them")
        ->required();
    app.add_option("--heartbeat-timeout", heartbeat_timeout_,
                   "A node silent for this long is declared dead (e.g. 10s, 500ms)")
        ->capture_default_str();
    app.add_option("--horizon-ahead", horizon_ahead_,
                   "How far ahead of a job's progress its plans are held, in time at the job's "
                   "iteration rate (docs/scheduler.md, \"Horizon\"): a mode switch or a "
                   "checkpoint takes effect at most this much later; workers run on this long "
                   "while the scheduler is away")
        ->capture_default_str();
    app.add_option("--tls-cert", server_.tls_cert_file, "PEM certificate: serve with TLS");
    app.add_option("--tls-key", server_.tls_key_file, "PEM private key of --tls-cert");
    app.add_option("--token-file", token_file_,
                   "File holding the bearer token every call must carry");
    app.add_option("--metrics-listen", metrics_listen_,
                   "Serve Prometheus metrics at http://HOST:PORT/metrics (port 0: a free one; "
                   "default: none)")
        ->envname("HERD_METRICS_LISTEN");
    app.add_option("--port-file", port_file_,
                   "Write the bound port to this file once serving (for scripts and tests)");
    app.add_option("--max-shard-state-bytes", max_shard_state_bytes_,
                   "Refuse a job (or a switch to a ps_* mode) whose shard map gives one shard "
                   "more state than this (bytes; suffixes KiB, MiB, GiB, TiB)")
        ->transform(CLI::AsSizeValue(false))
        ->capture_default_str();
    app.add_flag("--accept-data-loss", accept_data_loss_,
                 "Open a --state whose write-ahead log is damaged at its last consistent point "
                 "(acknowledged changes after the damage are lost) instead of refusing it, and "
                 "serve a state that a job's process proves went back in time instead of "
                 "refusing it");
  }

  int Validate() override {
    if (!absl::ParseDuration(heartbeat_timeout_, &heartbeat_timeout_parsed_) ||
        heartbeat_timeout_parsed_ < absl::Milliseconds(1)) {
      std::fprintf(stderr,
                   "herd scheduler: --heartbeat-timeout '%s' is not a duration >= 1ms "
                   "(write e.g. 10s or 500ms)\n",
                   heartbeat_timeout_.c_str());
      return kExitUsage;
    }
    if (!absl::ParseDuration(horizon_ahead_, &horizon_ahead_parsed_) ||
        horizon_ahead_parsed_ < absl::Milliseconds(1) || horizon_ahead_parsed_ > absl::Hours(1)) {
      std::fprintf(stderr,
                   "herd scheduler: --horizon-ahead '%s' is not a duration in 1ms..1h (write e.g. "
                   "1s or 500ms)\n",
                   horizon_ahead_.c_str());
      return kExitUsage;
    }
    if (server_.tls_cert_file.empty() != server_.tls_key_file.empty()) {
      std::fprintf(stderr,
                   "herd scheduler: TLS needs both --tls-cert and --tls-key (PEM files); give both "
                   "or neither\n");
      return kExitUsage;
    }
    return kExitOk;
  }

  int Run() override {
    scheduler::SetMaxShardStateBytes(static_cast<int64_t>(max_shard_state_bytes_));
    if (!token_file_.empty()) {
      auto token = rpc::ReadTokenFile(token_file_);
      if (!token.ok()) return Fail(token.status());
      server_.token = *token;
    }
    // Block the stop signals before any thread starts, so every thread inherits the mask and
    // sigwait below is the only receiver.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);

    if (!metrics_listen_.empty()) {
      auto endpoint = metrics::StartProcessEndpoint(metrics_listen_, metrics::Role::kScheduler);
      if (!endpoint.ok()) return Fail(endpoint.status());
      Log().info("scheduler: metrics at {}", (*endpoint)->url());
    }
    scheduler::SchedulerOptions options;
    options.state_dir = state_dir_;
    options.heartbeat_timeout = absl::ToChronoMilliseconds(heartbeat_timeout_parsed_);
    options.horizon_ahead = absl::ToChronoMilliseconds(horizon_ahead_parsed_);
    options.accept_data_loss = accept_data_loss_;
    auto core = scheduler::SchedulerCore::Open(std::move(options));
    if (!core.ok()) return Fail(core.status());
    auto server = scheduler::SchedulerServer::Start(core->get(), server_);
    if (!server.ok()) return Fail(server.status());
    if (!port_file_.empty()) {
      // Written whole under a temporary name, then renamed: a reader never sees half a port.
      const std::string tmp = port_file_ + ".tmp";
      std::ofstream(tmp) << (*server)->port() << "\n";
      std::error_code ec;
      std::filesystem::rename(tmp, port_file_, ec);
      if (ec) {
        return Fail(
            absl::InternalError("cannot write --port-file " + port_file_ + ": " + ec.message()));
      }
    }
    int sig = 0;
    sigwait(&stop, &sig);
    Log().info("scheduler: signal {}, shutting down", sig);
    (*server)->Shutdown();
    return kExitOk;
  }

 private:
  static int Fail(const absl::Status& st) {
    std::fprintf(stderr, "herd scheduler: %s\n", std::string(st.message()).c_str());
    return kExitFailure;
  }

  scheduler::ServerOptions server_;
  std::string state_dir_;
  bool accept_data_loss_ = false;
  uint64_t max_shard_state_bytes_ = scheduler::kDefaultMaxShardStateBytes;
  std::string heartbeat_timeout_ = "10s";
  absl::Duration heartbeat_timeout_parsed_;
  std::string horizon_ahead_ = "1s";
  absl::Duration horizon_ahead_parsed_;
  std::string token_file_;
  std::string port_file_;
  std::string metrics_listen_;
};

HERD_REGISTER_COMMAND(SchedulerCommand, "scheduler", 10,
                      "Run the scheduler: registers processes, holds jobs, plans iterations");

}  // namespace
}  // namespace herd::cli
