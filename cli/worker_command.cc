// `herd worker --scheduler ADDR --job NAME`: one training process of a job (worker/runtime.h).
// It trains the model the job names on its shard of Fashion-MNIST and exits 0 when the job
// completed; otherwise with a message saying what went wrong: 1 for its own error (which fails
// the job for every other process), 3 for the job's (cancelled, or failed elsewhere), 2 for
// bad flags or environment (cli/command.h). Every flag has an
// environment twin (HERD_SCHEDULER, HERD_JOB, ...) so pods configure themselves.

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "absl/strings/str_format.h"
#include "cli/command.h"
#include "cli/torch_commands.h"
#include "common/defaults.h"
#include "common/logging.h"
#include "proto/rpc/grpc_support.h"
#include "scheduler/client/job_wait.h"
#include "worker/data/idx_dataset.h"
#include "worker/runtime.h"
#include "worker/torch/torch_trainable.h"

namespace herd::cli {
namespace {

std::atomic<bool> g_sigterm{false};      // set by the SIGTERM handler, read by the session
std::atomic<bool> g_preemptible{false};  // set by the session: SIGTERM is a preemption

class WorkerCommand final : public Command {
 public:
  void Configure(CLI::App& app) override {
    auto& s = options_.session;
    app.add_option("--scheduler", s.scheduler.address, "host:port of the scheduler")
        ->envname("HERD_SCHEDULER")
        ->required();
    app.add_option("--job", s.job, "The job to join")->envname("HERD_JOB")->required();
    app.add_option("--name", s.name,
                   "Stable identity with the scheduler; a restarted process with the same name "
                   "takes its slot back (default: HOST-PID)")
        ->envname("HERD_NAME");
    app.add_option("--rank", rank_, "Ask for this rank (default: the lowest free one)")
        ->envname("HERD_RANK")
        ->check(CLI::Range(0, 65535));
    app.add_option("--wait-for-job", wait_for_job_,
                   "How long to wait for the job to be submitted (300, 90s, 5m)")
        ->envname("HERD_WAIT_FOR_JOB")
        ->capture_default_str();
    app.add_option("--transport", transport_,
                   "Backend of the collectives: ucx (host memory) or nccl (GPU memory)")
        ->envname("HERD_TRANSPORT")
        ->capture_default_str();
    app.add_option("--data-dir", data_dir_, "Directory of the Fashion-MNIST IDX files")
        ->envname("HERD_DATA_DIR")
        ->capture_default_str();
    app.add_option("--threads", threads_,
                   "torch threads of this process (0: the cores divided by the job's workers)")
        ->envname("HERD_THREADS")
        ->check(CLI::Range(0, 256));
    app.add_option("--timeline", s.timeline_dir,
                   "Write a Chrome-trace timeline to DIR/worker-RANK.json")
        ->envname("HERD_TIMELINE");
    app.add_option("--metrics-listen", s.metrics_listen,
                   "Serve Prometheus metrics at http://HOST:PORT/metrics (port 0: a free one; "
                   "default: none)")
        ->envname("HERD_METRICS_LISTEN");
    app.add_option("--result-file", options_.result_file,
                   "Write this worker's result (JSON) to this file");
    app.add_option("--timeout", timeout_s_, "Seconds any communication may wait")
        ->envname("HERD_TIMEOUT")
        ->check(CLI::Range(1, 86400));
    app.add_option("--start-timeout", start_timeout_s_,
                   "Seconds to wait for the job's other processes to register")
        ->envname("HERD_START_TIMEOUT")
        ->check(CLI::Range(1, 86400));
    app.add_option("--fusion-threshold", fusion_kib_,
                   "Fusion bucket bound in KiB (allreduce, lp, dear)")
        ->check(CLI::Range(0, 1 << 20));
    app.add_flag("--tune-fusion", s.fusion.tune,
                 "dear: tune the fusion threshold online (Bayesian optimisation)");
    app.add_option("--tune-trials", s.fusion.tune_trials, "Trials of the fusion tuner")
        ->check(CLI::Range(1, 1000));
    app.add_option("--loss-file", options_.loss_file,
                   "Append 'ITERATION LOSS' of every iteration to this file");
    app.add_option("--preempt-grace", preempt_grace_,
                   "SIGTERM: the job checkpoints and stops; how long that may take before the "
                   "worker gives up (60s)")
        ->envname("HERD_PREEMPT_GRACE")
        ->capture_default_str();
    app.add_option("--token-file", token_file_, "Bearer token for the scheduler and shards")
        ->envname("HERD_TOKEN_FILE");
    app.add_flag("--scheduler-tls", s.scheduler.tls, "Connect to the scheduler with TLS")
        ->envname("HERD_SCHEDULER_TLS");
    app.add_option("--scheduler-ca", s.scheduler.tls_ca_file,
                   "PEM roots of the scheduler's certificate")
        ->envname("HERD_SCHEDULER_CA");
    app.add_flag("--server-tls", s.server_tls,
                 "Connect to the parameter-server shards with TLS (ps_* modes)")
        ->envname("HERD_SERVER_TLS");
    app.add_option("--server-ca", s.server_tls_ca_file,
                   "PEM roots of the shards' certificates (implies --server-tls)")
        ->envname("HERD_SERVER_CA");
  }

  int Validate() override {
    auto& s = options_.session;
    if (rank_ >= 0) s.rank = rank_;
    s.timeout = std::chrono::seconds(timeout_s_);
    s.start_timeout = std::chrono::seconds(start_timeout_s_);
    s.fusion.threshold_bytes = static_cast<size_t>(fusion_kib_) << 10;
    auto wait = scheduler::ParseDurationFlag(wait_for_job_);
    if (!wait.ok()) return Usage(wait.status());
    s.wait_for_job = *wait;
    auto grace = scheduler::ParseDurationFlag(preempt_grace_);
    if (!grace.ok()) return Usage(grace.status());
    s.preempt_grace = *grace;
    auto backend = transport::ParseBackend(transport_);
    if (!backend.ok()) return Usage(backend.status());
    s.transport = *backend;
    return kExitOk;
  }

  int Run() override {
    auto& s = options_.session;
    // SIGTERM is a preemption: the session asks for a last checkpoint and stops at it.
    struct sigaction sa = {};
    // Until the session says a checkpoint can be taken (or at a second SIGTERM) the signal
    // stops the process as it always did.
    sa.sa_handler = [](int sig) {
      if (!g_preemptible.load() || g_sigterm.exchange(true)) {
        signal(sig, SIG_DFL);
        raise(sig);
      }
    };
    sigaction(SIGTERM, &sa, nullptr);
    s.stop_requested = &g_sigterm;
    s.preemptible = &g_preemptible;
    if (!token_file_.empty()) {
      auto token = rpc::ReadTokenFile(token_file_);
      if (!token.ok()) return Fail(token.status());
      s.scheduler.token = *token;
    }
    if (!s.server_tls_ca_file.empty()) s.server_tls = true;
    if (!s.scheduler.tls_ca_file.empty()) s.scheduler.tls = true;
    auto factory = [this](const worker::TrainableRequest& req)
        -> absl::StatusOr<std::unique_ptr<worker::Trainable>> {
      auto train = worker::LoadIdxDataset(data_dir_, "train");
      if (!train.ok()) return train.status();
      auto test = worker::LoadIdxDataset(data_dir_, "t10k");
      if (!test.ok()) return test.status();
      const int64_t limit = req.spec.training().train_samples();
      if (limit > 0 && limit < train->count) {
        const size_t per = static_cast<size_t>(train->rows) * train->cols;
        train->count = limit;
        train->images.resize(static_cast<size_t>(limit) * per);
        train->labels.resize(static_cast<size_t>(limit));
      }
      worker::TorchTrainableOptions o;
      o.model = req.spec.training().model();
      o.seed = req.spec.seed();
      o.rank = req.rank;
      o.world_size = req.world_size;
      o.batch_size = req.spec.training().batch_size();
      const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      o.threads = threads_ > 0 ? threads_ : std::max(1, cores / std::max(1, req.world_size));
      o.train = std::move(*train);
      o.test = std::move(*test);
      return worker::MakeTorchTrainable(std::move(o));
    };
    auto result = worker::RunWorker(options_, factory);
    if (!result.ok()) return Fail(result.status());
    if (auto at = result->metrics().find("preempted_at_iteration"); at != result->metrics().end()) {
      Log().info("worker: preempted: the job stopped at its checkpoint before iteration {}",
                 static_cast<int64_t>(at->second));
      return kExitOk;
    }
    Log().info("worker: done: {} iterations, final loss {:.4f}", result->iterations(),
               result->final_loss());
    return kExitOk;
  }

 private:
  int Fail(const absl::Status& st) {
    std::fprintf(stderr, "herd worker: %s\n", st.ToString().c_str());
    return scheduler::IsJobEnded(st) ? kExitJobEnded : kExitFailure;
  }
  int Usage(const absl::Status& st) {
    std::fprintf(stderr, "herd worker: %s\n", st.ToString().c_str());
    return kExitUsage;
  }

  worker::WorkerOptions options_;
  int rank_ = -1;
  std::string data_dir_ = worker::kFashionMnistDir;
  std::string wait_for_job_ = defaults::FlagText(defaults::kWaitForJob);
  std::string transport_ = "ucx";
  int threads_ = 0;
  int timeout_s_ = static_cast<int>(defaults::kOperationTimeout.count());
  int start_timeout_s_ = static_cast<int>(defaults::kStartTimeout.count());
  int fusion_kib_ = 4096;
  std::string token_file_;
  std::string preempt_grace_ = defaults::FlagText(defaults::kPreemptionGrace);
};

HERD_REGISTER_COMMAND(WorkerCommand, kWorkerCommand.name, kWorkerCommand.order,
                      kWorkerCommand.description);

}  // namespace
}  // namespace herd::cli
