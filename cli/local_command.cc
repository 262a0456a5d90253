// `herd local`: a whole training job on this machine. Starts a scheduler, S parameter-server
// shards and W workers as child processes on loopback, submits the job (and its planned mode
// switches), shows a live progress line from the scheduler's view of the job, and ends with a
// summary whose last line is "test accuracy 0.xxx, N samples/s, T s".
//
// Ctrl-C (or SIGTERM) stops every child. A child that fails stops the job: the message names it,
// says how it ended, and shows the end of its log (every child logs to STATE/logs/NAME.log).

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/command.h"
#include "cli/local/progress.h"
#include "cli/mode_options.h"
#include "common/child_processes.h"
#include "plan/modes.h"
#include "proto/rpc/grpc_support.h"
#include "scheduler/client/scheduler_client.h"
#include "scheduler/scheduler_core.h"
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
    app.add_option("--optimizer", optimizer_, "sgd, momentum or adam")->capture_default_str();
    app.add_option("--switch-mode-at", switches_,
                   "ITER:MODE: run MODE from iteration ITER on (repeatable)");
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
    auto layout = worker::ModelLayout(model_);
    if (!layout.ok()) return layout.status();
    for (const auto& t : *layout) *spec.add_tensors() = t;
    spec.mutable_optimizer()->set_name(optimizer_);
    spec.mutable_optimizer()->set_learning_rate(lr_);
    spec.set_seed(seed_);
    auto* training = spec.mutable_training();
    training->set_model(model_);
    training->set_epochs(epochs_);
    training->set_batch_size(batch_size_);
    training->set_train_samples(train_samples_);
    return spec;
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

  // Starts the scheduler and reads its port.
  absl::StatusOr<std::string> StartScheduler() {
    const std::string port_file = Path("scheduler.port");
    fs::remove(port_file);
    std::vector<std::string> args = {
        "scheduler",   "--listen", "127.0.0.1:0", "--state", Path("scheduler-state"),
        "--port-file", port_file};
    AddServing(args);
    auto st = children_.StartSelf("scheduler", args, LogOf("scheduler"));
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
      const std::string name = absl::StrFormat("server-%d", s);
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
                                       "every-k:100"};
      AddServing(args);
      AddClientOf("scheduler", args);
      auto st = children_.StartSelf(name, args, LogOf(name));
      if (!st.ok()) return Fail(st);
      shard_children_.push_back(name);
    }
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int w = 0; w < workers_; ++w) {
      const std::string name = absl::StrFormat("worker-%d", w);
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
      if (!timeline_dir_.empty()) args.insert(args.end(), {"--timeline", timeline_dir_});
      if (!data_dir_.empty()) args.insert(args.end(), {"--data-dir", data_dir_});
      AddClientOf("scheduler", args);
      AddClientOf("server", args);
      auto st = children_.StartSelf(name, args, LogOf(name));
      if (!st.ok()) return Fail(st);
    }

    ProgressLine progress(::isatty(STDERR_FILENO) != 0, stderr);
    // Until every process of the job has exited on its own: the workers when they finished,
    // the shards when the scheduler says the job completed.
    int done = 0;
    const int processes = workers_ + static_cast<int>(shard_children_.size());
    auto last_poll = std::chrono::steady_clock::now() - 1s;
    while (done < processes) {
      if (g_stop_signal != 0) {
        progress.Finish();
        std::fprintf(stderr, "herd local: %s: stopping every process\n", strsignal(g_stop_signal));
        children_.Stop();
        return 130;
      }
      while (auto exit = children_.PollExit()) {
        if (WIFEXITED(exit->status) && WEXITSTATUS(exit->status) == 0 &&
            exit->name != "scheduler") {
          ++done;
          continue;
        }
        progress.Finish();
        Fail(JobFailure(**sched, *exit));
        std::fprintf(stderr, "herd local: stopping the job\n");
        children_.Stop();
        return kExitFailure;
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
    return Summarize(**sched, begin);
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
    if (job->state() != herd::v1::JOB_COMPLETED) {
      return Fail(absl::InternalError(
          absl::StrFormat("every process exited, but the scheduler has job %s %s", job_,
                          std::string(scheduler::JobStateName(job->state())))));
    }
    const auto& r = job->result();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    const std::string modes = ModesRun(*job);
    if (json_) {
      std::printf(
          "{\"job\":\"%s\",\"mode\":\"%s\",\"modes\":\"%s\",\"model\":\"%s\","
          "\"workers\":%d,\"servers\":%d,\"epochs\":%d,\"iterations\":%lld,"
          "\"test_accuracy\":%.4f,\"final_loss\":%.4f,\"samples_per_second\":%.1f,"
          "\"train_seconds\":%.2f,\"exposed_comm_seconds\":%.3f,\"wall_seconds\":%.2f}\n",
          job_.c_str(), mode_.c_str(), modes.c_str(), model_.c_str(), workers_,
          job->spec().servers(), epochs_, static_cast<long long>(r.iterations()), r.test_accuracy(),
          r.final_loss(), r.samples_per_second(), r.train_seconds(), r.exposed_comm_seconds(),
          wall);
      return kExitOk;
    }
    std::printf("job %s: %s, %d worker(s), %d epoch(s), %lld iterations: %s\n", job_.c_str(),
                model_.c_str(), workers_, epochs_, static_cast<long long>(r.iterations()),
                modes.c_str());
    std::printf("final loss %.4f; exposed communication %.2f s of %.2f s training (rank 0)\n",
                r.final_loss(), r.exposed_comm_seconds(), r.train_seconds());
    std::printf("test accuracy %.3f, %.0f samples/s, %.1f s\n", r.test_accuracy(),
                r.samples_per_second(), wall);
    return kExitOk;
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

  int Fail(const absl::Status& st) {
    std::fprintf(stderr, "herd local: %s\n", std::string(st.message()).c_str());
    return kExitFailure;
  }

  int workers_ = 4;
  int servers_ = -1;
  std::string mode_ = "dear";
  std::string model_ = "cnn";
  int epochs_ = 2;
  int batch_size_ = 64;
  double lr_ = 0.05;
  std::string optimizer_ = "momentum";
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
  std::string token_file_;
  std::string tls_cert_, tls_key_, tls_ca_;
  std::vector<std::string> shard_children_;  // the shards' child names
  ChildProcesses children_;
};

HERD_REGISTER_COMMAND(LocalCommand, "local", 5,
                      "Train a job on this machine: scheduler, servers and workers as child "
                      "processes, with live progress");

}  // namespace
}  // namespace herd::cli
