// `herd local`: a whole training job on this machine. Starts a scheduler, S parameter-server
// shards and W workers as child processes on loopback, submits the job (and its planned mode
// switches), shows a live progress line from the scheduler's view of the job, and ends with a
// summary whose last line is "test accuracy 0.xxx, N samples/s, T s".
//
// `herd local [options] -- CMD ARGS...` runs CMD as each worker instead of the built-in model:
// the user's own training program (a Python script over herd.torch), with HERD_SCHEDULER,
// HERD_JOB, HERD_NAME, HERD_RANK, HERD_THREADS (and the fusion and timeline settings) in its
// environment and the build tree's (or the installed) Python package on its PYTHONPATH. Its
// model declares the job's layout; its herd.finish(metrics) appear in the summary. The
// variables torch.distributed's env:// reads (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, as torchrun sets them) come with them, so any torch.distributed
// script runs under `herd local` (backend="herd" joins the job; a program that never joins it,
// e.g. over gloo, ends the job when every worker exited 0).
//
// Ctrl-C (or SIGTERM) stops every child. A child that fails stops the job: the message names it,
// says how it ended, and shows the end of its log (every child logs to STATE/logs/NAME.log).

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "cli/command.h"
#include "cli/executables.h"
#include "cli/local/metrics_targets.h"
#include "cli/local/process_names.h"
#include "cli/local/progress.h"
#include "cli/mode_options.h"
#include "cli/torch_commands.h"
#include "common/child_processes.h"
#include "common/defaults.h"
#include "common/json.h"
#include "plan/modes.h"
#include "proto/rpc/grpc_support.h"
#include "scheduler/client/job_states.h"
#include "scheduler/client/job_wait.h"
#include "scheduler/client/scheduler_client.h"
#include "worker/data/epoch_order.h"
#include "worker/torch/torch_trainable.h"

namespace herd::cli {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

volatile sig_atomic_t g_stop_signal = 0;
void OnStopSignal(int sig) { g_stop_signal = sig; }

class LocalCommand final : public Command {
 public:
  void Configure(CLI::App& app) override {
    app.add_option("--workers", workers_, "Worker processes")->check(CLI::Range(1, 64));
    app.add_option("--servers", servers_,
                   "Parameter-server shards (default: 1 when one of the job's modes runs on them, "
                   "else 0)")
        ->check(CLI::Range(0, 16));
    app.add_option(
           "--mode", mode_,
           "The mode: " + plan::ModeNameList() + " (what each does and takes: docs/modes.md)")
        ->capture_default_str();
    app.add_option("--model", model_, "mlp or cnn")->capture_default_str();
    app.add_option("--epochs", epochs_, "Passes over each worker's shard")
        ->check(CLI::Range(1, 10000))
        ->capture_default_str();
    app.add_option("--batch-size", batch_size_, "Samples per worker per iteration")
        ->check(CLI::Range(1, 65536))
        ->capture_default_str();
    app.add_option("--lr", lr_, "Learning rate")->capture_default_str();
    app.add_option("--optimizer", optimizer_, "sgd, momentum, adam or adamw")
        ->check(CLI::IsMember({"sgd", "momentum", "adam", "adamw"}))
        ->capture_default_str();
    app.add_option("--momentum", momentum_, "momentum: the momentum (0: 0.9)")
        ->check(CLI::Range(0.0, 0.999999));
    app.add_option("--weight-decay", weight_decay_,
                   "Weight decay (L2; decoupled for adamw), as the script's optimizer's in ps_sync "
                   "and ps_async")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--betas", betas_, "adam, adamw: B1,B2 (0.9,0.999)")
        ->delimiter(',')
        ->expected(2);
    app.add_option("--eps", eps_, "adam, adamw: epsilon (1e-8)")->check(CLI::PositiveNumber);
    // One value per occurrence, so a `--` after it still starts the workers' command.
    app.add_option("--switch-mode-at", switches_,
                   "ITER:MODE: run MODE from iteration ITER on (repeatable)")
        ->allow_extra_args(false);
    app.add_option("--train-samples", train_samples_,
                   "Train on the first N samples of the training set only (0: all 60000)");
    app.add_option("--seed", seed_, "Seed of the model, the data order and random topologies");
    // Each goes to the job's modes that take it; one that none takes is refused.
    mode_options_.Configure(app);
    app.add_option("--fusion-threshold", fusion_kib_, "Fusion bucket bound in KiB");
    app.add_flag("--tune-fusion", tune_fusion_, "dear: tune the fusion threshold online");
    app.add_option("--state", state_dir_,
                   "Keep state, logs and results in DIR (default: a temporary directory, "
                   "removed at the end)");
    app.add_option("--timeline", timeline_dir_, "Every worker writes DIR/worker-RANK.json");
    app.add_option("--data-dir", data_dir_, "Directory of the Fashion-MNIST IDX files");
    app.add_option("--job", job_, "Name of the job")->capture_default_str();
    app.add_flag("--json", json_, "Print the summary as one JSON object");
    app.add_option("--checkpoint-dir", checkpoint_dir_,
                   "Write checkpoints into DIR (DIR/<id>, DIR/LATEST): see docs/checkpoint.md");
    app.add_option("--checkpoint-every", checkpoint_every_,
                   "Checkpoint every N iterations, or every duration (30s, 10m)");
    app.add_option("--keep-last", keep_last_, "Keep the newest N checkpoints (0: all)")
        ->check(CLI::Range(0, 1 << 20));
    app.add_option("--keep-every", keep_every_,
                   "Also keep every checkpoint whose iteration is a multiple of N")
        ->check(CLI::Range(0, 1 << 30));
    app.add_option("--resume", resume_,
                   "Resume from a checkpoint: DIR (its newest good one) or DIR/ID");
    app.add_option("--losses", losses_file_,
                   "Write rank 0's loss of every iteration to FILE ('ITERATION LOSS' lines)");
    app.add_option("--min-workers", min_workers_,
                   "Elastic job (docs/elastic.md): a worker that dies leaves the others going on "
                   "while at least N are alive")
        ->check(CLI::Range(1, 64));
    app.add_option("--max-failures", max_failures_,
                   "Elastic job: worker deaths it survives (with --min-workers; default 3)")
        ->check(CLI::Range(0, 1000000));
    app.add_option("--max-restarts", max_restarts_,
                   "Elastic job (with --min-workers): restart a worker process that dies, up to "
                   "K times per worker; the restarted process rejoins the running job by its "
                   "name and takes the state from the live workers")
        ->check(CLI::Range(0, 1000));
    app.add_option("--preempt-grace", preempt_grace_,
                   "On SIGTERM with checkpoints: how long the job may take to checkpoint and "
                   "stop (60s)")
        ->capture_default_str();
    app.add_option("command", command_,
                   "-- CMD ARGS...: run CMD as each worker (your own training program, e.g. "
                   "/usr/bin/python3 train.py) instead of the built-in --model");
    // Security, as a shared cluster runs it: every process requires the token of every call,
    // and speaks TLS to the scheduler and the shards.
    app.add_option("--token-file", token_file_,
                   "Bearer token (the file's content) the scheduler and shards require and every "
                   "process sends")
        ->check(CLI::ExistingFile);
    app.add_option("--tls-cert", tls_cert_,
                   "PEM certificate the scheduler and shards serve with (TLS everywhere)")
        ->check(CLI::ExistingFile);
    app.add_option("--tls-key", tls_key_, "PEM private key of --tls-cert")
        ->check(CLI::ExistingFile);
    app.add_option("--tls-ca", tls_ca_,
                   "PEM roots that sign --tls-cert (default: the certificate itself, for a "
                   "self-signed one)")
        ->check(CLI::ExistingFile);
  }

  int Run() override {
    const auto begin = std::chrono::steady_clock::now();
    if (tls_cert_.empty() != tls_key_.empty()) {
      return Fail(absl::InvalidArgumentError("--tls-cert and --tls-key go together"));
    }
    if (!tls_ca_.empty() && tls_cert_.empty()) {
      return Fail(absl::InvalidArgumentError("--tls-ca needs --tls-cert and --tls-key"));
    }
    if (!tls_cert_.empty() && tls_ca_.empty()) tls_ca_ = tls_cert_;
    auto spec = BuildSpec();
    if (!spec.ok()) return Fail(spec.status());
    auto st = PrepareStateDir();
    if (!st.ok()) return Fail(st);
    if (st = PrepareTimelineDir(); !st.ok()) return Fail(st);
    // Signals are waited for by polling a flag, so the loop below can stop children in order.
    struct sigaction sa = {};
    sa.sa_handler = OnStopSignal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);

    int rc = RunJob(*spec, begin);
    children_.Stop();
    if (remove_state_) {
      std::error_code ec;
      fs::remove_all(state_dir_, ec);
    }
    return rc;
  }

 private:
  absl::StatusOr<herd::v1::JobSpec> BuildSpec() {
    herd::v1::JobSpec spec;
    spec.set_name(job_);
    spec.set_workers(workers_);
    auto first = plan::LookUpMode(mode_);
    if (!first.ok()) return first.status();
    std::vector<const plan::ModeInfo*> modes = {*first};
    for (const std::string& sw : switches_) {
      std::pair<std::string, std::string> parts = absl::StrSplit(sw, absl::MaxSplits(':', 1));
      int64_t iteration = 0;
      if (!absl::SimpleAtoi(parts.first, &iteration) || iteration < 1 || parts.second.empty()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--switch-mode-at '%s': expected ITERATION:MODE with ITERATION >= 1", sw));
      }
      auto mode = plan::LookUpMode(parts.second);
      if (!mode.ok()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("--switch-mode-at '%s': %s", sw, mode.status().message()));
      }
      modes.push_back(*mode);
      planned_.push_back({iteration, *mode});
    }
    if (auto st = mode_options_.CheckApplies(modes); !st.ok()) return st;
    const bool any_servers = std::any_of(modes.begin(), modes.end(),
                                         [](const plan::ModeInfo* m) { return m->needs_servers; });
    spec.set_servers(servers_ >= 0 ? servers_ : (any_servers ? 1 : 0));
    *spec.mutable_mode() = mode_options_.SpecFor(**first);
    if (command_.empty()) {
      auto layout = worker::ModelLayout(model_);
      if (!layout.ok()) return layout.status();
      for (const auto& t : *layout) *spec.add_tensors() = t;
    }  // else: the program's first worker declares its model's layout
    // AdamW is adam with the decay decoupled (OptimizerSpec.decoupled_weight_decay).
    spec.mutable_optimizer()->set_name(optimizer_ == "adamw" ? "adam" : optimizer_);
    spec.mutable_optimizer()->set_decoupled_weight_decay(optimizer_ == "adamw");
    spec.mutable_optimizer()->set_learning_rate(lr_);
    spec.mutable_optimizer()->set_momentum(momentum_);
    spec.mutable_optimizer()->set_weight_decay(weight_decay_);
    if (betas_.size() == 2) {
      spec.mutable_optimizer()->set_beta1(betas_[0]);
      spec.mutable_optimizer()->set_beta2(betas_[1]);
    }
    spec.mutable_optimizer()->set_epsilon(eps_);
    spec.set_seed(seed_);
    if (auto st = SetCheckpointPolicy(spec); !st.ok()) return st;
    auto* training = spec.mutable_training();
    training->set_model(command_.empty() ? model_ : "program");
    training->set_epochs(epochs_);
    training->set_batch_size(batch_size_);
    training->set_train_samples(train_samples_);
    return spec;
  }

  absl::Status SetCheckpointPolicy(herd::v1::JobSpec& spec) const {
    auto* policy = spec.mutable_checkpoint();
    if (!checkpoint_every_.empty() && checkpoint_dir_.empty()) {
      return absl::InvalidArgumentError("--checkpoint-every needs --checkpoint-dir");
    }
    std::error_code ec;
    if (!checkpoint_dir_.empty()) {
      // Absolute: the processes run in other directories.
      policy->set_dir(fs::absolute(checkpoint_dir_, ec).lexically_normal().string());
    }
    if (!checkpoint_every_.empty()) {
      int64_t n = 0;
      absl::Duration d;
      if (absl::SimpleAtoi(checkpoint_every_, &n) && n >= 1) {
        policy->set_every_iterations(n);
      } else if (absl::ParseDuration(checkpoint_every_, &d) && d > absl::ZeroDuration()) {
        policy->set_every_ms(absl::ToInt64Milliseconds(d));
      } else {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--checkpoint-every '%s': give a number of iterations >= 1 or a duration (30s)",
            checkpoint_every_));
      }
    }
    policy->set_keep_last(keep_last_);
    policy->set_keep_every(keep_every_);
    if (!resume_.empty()) {
      spec.set_resume_from(fs::absolute(resume_, ec).lexically_normal().string());
    }
    if (max_failures_ >= 0 && min_workers_ == 0) {
      return absl::InvalidArgumentError(
          "--max-failures applies to an elastic job: give --min-workers");
    }
    if (max_restarts_ > 0 && min_workers_ == 0) {
      return absl::InvalidArgumentError(
          "--max-restarts applies to an elastic job (a restarted worker rejoins it): give "
          "--min-workers");
    }
    if (min_workers_ > 0) {
      spec.mutable_elastic()->set_min_workers(min_workers_);
      if (max_failures_ >= 0) spec.mutable_elastic()->set_max_failures(max_failures_);
    }
    return absl::OkStatus();
  }

  absl::Status PrepareStateDir() {
    std::error_code ec;
    if (state_dir_.empty()) {
      std::string tmpl = (fs::temp_directory_path() / "herd-local-XXXXXX").string();
      if (::mkdtemp(tmpl.data()) == nullptr) {
        return absl::InternalError("cannot create a temporary directory");
      }
      state_dir_ = tmpl;
      remove_state_ = true;
    }
    fs::create_directories(fs::path(state_dir_) / "logs", ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrFormat("cannot create %s/logs: %s", state_dir_, ec.message()));
    }
    return absl::OkStatus();
  }

  // The timeline directory is made and checked before anything starts, so a typo costs
  // nothing rather than the whole training.
  absl::Status PrepareTimelineDir() const {
    if (timeline_dir_.empty()) return absl::OkStatus();
    std::error_code ec;
    fs::create_directories(timeline_dir_, ec);
    const std::string probe = (fs::path(timeline_dir_) / ".herd-write-test").string();
    std::ofstream out(probe);
    const bool writable = !ec && out.good() && (out << "x").flush();
    out.close();
    fs::remove(probe, ec);
    if (!writable) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--timeline %s: cannot create or write that directory", timeline_dir_));
    }
    return absl::OkStatus();
  }

  // The flags of a process that serves (the scheduler, a shard): the token it requires, its
  // certificate.
  void AddServing(std::vector<std::string>& args) const {
    if (!token_file_.empty()) args.insert(args.end(), {"--token-file", token_file_});
    if (!tls_cert_.empty()) {
      args.insert(args.end(), {"--tls-cert", tls_cert_, "--tls-key", tls_key_});
    }
  }
  // The flags of a client of `what` ("scheduler" or "server"): TLS with the roots (the token
  // file is one flag for both, added once).
  void AddClientOf(const std::string& what, std::vector<std::string>& args) const {
    if (!tls_ca_.empty())
      args.insert(args.end(), {"--" + what + "-tls", "--" + what + "-ca", tls_ca_});
    const bool has_token = std::find(args.begin(), args.end(), "--token-file") != args.end();
    if (!token_file_.empty() && !has_token) args.insert(args.end(), {"--token-file", token_file_});
  }

  std::string Path(const std::string& name) const { return (fs::path(state_dir_) / name).string(); }
  std::string LogOf(const std::string& name) const { return Path("logs/" + name + ".log"); }

  // Every process serves its metrics on a free loopback port; the ports are picked and
  // written as Prometheus targets before anything starts, and printed.
  absl::Status PlanMetrics(int servers) {
    std::vector<std::pair<std::string, std::string>> processes = {{"scheduler", "scheduler"}};
    for (int s = 0; s < servers; ++s) processes.push_back({LocalServerName(s), "server"});
    for (int w = 0; w < workers_; ++w) processes.push_back({LocalWorkerName(w), "worker"});
    auto ports_picked = FreeLoopbackPorts(static_cast<int>(processes.size()));
    if (!ports_picked.ok()) return ports_picked.status();
    for (size_t i = 0; i < processes.size(); ++i) {
      metrics_targets_.push_back({processes[i].first, processes[i].second, (*ports_picked)[i]});
    }
    const std::string targets = Path("metrics-targets.json");
    if (auto st = WriteMetricsTargets(targets, job_, metrics_targets_); !st.ok()) return st;
    std::vector<std::string> ports;
    for (const MetricsTarget& t : metrics_targets_) {
      ports.push_back(absl::StrFormat("%s %d", t.process, t.port));
    }
    std::fprintf(stderr,
                 "herd local: metrics at http://127.0.0.1:PORT/metrics: %s (Prometheus targets: "
                 "%s)\n",
                 absl::StrJoin(ports, ", ").c_str(), targets.c_str());
    return absl::OkStatus();
  }
  std::string MetricsListen(const std::string& process) const {
    for (const MetricsTarget& t : metrics_targets_) {
      if (t.process == process) return absl::StrFormat("127.0.0.1:%d", t.port);
    }
    return "";
  }
  void AddMetrics(const std::string& process, std::vector<std::string>& args) const {
    if (const std::string listen = MetricsListen(process); !listen.empty()) {
      args.insert(args.end(), {"--metrics-listen", listen});
    }
  }

  // Starts the scheduler and reads its port. The scheduler and the shards run as `herd`, the
  // workers as herd-torch (this executable): only the workers load libtorch
  // (cli/executables.h).
  absl::StatusOr<std::string> StartScheduler() {
    const std::string port_file = Path("scheduler.port");
    fs::remove(port_file);
    std::vector<std::string> args = {
        "scheduler",   "--listen", "127.0.0.1:0", "--state", Path("scheduler-state"),
        "--port-file", port_file};
    AddServing(args);
    AddMetrics("scheduler", args);
    auto st = children_.StartHerd(SiblingExecutable(kHerdExecutable), "scheduler", args,
                                  LogOf("scheduler"));
    if (!st.ok()) return st;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto exit = children_.PollExit()) return ChildFailed(*exit);
      std::ifstream in(port_file);
      int port = 0;
      if (in >> port && port > 0) return absl::StrFormat("127.0.0.1:%d", port);
      std::this_thread::sleep_for(50ms);
    }
    return absl::DeadlineExceededError("the scheduler did not start within 30 s:\n" +
                                       children_.LogTail("scheduler"));
  }

  absl::Status ChildFailed(const ChildProcesses::Exit& exit) {
    return absl::AbortedError(absl::StrFormat("%s %s; the end of its log (%s):\n%s", exit.name,
                                              ChildProcesses::DescribeStatus(exit.status),
                                              LogOf(exit.name), children_.LogTail(exit.name)));
  }

  int RunJob(const herd::v1::JobSpec& spec, std::chrono::steady_clock::time_point begin) {
    if (auto st = PlanMetrics(spec.servers()); !st.ok()) return Fail(st);
    auto address = StartScheduler();
    if (!address.ok()) return Fail(address.status());
    scheduler::ClientOptions co;
    co.address = *address;
    co.tls = !tls_ca_.empty();
    co.tls_ca_file = tls_ca_;
    if (!token_file_.empty()) {
      auto token = rpc::ReadTokenFile(token_file_);
      if (!token.ok()) return Fail(token.status());
      co.token = *token;
    }
    auto sched = scheduler::SchedulerClient::Connect(co);
    if (!sched.ok()) return Fail(sched.status());
    auto submitted = (*sched)->SubmitJob(spec);
    if (!submitted.ok()) return Fail(submitted.status());
    for (const auto& [iteration, mode] : planned_) {
      herd::v1::SetModeRequest req;
      req.set_job(job_);
      *req.mutable_mode() = mode_options_.SpecFor(*mode);
      req.set_from_iteration(iteration);
      auto set = (*sched)->SetMode(req);
      if (!set.ok()) return Fail(set.status());
    }
    for (int s = 0; s < spec.servers(); ++s) {
      const std::string name = LocalServerName(s);
      std::vector<std::string> args = {"server",
                                       "--scheduler",
                                       *address,
                                       "--job",
                                       job_,
                                       "--name",
                                       name,
                                       "--shard",
                                       std::to_string(s),
                                       "--state",
                                       Path(name + "-state"),
                                       "--listen",
                                       "127.0.0.1:0",
                                       "--threads",
                                       std::to_string(2 * workers_ + 4),
                                       "--durability",
                                       "every-k:100",
                                       "--preempt-grace",
                                       preempt_grace_};
      AddServing(args);
      AddClientOf("scheduler", args);
      AddMetrics(name, args);
      auto st = children_.StartHerd(SiblingExecutable(kHerdExecutable), name, args, LogOf(name));
      if (!st.ok()) return Fail(st);
      shard_children_.push_back(name);
    }
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (!command_.empty()) {
      // torch.distributed's rendezvous (env://): rank 0 serves its TCPStore here.
      auto port = FreeLoopbackPorts(1);
      if (!port.ok()) return Fail(port.status());
      master_port_ = (*port)[0];
    }
    // Worker `w` as `name` (every worker keeps its name: a restarted one takes its slot back),
    // writing into `log`.
    auto start_worker = [&](int w, const std::string& log) -> absl::Status {
      const std::string name = LocalWorkerName(w);
      std::vector<std::string> args = {"worker",
                                       "--scheduler",
                                       *address,
                                       "--job",
                                       job_,
                                       "--name",
                                       name,
                                       "--rank",
                                       std::to_string(w),
                                       "--threads",
                                       std::to_string(std::max(1, cores / workers_)),
                                       "--fusion-threshold",
                                       std::to_string(fusion_kib_)};
      if (tune_fusion_) args.push_back("--tune-fusion");
      if (w == 0 && !losses_file_.empty()) {
        std::error_code ec;
        args.insert(args.end(),
                    {"--loss-file", fs::absolute(losses_file_, ec).lexically_normal().string()});
      }
      args.insert(args.end(), {"--preempt-grace", preempt_grace_});
      if (!timeline_dir_.empty()) args.insert(args.end(), {"--timeline", timeline_dir_});
      if (!data_dir_.empty()) args.insert(args.end(), {"--data-dir", data_dir_});
      AddClientOf("scheduler", args);
      AddClientOf("server", args);
      AddMetrics(name, args);
      return command_.empty()
                 ? children_.StartHerd(SiblingExecutable(kTorchExecutable), name, args, log)
                 : StartProgram(name, w, *address, cores, log);
    };
    for (int w = 0; w < workers_; ++w) {
      auto st = start_worker(w, LogOf(LocalWorkerName(w)));
      if (!st.ok()) return Fail(st);
    }
    std::map<std::string, int> restarts;  // by worker name

    ProgressLine progress(::isatty(STDERR_FILENO) != 0, stderr);
    // Until every process of the job has exited on its own: the workers when they finished,
    // the shards when the scheduler says the job completed.
    int done = 0;
    int workers_done = 0;
    auto workers_exited = std::chrono::steady_clock::now();
    const int processes = workers_ + static_cast<int>(shard_children_.size());
    auto last_poll = std::chrono::steady_clock::now() - 1s;
    std::optional<std::chrono::steady_clock::time_point> preempting;
    while (done < processes) {
      // SIGTERM with checkpoints: the job saves a last one and every process stops by itself
      // (within the grace); Ctrl-C, a second signal or a job without checkpoints stop at once.
      if (g_stop_signal == SIGTERM && !preempting.has_value() && !checkpoint_dir_.empty()) {
        g_stop_signal = 0;
        herd::v1::RequestCheckpointRequest req;
        req.set_job(job_);
        req.set_preempt(true);
        req.set_who("herd local got SIGTERM");
        auto record = (*sched)->RequestCheckpoint(req);
        if (record.ok()) {
          preempting = std::chrono::steady_clock::now() + ParsedGrace();
          std::fprintf(stderr, "herd local: SIGTERM: checkpoint %s at iteration %lld, then stop\n",
                       record->id().c_str(), static_cast<long long>(record->iteration()));
        } else {
          g_stop_signal = SIGTERM;
          std::fprintf(stderr, "herd local: SIGTERM: no checkpoint: %s\n",
                       std::string(record.status().message()).c_str());
        }
      }
      if (g_stop_signal != 0 ||
          (preempting.has_value() && std::chrono::steady_clock::now() > *preempting)) {
        progress.Finish();
        std::fprintf(stderr, "herd local: %s: stopping every process\n",
                     g_stop_signal != 0 ? strsignal(g_stop_signal) : "preemption grace over");
        children_.Stop();
        return 130;
      }
      while (auto exit = children_.PollExit()) {
        // In an elastic job a worker that dies leaves the others going on (the scheduler fails
        // the job when it cannot, and the others then exit with its reason).
        const std::optional<int> worker = LocalWorkerIndex(exit->name);
        if (min_workers_ > 0 && worker &&
            !(WIFEXITED(exit->status) && WEXITSTATUS(exit->status) == 0)) {
          auto job = (*sched)->GetJob(job_);
          int& restarted = restarts[exit->name];
          if (job.ok() && job->state() == herd::v1::JOB_RUNNING && restarted < max_restarts_) {
            // The same name takes its slot back once the scheduler declared the dead process
            // dead; it rejoins at the next epoch with the live workers' state.
            ++restarted;
            const std::string log = LogOf(absl::StrFormat("%s-restart-%d", exit->name, restarted));
            progress.Finish();
            std::fprintf(stderr,
                         "herd local: %s %s; restarting it (%d of at most %d), it rejoins "
                         "elastic job %s (log %s)\n",
                         exit->name.c_str(), ChildProcesses::DescribeStatus(exit->status).c_str(),
                         restarted, max_restarts_, job_.c_str(), log.c_str());
            if (auto st = start_worker(*worker, log); !st.ok()) {
              std::fprintf(stderr, "herd local: cannot restart %s: %s\n", exit->name.c_str(),
                           std::string(st.message()).c_str());
            } else {
              continue;
            }
          }
          if (job.ok() && job->state() == herd::v1::JOB_RUNNING) {
            progress.Finish();
            std::fprintf(stderr, "herd local: %s %s; elastic job %s goes on without it\n",
                         exit->name.c_str(), ChildProcesses::DescribeStatus(exit->status).c_str(),
                         job_.c_str());
            ++done;
            if (++workers_done == workers_) workers_exited = std::chrono::steady_clock::now();
            continue;
          }
        }
        if (WIFEXITED(exit->status) && WEXITSTATUS(exit->status) == 0 &&
            exit->name != "scheduler") {
          ++done;
          if (worker && ++workers_done == workers_) {
            workers_exited = std::chrono::steady_clock::now();
          }
          continue;
        }
        progress.Finish();
        Fail(JobFailure(**sched, *exit));
        std::fprintf(stderr, "herd local: stopping the job\n");
        children_.Stop();
        return kExitFailure;
      }
      // Every worker exited cleanly but the shards still wait: a program that ended without
      // finishing its training (herd.finish()) leaves the job running; stop it and say so.
      if (workers_done == workers_ && done < processes &&
          std::chrono::steady_clock::now() - workers_exited > 10s) {
        auto job = (*sched)->GetJob(job_);
        if (job.ok() && NoWorkerJoined(*job)) {
          progress.Finish();
          return EndWithoutHerd(**sched);
        }
        if (job.ok() && job->state() != herd::v1::JOB_COMPLETED) {
          progress.Finish();
          Fail(absl::FailedPreconditionError(absl::StrFormat(
              "every worker exited, but job %s is still %s: a worker ended without finishing "
              "its training (a program must end with herd.finish()); the end of worker-0's "
              "log (%s):\n%s",
              job_, std::string(scheduler::JobStateName(job->state())), LogOf(LocalWorkerName(0)),
              children_.LogTail(LocalWorkerName(0)))));
          children_.Stop();
          return kExitFailure;
        }
      }
      if (std::chrono::steady_clock::now() - last_poll >= 500ms) {
        last_poll = std::chrono::steady_clock::now();
        if (auto job = (*sched)->GetJob(job_); job.ok()) progress.Update(*job, begin, last_poll);
      }
      std::this_thread::sleep_for(50ms);
    }
    // The job's last iterations may have passed between two looks: the last line shows them.
    if (auto job = (*sched)->GetJob(job_); job.ok()) {
      progress.Update(*job, begin, std::chrono::steady_clock::now());
    }
    progress.Finish();
    if (auto job = (*sched)->GetJob(job_); job.ok() && NoWorkerJoined(*job)) {
      return EndWithoutHerd(**sched);
    }
    return Summarize(**sched, begin);
  }

  // A program run as the workers that never joined the job (torch.distributed over gloo, or
  // any program that uses no herd API) and exited 0 on every worker: herd local was its
  // launcher. The job is cancelled (nothing trained in it) and herd local exits 0.
  bool NoWorkerJoined(const herd::v1::JobStatus& job) const {
    if (command_.empty() || job.state() != herd::v1::JOB_PENDING) return false;
    for (const auto& m : job.workers()) {
      if (!m.name().empty()) return false;
    }
    return true;
  }
  int EndWithoutHerd(scheduler::SchedulerClient& sched) {
    (void)sched.CancelJob(job_, "every worker's program exited 0 without joining the job");
    children_.Stop();
    std::printf(
        "job %s: %d workers ran `%s` and exited 0 without joining the job (the program uses no "
        "herd API: e.g. torch.distributed with a backend other than herd); nothing trained in "
        "herd\n",
        job_.c_str(), workers_, absl::StrJoin(command_, " ").c_str());
    return kExitOk;
  }

  // Worker `w` as the user's program, with the job in its environment.
  absl::Status StartProgram(const std::string& name, int w, const std::string& address, int cores,
                            const std::string& log) {
    ChildSpec spec;
    spec.name = name;
    spec.argv = command_;
    spec.log_path = log;
    spec.env = {"HERD_SCHEDULER=" + address, "HERD_JOB=" + job_, "HERD_NAME=" + name,
                "HERD_RANK=" + std::to_string(w),
                "HERD_THREADS=" + std::to_string(std::max(1, cores / workers_)),
                "OMP_NUM_THREADS=" + std::to_string(std::max(1, cores / workers_)),
                "HERD_FUSION_THRESHOLD=" + std::to_string(fusion_kib_),
                "HERD_TUNE_FUSION=" + std::string(tune_fusion_ ? "1" : "0"),
                "HERD_TIMELINE=" + timeline_dir_, "HERD_METRICS_LISTEN=" + MetricsListen(name),
                "HERD_SEED=" + std::to_string(seed_), "HERD_PREEMPT_GRACE=" + preempt_grace_,
                "PYTHONUNBUFFERED=1",
                // torch.distributed's env:// (what torchrun sets): one host, rank = herd's.
                "RANK=" + std::to_string(w), "WORLD_SIZE=" + std::to_string(workers_),
                "LOCAL_RANK=" + std::to_string(w), "LOCAL_WORLD_SIZE=" + std::to_string(workers_),
                "GROUP_RANK=0", "MASTER_ADDR=127.0.0.1",
                "MASTER_PORT=" + std::to_string(master_port_)};
    // TLS to the scheduler and the shards, as the built-in workers get it (AddClientOf).
    if (!tls_ca_.empty()) {
      const std::string ca = fs::absolute(tls_ca_).string();
      spec.env.insert(spec.env.end(), {"HERD_SCHEDULER_TLS=1", "HERD_SCHEDULER_CA=" + ca,
                                       "HERD_SERVER_TLS=1", "HERD_SERVER_CA=" + ca});
    }
    // The token every process sends (herd.init() reads the file, as --token-file does).
    if (!token_file_.empty()) {
      spec.env.push_back("HERD_TOKEN_FILE=" + fs::absolute(token_file_).string());
    }
    if (const std::string dir = PythonPackageDir(); !dir.empty()) {
      const char* old = std::getenv("PYTHONPATH");
      spec.env.push_back("PYTHONPATH=" + dir + (old && *old ? ":" + std::string(old) : ""));
    }
    return children_.Start(std::move(spec)).status();
  }

  // Where the package herd lies next to this executable: the build tree (build/bin/herd,
  // build/python/herd) or an installation (PREFIX/bin/herd, PREFIX/lib/python3/dist-packages);
  // "" when neither has it (an installed package on Python's own path still works).
  static std::string PythonPackageDir() {
    std::error_code ec;
    const fs::path bin = fs::read_symlink("/proc/self/exe", ec).parent_path();
    if (ec) return "";
    for (const fs::path& dir :
         {bin / ".." / "python", bin / ".." / "lib" / "python3" / "dist-packages"}) {
      if (fs::exists(dir / "herd" / "torch.py", ec)) return fs::weakly_canonical(dir, ec).string();
    }
    return "";
  }

  // Why the job stopped, once a child exited badly: the scheduler names the process that
  // failed first (the others exit because of it); else the child that exited.
  absl::Status JobFailure(scheduler::SchedulerClient& sched, const ChildProcesses::Exit& exit) {
    const auto deadline = std::chrono::steady_clock::now() + 3s;
    for (;;) {
      auto job = sched.GetJob(job_);
      if (job.ok() && job->state() == herd::v1::JOB_FAILED) {
        // herd local names every child as it registers, so the process is a child's name.
        std::string child = exit.name;
        for (const std::string& name : children_.Names()) {
          if (job->failed_process().find("'" + name + "'") != std::string::npos) child = name;
        }
        return absl::AbortedError(absl::StrFormat(
            "job %s failed: %s: %s\nthe end of %s's log (%s):\n%s", job_, job->failed_process(),
            job->failure_reason(), child, LogOf(child), children_.LogTail(child)));
      }
      if (std::chrono::steady_clock::now() >= deadline) return ChildFailed(exit);
      std::this_thread::sleep_for(100ms);
    }
  }

  int Summarize(scheduler::SchedulerClient& sched, std::chrono::steady_clock::time_point begin) {
    auto job = sched.GetJob(job_);
    if (!job.ok()) return Fail(job.status());
    if (job->state() == herd::v1::JOB_PREEMPTED) {
      const auto& c = job->last_checkpoint();
      if (json_) {
        std::printf(
            "{\"job\":\"%s\",\"state\":\"PREEMPTED\",\"checkpoint\":\"%s/%s\","
            "\"iteration\":%lld}\n",
            job_.c_str(), c.dir().c_str(), c.id().c_str(), static_cast<long long>(c.iteration()));
      } else {
        std::printf("job %s preempted: %s\nresume with: herd local ... --resume %s\n", job_.c_str(),
                    job->preempt_reason().c_str(), c.dir().c_str());
      }
      return kExitOk;
    }
    if (job->state() != herd::v1::JOB_COMPLETED) {
      return Fail(absl::InternalError(
          absl::StrFormat("every process exited, but the scheduler has job %s %s", job_,
                          std::string(scheduler::JobStateName(job->state())))));
    }
    // Resumed where nothing is left to train: said in every output mode. From a checkpoint
    // past this job's end (another job's, or of more epochs or samples) that is an error: no
    // one resumes to train nothing.
    if (job->has_resumed() && job->result().iterations() == 0) {
      const int64_t from = job->resumed().iteration();
      const int64_t whole = WholeJobIterations(job->spec());
      if (whole > 0 && from > whole) {
        return Fail(absl::FailedPreconditionError(absl::StrFormat(
            "job %s resumed from %s at iteration %d, past its end: this job has %d iterations "
            "(%d epoch(s) of %d batches of %d x %d samples), so nothing was trained. Resume with "
            "more --epochs or --train-samples, or from an earlier checkpoint",
            job_, job->resumed().path(), from, whole, epochs_, whole / std::max(epochs_, 1),
            job->spec().workers(), batch_size_)));
      }
      std::fprintf(stderr,
                   "herd local: job %s: nothing left to train: resumed from %s at iteration %lld, "
                   "the end of the job (its final checkpoint)\n",
                   job_.c_str(), job->resumed().path().c_str(), static_cast<long long>(from));
    }
    const int code = FinalCheckpointCode(*job);
    const auto& r = job->result();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    const std::string modes = ModesRun(*job);
    const std::string model = command_.empty() ? model_ : absl::StrJoin(command_, " ");
    std::vector<std::pair<std::string, double>> metrics(r.metrics().begin(), r.metrics().end());
    std::sort(metrics.begin(), metrics.end());
    if (json_) {
      json::Object extra;
      for (const auto& [k, v] : metrics) extra.Add(k, Rounded(v, 6));
      const std::string last =
          job->last_checkpoint().id().empty()
              ? std::string()
              : job->last_checkpoint().dir() + "/" + job->last_checkpoint().id();
      json::Object summary;
      summary.Add("job", job_)
          .Add("mode", mode_)
          .Add("modes", modes)
          .Add("model", model)
          .Add("workers", workers_)
          .Add("servers", job->spec().servers())
          .Add("epochs", epochs_)
          .Add("iterations", r.iterations())
          .Add("test_accuracy", Rounded(r.test_accuracy(), 4))
          .Add("final_loss", Rounded(r.final_loss(), 4))
          .Add("samples_per_second", Rounded(r.samples_per_second(), 1))
          .Add("train_seconds", Rounded(r.train_seconds(), 2))
          .Add("exposed_comm_seconds", Rounded(r.exposed_comm_seconds(), 3))
          .Add("wall_seconds", Rounded(wall, 2))
          .Add("params_digest", r.params_digest())
          .Add("start_iteration", job->has_resumed() ? job->resumed().iteration() : 0)
          .Add("checkpoints", job->checkpoints_committed())
          .Add("last_checkpoint", last)
          .Add("metrics", std::move(extra));
      std::printf("%s\n", json::Value(std::move(summary)).Write().c_str());
      return code;
    }
    if (modes.empty() && job->has_resumed()) {
      // Resumed from the job's final checkpoint: every planned iteration was already done
      // (said on stderr above).
    } else if (command_.empty()) {
      std::printf("job %s: %s, %d worker(s), %d epoch(s), %lld iterations: %s\n", job_.c_str(),
                  model_.c_str(), workers_, epochs_, static_cast<long long>(r.iterations()),
                  modes.c_str());
    } else {
      std::printf("job %s: %s, %d worker(s), %lld iterations: %s\n", job_.c_str(), model.c_str(),
                  workers_, static_cast<long long>(r.iterations()), modes.c_str());
    }
    std::printf("final loss %.4f; exposed communication %.2f s of %.2f s training (rank 0)\n",
                r.final_loss(), r.exposed_comm_seconds(), r.train_seconds());
    for (const auto& [k, v] : metrics) std::printf("metric %s: %g\n", k.c_str(), v);
    if (!remove_state_) {
      std::printf("history %s (draw it: herd plot %s --out plot.png)\n",
                  Path("scheduler-state/history/" + job_ + ".jsonl").c_str(), state_dir_.c_str());
    }
    if (r.test_accuracy() >= 0) {
      std::printf("test accuracy %.3f, %.0f samples/s, %.1f s\n", r.test_accuracy(),
                  r.samples_per_second(), wall);
    } else {
      std::printf("no test accuracy reported, %.0f samples/s, %.1f s\n", r.samples_per_second(),
                  wall);
    }
    return code;
  }

  // The iterations of the whole job from its start, for the built-in models (0: unknown, a
  // program's own): epochs x the global batches of --train-samples (all 60000 by default).
  int64_t WholeJobIterations(const herd::v1::JobSpec& spec) const {
    if (!command_.empty()) return 0;
    constexpr int64_t kTrainingSet = 60000;  // Fashion-MNIST's training images
    const int64_t samples =
        train_samples_ > 0 ? std::min(train_samples_, kTrainingSet) : kTrainingSet;
    return worker::IterationsLeft(worker::DataPosition{}, samples, spec.workers(), batch_size_,
                                  epochs_);
  }

  // kExitCheckpointFailed, saying why on stderr, when the completed job has a checkpoint
  // directory and its final checkpoint did not commit (the trained state is not on disk; the
  // last committed one, if any, is older); kExitOk otherwise.
  int FinalCheckpointCode(const herd::v1::JobStatus& job) const {
    if (job.spec().checkpoint().dir().empty()) return kExitOk;
    const int64_t planned = job.planned_iterations();
    const int64_t start = job.has_resumed() ? job.resumed().iteration() : 0;
    if (planned <= 0 || start >= planned) return kExitOk;  // nothing to save: resumed at the end
    if (!job.last_checkpoint().id().empty() && job.last_checkpoint().iteration() >= planned) {
      return kExitOk;
    }
    const auto& failed = job.failed_checkpoint();
    const std::string why =
        !failed.id().empty() && failed.iteration() >= planned
            ? absl::StrFormat("checkpoint %s failed: %s", failed.id(), failed.error())
            : std::string("no final checkpoint committed");
    std::fprintf(stderr,
                 "herd local: job %s completed, but its final checkpoint did not: %s; the trained "
                 "state is not on disk (the last committed checkpoint: %s)\n",
                 job_.c_str(), why.c_str(),
                 job.last_checkpoint().id().empty()
                     ? "none"
                     : (job.last_checkpoint().dir() + "/" + job.last_checkpoint().id()).c_str());
    return kExitCheckpointFailed;
  }

  // "dear (iterations 0-199), ps_sync (200-936)": every mode the job ran, with its iterations.
  static std::string ModesRun(const herd::v1::JobStatus& job) {
    const int64_t total = job.result().iterations();
    std::vector<std::string> parts;
    const auto& schedule = job.schedule();
    for (int i = 0; i < schedule.size(); ++i) {
      const int64_t from = schedule[i].from_iteration();
      const int64_t to = i + 1 < schedule.size() ? schedule[i + 1].from_iteration() : total;
      if (from >= std::min(to, total)) continue;
      parts.push_back(absl::StrFormat("%s (iterations %d-%d)", schedule[i].mode().mode(), from,
                                      std::min(to, total) - 1));
    }
    return absl::StrJoin(parts, ", ");
  }

  // The summary's figures at the precision it has always printed (a metric: 6 significant
  // digits); a value that is not finite is JSON's null.
  static double Rounded(double v, int digits) {
    if (!std::isfinite(v)) return v;
    if (digits == 6) return std::stod(absl::StrFormat("%.6g", v));
    const double scale = std::pow(10.0, digits);
    return std::round(v * scale) / scale;
  }

  int Fail(const absl::Status& st) {
    std::fprintf(stderr, "herd local: %s\n", std::string(st.message()).c_str());
    return kExitFailure;
  }

  int workers_ = 4;
  int min_workers_ = 0;    // > 0: an elastic job
  int max_failures_ = -1;  // -1: the spec's default
  int max_restarts_ = 0;   // restarts of each worker process (elastic jobs)
  int servers_ = -1;
  std::string mode_ = "dear";
  std::string model_ = "cnn";
  int epochs_ = 2;
  int batch_size_ = 64;
  double lr_ = 0.05;
  std::string optimizer_ = "momentum";
  double momentum_ = 0;
  double weight_decay_ = 0;
  std::vector<double> betas_;
  double eps_ = 0;
  std::vector<std::string> switches_;
  std::vector<std::pair<int64_t, const plan::ModeInfo*>> planned_;
  int64_t train_samples_ = 0;
  uint64_t seed_ = 1;
  ModeOptions mode_options_;
  int fusion_kib_ = 4096;
  bool tune_fusion_ = false;
  std::string state_dir_;
  bool remove_state_ = false;
  std::string timeline_dir_;
  std::string data_dir_;
  std::string job_ = "local";
  bool json_ = false;
  std::string checkpoint_dir_, checkpoint_every_, resume_, losses_file_;
  int keep_last_ = 0, keep_every_ = 0;
  std::string preempt_grace_ = defaults::FlagText(defaults::kPreemptionGrace);
  int master_port_ = 0;  // MASTER_PORT of the workers' torch.distributed rendezvous
  std::chrono::milliseconds ParsedGrace() const {
    auto g = scheduler::ParseDurationFlag(preempt_grace_);
    return g.ok() ? *g : std::chrono::milliseconds(60000);
  }
  std::vector<std::string> command_;  // -- CMD ARGS...: the workers' own program
  std::string token_file_;
  std::string tls_cert_, tls_key_, tls_ca_;
  std::vector<std::string> shard_children_;     // the shards' child names
  std::vector<MetricsTarget> metrics_targets_;  // every process's metrics port
  ChildProcesses children_;
};

HERD_REGISTER_COMMAND(LocalCommand, kLocalCommand.name, kLocalCommand.order,
                      kLocalCommand.description);

}  // namespace
}  // namespace herd::cli
