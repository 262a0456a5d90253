// `herd server`: one parameter-server shard (server/runtime.h, docs/parameter_server.md).
// Parses flags (each with an environment twin: HERD_SCHEDULER, HERD_JOB, HERD_STATE, ...) and
// runs the shard until its job ends (exit 0 when it completed) or SIGINT/SIGTERM (exit 0).

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "cli/command.h"
#include "common/defaults.h"
#include "common/logging.h"
#include "metrics/endpoint.h"
#include "proto/rpc/grpc_support.h"
#include "scheduler/client/job_wait.h"
#include "server/runtime.h"
#include "server/shard_memory.h"
#include "server/shard_name.h"

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
    auto& s = options_.scheduler;
    app.add_option("--scheduler", s.address, "host:port of the scheduler")
        ->envname("HERD_SCHEDULER")
        ->required();
    app.add_option("--job", options_.job,
                   "The job whose keys this shard serves (default: the only job on the scheduler "
                   "with a free shard slot)")
        ->envname("HERD_JOB");
    app.add_option("--state", options_.state_dir,
                   "Directory of the shard's RocksDB state; a shard restarted on the same "
                   "directory recovers what it acknowledged")
        ->envname("HERD_STATE")
        ->required();
    app.add_flag("--accept-data-loss", options_.accept_data_loss,
                 "Open a --state whose write-ahead log is damaged at its last consistent point "
                 "(acknowledged rounds after the damage are lost) instead of refusing it");
    app.add_option("--durability", durability_,
                   "When state is written: every-round (before a round is acknowledged), "
                   "every-k:K (every K rounds of a key) or checkpoint-only (Checkpoint calls "
                   "and clean shutdown)")
        ->envname("HERD_DURABILITY")
        ->capture_default_str();
    app.add_option("--listen", options_.service.listen,
                   "host:port to serve on (port 0: pick a free one)")
        ->envname("HERD_LISTEN")
        ->capture_default_str();
    app.add_option("--advertise", options_.advertise,
                   "host:port the workers should dial (default: the --listen host and the bound "
                   "port)")
        ->envname("HERD_ADVERTISE");
    app.add_option("--name", options_.name,
                   "Stable identity with the scheduler (default: server-HOST:STATE-DIR, so a "
                   "restart on the same directory retakes its shard id)")
        ->envname("HERD_NAME");
    app.add_option("--shard", options_.shard,
                   "Ask for this shard id (default: the scheduler's choice)")
        ->envname("HERD_SHARD");
    app.add_option("--threads", options_.service.threads,
                   "Most threads serving calls at once (0: gRPC's default); at least twice the "
                   "job's workers plus one")
        ->envname("HERD_THREADS")
        ->check(CLI::Range(0, 4096));
    app.add_option("--tls-cert", options_.service.tls_cert_file, "PEM certificate: serve with TLS")
        ->envname("HERD_TLS_CERT");
    app.add_option("--tls-key", options_.service.tls_key_file, "PEM private key of --tls-cert")
        ->envname("HERD_TLS_KEY");
    app.add_option("--token-file", token_file_,
                   "File holding the bearer token: required of every call to this shard and "
                   "sent to the scheduler")
        ->envname("HERD_TOKEN_FILE");
    app.add_flag("--scheduler-tls", s.tls, "Connect to the scheduler with TLS")
        ->envname("HERD_SCHEDULER_TLS");
    app.add_option("--scheduler-ca", s.tls_ca_file,
                   "PEM roots that sign the scheduler's certificate")
        ->envname("HERD_SCHEDULER_CA");
    app.add_option("--metrics-listen", metrics_listen_,
                   "Serve Prometheus metrics at http://HOST:PORT/metrics (port 0: a free one; "
                   "default: none)")
        ->envname("HERD_METRICS_LISTEN");
    app.add_option("--port-file", options_.port_file,
                   "Write the bound port to this file once serving (for scripts and tests)");
    app.add_option("--stream-idle-timeout", stream_idle_s_,
                   "Seconds a client stream may stay silent while the shard waits for its next "
                   "message before the shard ends it (frees its thread)")
        ->check(CLI::Range(0.001, 3600.0))
        ->capture_default_str();
    app.add_option("--max-state-bytes", max_state_bytes_,
                   "Refuse a key range whose state needs more than this (bytes; suffixes KiB, "
                   "MiB, GiB, TiB; 0: what this process can have: the machine's memory, its "
                   "cgroup's limit and its address-space limit)")
        ->transform(CLI::AsSizeValue(false))
        ->capture_default_str();
    app.add_option("--register-timeout", register_timeout_s_,
                   "Seconds to keep trying to register (a restarted shard waits for the "
                   "scheduler to declare its previous instance dead)")
        ->capture_default_str();
    app.add_option("--wait-for-job", wait_for_job_,
                   "How long to wait for the job to be submitted (300, 90s, 5m)")
        ->envname("HERD_WAIT_FOR_JOB")
        ->capture_default_str();
    app.add_option("--preempt-grace", preempt_grace_,
                   "SIGTERM while the job runs: how long the job may take to checkpoint and "
                   "stop before this shard exits anyway (60s)")
        ->envname("HERD_PREEMPT_GRACE")
        ->capture_default_str();
  }

  int Validate() override {
    auto durability = server::ParseDurability(durability_);
    if (!durability.ok()) return Usage(durability.status());
    options_.durability = *durability;
    auto wait = scheduler::ParseDurationFlag(wait_for_job_);
    if (!wait.ok()) return Usage(wait.status());
    options_.wait_for_job = *wait;
    auto grace = scheduler::ParseDurationFlag(preempt_grace_);
    if (!grace.ok()) return Usage(grace.status());
    options_.preempt_grace = *grace;
    if (options_.service.tls_cert_file.empty() != options_.service.tls_key_file.empty()) {
      return Usage(absl::InvalidArgumentError(
          "TLS needs both --tls-cert and --tls-key (PEM files); give both or neither"));
    }
    options_.register_timeout = std::chrono::seconds(register_timeout_s_);
    options_.service.stream_idle_timeout =
        std::chrono::milliseconds(static_cast<int64_t>(stream_idle_s_ * 1000));
    return kExitOk;
  }

  int Run() override {
    if (!token_file_.empty()) {
      auto token = rpc::ReadTokenFile(token_file_);
      if (!token.ok()) return Fail(token.status());
      options_.service.token = *token;
      options_.scheduler.token = *token;
    }
    // Blocked in every thread (they inherit the mask): the runtime waits for them itself.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    // After the mask: the HTTP server's threads inherit it.
    if (!metrics_listen_.empty()) {
      auto endpoint = metrics::StartProcessEndpoint(metrics_listen_, metrics::Role::kShard);
      if (!endpoint.ok()) return Fail(endpoint.status());
      Log().info("server: metrics at {}", (*endpoint)->url());
    }
    server::SetMaxStateBytes(static_cast<int64_t>(max_state_bytes_));
    // Named here, so that a state path with a space or a long one still gives a valid name.
    if (options_.name.empty())
      options_.name = server::DefaultShardName(HostName(), options_.state_dir);
    const absl::Status st = server::RunShard(std::move(options_));
    return st.ok() ? kExitOk : Fail(st);
  }

 private:
  static int Fail(const absl::Status& st) {
    std::fprintf(stderr, "herd server: %s\n", std::string(st.message()).c_str());
    return scheduler::IsJobEnded(st) ? kExitJobEnded : kExitFailure;
  }
  static int Usage(const absl::Status& st) {
    std::fprintf(stderr, "herd server: %s\n", std::string(st.message()).c_str());
    return kExitUsage;
  }

  server::ShardOptions options_;
  std::string durability_ = "every-round";
  std::string token_file_;
  std::string metrics_listen_;
  std::string wait_for_job_ = defaults::FlagText(defaults::kWaitForJob);
  std::string preempt_grace_ = defaults::FlagText(defaults::kPreemptionGrace);
  int register_timeout_s_ = 60;
  double stream_idle_s_ = 30;
  uint64_t max_state_bytes_ = 0;
};

HERD_REGISTER_COMMAND(ServerCommand, "server", 15,
                      "Run one parameter-server shard of a job (it serves the ps_* modes and "
                      "stands by through collective ones)");

}  // namespace
}  // namespace herd::cli
