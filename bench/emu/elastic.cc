#include "bench/emu/elastic.h"

#include <google/protobuf/util/json_util.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/child_processes.h"
#include "common/deadline.h"
#include "common/unix_time.h"
#include "herd/v1/scheduler.pb.h"
#include "tools/emulator/cluster.h"

namespace herd::emulator {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr int kSchedulerPort = 7070;  // in a namespace of its own, so never taken
constexpr char kJob[] = "emu-elastic";

// One run of the job in a fresh cluster: the workers on hosts 0..W-1, the scheduler on host W.
class ElasticRun {
 public:
  ElasticRun(const ElasticBenchOptions& o, const Cluster& cluster, std::string dir)
      : o_(o), cluster_(cluster), dir_(std::move(dir)) {}

  // `herd ARGS` on the scheduler's host, to its end: its stdout.
  absl::StatusOr<std::string> Herd(std::vector<std::string> args, Deadline deadline) {
    std::vector<std::string> argv = {"ip", "netns", "exec", cluster_.Namespace(o_.workers),
                                     o_.herd};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, deadline);
  }

  absl::StatusOr<herd::v1::JobStatus> Status() {
    auto json = Herd({"job", "status", kJob, "--json", "--scheduler", scheduler_},
                     Deadline::After(std::chrono::seconds(20)));
    if (!json.ok()) return json.status();
    herd::v1::JobStatus s;
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;
    if (auto st = google::protobuf::util::JsonStringToMessage(*json, &s, options); !st.ok()) {
      return absl::InternalError(absl::StrFormat("herd job status --json: %s", st.ToString()));
    }
    return s;
  }

  absl::Status Start() {
    fs::create_directories(dir_);
    scheduler_ = absl::StrFormat("%s:%d", cluster_.Address(o_.workers), kSchedulerPort);
    auto started = kids_.Start(cluster_.Launch(
        o_.workers,
        {.name = "scheduler",
         .argv = {o_.herd, "scheduler", "--listen", scheduler_, "--state", dir_ + "/scheduler",
                  "--heartbeat-timeout", absl::StrFormat("%ds", o_.heartbeat_timeout.count())},
         .log_path = dir_ + "/scheduler.log"}));
    if (!started.ok()) return started.status();
    const std::string spec = dir_ + "/job.yaml";
    std::ofstream(spec) << "name: " << kJob << "\nmode: " << o_.mode << "\nworkers: " << o_.workers
                        << "\nseed: 5\n"
                        << "optimizer: {name: momentum, learning_rate: 0.05}\n"
                        << "training: {model: mlp, epochs: 1, batch_size: " << o_.batch
                        << ", train_samples: " << o_.samples << "}\n"
                        << "elastic: {min_workers: " << o_.workers - 1
                        << ", max_failures: 1, pending_timeout: 60s}\n";
    // The scheduler takes a moment to listen: submit until it answers.
    const Deadline up = Deadline::After(std::chrono::seconds(30));
    for (;;) {
      auto submitted = Herd({"job", "submit", spec, "--scheduler", scheduler_},
                            Deadline::After(std::chrono::seconds(20)));
      if (submitted.ok()) break;
      if (up.expired()) return submitted.status();
      std::this_thread::sleep_for(milliseconds(200));
    }
    for (int r = 0; r < o_.workers; ++r) {
      if (auto st = StartWorker(r, ""); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  absl::Status StartWorker(int rank, const std::string& suffix) {
    const std::string name = absl::StrFormat("w%d", rank);
    auto index = kids_.Start(cluster_.Launch(
        rank, {.name = name + suffix,
               .argv = {o_.herd, "worker", "--scheduler", scheduler_, "--job", kJob, "--name", name,
                        "--rank", std::to_string(rank), "--wait-for-job", "60", "--threads", "1",
                        "--timeout", "60"},
               .log_path = absl::StrFormat("%s/%s%s.log", dir_, name, suffix)}));
    if (!index.ok()) return index.status();
    worker_index_[name + suffix] = *index;
    return absl::OkStatus();
  }

  // Kills worker 1 once the job completed `iteration`, starts it again at once; returns the
  // wall-clock time of the kill.
  absl::StatusOr<int64_t> KillAndRestartAt(int64_t iteration, Deadline deadline) {
    for (;;) {
      auto s = Status();
      if (s.ok() && s->completed_iteration() >= iteration) break;
      if (deadline.expired()) {
        return absl::DeadlineExceededError(
            absl::StrFormat("the job did not reach iteration %d in time", iteration));
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    const int64_t killed = NowUnixMs();
    kids_.Kill(worker_index_.at("w1"));
    if (auto st = StartWorker(1, "-restarted"); !st.ok()) return st;
    return killed;
  }

  // Until every worker process ended; each must have exited 0.
  absl::Status WaitForWorkers(Deadline deadline) {
    for (const auto& [name, index] : worker_index_) {
      while (kids_.running(index)) {
        if (deadline.expired()) {
          return absl::DeadlineExceededError(absl::StrFormat(
              "%s still running at the deadline; its log: %s", name, kids_.LogTail(name)));
        }
        (void)kids_.PollExit();
        std::this_thread::sleep_for(milliseconds(50));
      }
      const int status = *kids_.status(index);
      const bool killed = name == "w1" && worker_index_.contains("w1-restarted");
      if (!killed && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        return absl::InternalError(absl::StrFormat("%s %s; its log: %s", name,
                                                   ChildProcesses::DescribeStatus(status),
                                                   kids_.LogTail(name)));
      }
    }
    return absl::OkStatus();
  }

 private:
  const ElasticBenchOptions& o_;
  const Cluster& cluster_;
  const std::string dir_;
  std::string scheduler_;
  ChildProcesses kids_;
  std::map<std::string, size_t> worker_index_;
};

double Metric(const herd::v1::TrainingResult& r, const std::string& key) {
  auto it = r.metrics().find(key);
  return it == r.metrics().end() ? 0 : it->second;
}

absl::StatusOr<herd::v1::JobStatus> RunOnce(const ElasticBenchOptions& o, bool disturbed,
                                            int64_t* killed_unix_ms) {
  auto cluster = Cluster::Create(o.workers + 1, o.rate);
  if (!cluster.ok()) return cluster.status();
  const Deadline deadline = Deadline::After(o.timeout);
  ElasticRun run(o, **cluster, o.work_dir + (disturbed ? "/disturbed" : "/undisturbed"));
  if (auto st = run.Start(); !st.ok()) return st;
  if (disturbed) {
    const int64_t iterations = o.samples / (o.batch * o.workers);
    auto killed = run.KillAndRestartAt(static_cast<int64_t>(iterations * o.kill_at), deadline);
    if (!killed.ok()) return killed.status();
    *killed_unix_ms = *killed;
  }
  if (auto st = run.WaitForWorkers(deadline); !st.ok()) return st;
  auto status = run.Status();
  if (!status.ok()) return status.status();
  if (status->state() != herd::v1::JOB_COMPLETED) {
    return absl::InternalError(absl::StrFormat("the job ended %s: %s",
                                               herd::v1::JobState_Name(status->state()),
                                               status->failure_reason()));
  }
  return status;
}

}  // namespace

absl::StatusOr<ElasticBenchResult> RunElasticBench(const ElasticBenchOptions& o) {
  ElasticBenchResult r;
  int64_t unused = 0;
  auto calm = RunOnce(o, /*disturbed=*/false, &unused);
  if (!calm.ok()) return calm.status();
  r.undisturbed_accuracy = calm->result().test_accuracy();
  int64_t killed = 0;
  auto hit = RunOnce(o, /*disturbed=*/true, &killed);
  if (!hit.ok()) return hit.status();
  r.accuracy = hit->result().test_accuracy();
  const auto& events = hit->membership_events();
  if (events.size() < 2 || events[0].joined() || !events[1].joined()) {
    return absl::InternalError(absl::StrFormat(
        "expected a death and a rejoin among the membership events, got %d", events.size()));
  }
  const int64_t iterations = o.samples / (o.batch * o.workers);
  r.killed_at_iteration = static_cast<int64_t>(iterations * o.kill_at);
  r.kill_to_detection_ms = static_cast<double>(events[0].detected_unix_ms() - killed);
  r.detection_to_resumed_ms =
      static_cast<double>(events[0].resumed_unix_ms() - events[0].detected_unix_ms());
  r.iterations_rerun = events[0].iterations_rerun();
  r.rejoin_ms = static_cast<double>(events[1].resumed_unix_ms() - events[1].detected_unix_ms());
  // The newcomer (rank 1) reports what it received and how long its own start took.
  for (const auto& w : hit->worker_results()) {
    if (Metric(w, "elastic_handover_bytes") > 0) {
      r.handover_bytes = Metric(w, "elastic_handover_bytes");
      r.handover_ms = Metric(w, "elastic_handover_ms");
      r.newcomer_startup_ms = Metric(w, "elastic_startup_ms");
      r.newcomer_startup_registered_ms = Metric(w, "elastic_startup_registered_ms");
    }
  }
  r.commit_ms_per_iteration = Metric(hit->result(), "elastic_commit_ms");
  if (hit->result().iterations() > 0) {
    r.iteration_ms =
        1000.0 * hit->result().train_seconds() / static_cast<double>(hit->result().iterations());
  }
  return r;
}

}  // namespace herd::emulator
