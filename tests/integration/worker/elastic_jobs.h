#pragma once
// The fixture of the elastic tests with real processes (elastic_test.cc, elastic_slow_test.cc):
// a real scheduler, `herd job submit` of an allreduce job of MLP workers with an `elastic`
// block, `herd worker` processes over UCX, and readers of `herd job status`.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/unix_time.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace herd::elastic_testing {

using scheduler::testing::ReadFile;
using scheduler::testing::RunHerd;
using scheduler::testing::SchedulerProcess;
using scheduler::testing::SpawnHerd;
using scheduler::testing::WaitExit;
namespace fs = std::filesystem;

// The parent of `pid` (0 when it cannot be read): the field after the command's name, which
// may itself hold spaces and parentheses, in /proc/PID/stat.
inline pid_t ParentOf(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t end = stat.rfind(')');
  if (end == std::string::npos || end + 4 >= stat.size()) return 0;
  return std::atoi(stat.c_str() + end + 4);  // ") S PPID"
}

inline bool DescendsFrom(pid_t pid, pid_t ancestor) {
  for (int depth = 0; pid > 1 && depth < 64; ++depth) {
    pid = ParentOf(pid);
    if (pid == ancestor) return true;
  }
  return false;
}

// The pid of the process below `ancestor` whose command line holds every one of `args` (0 when
// none does): a worker that this test's `herd local` started, to kill it. Only its own: the
// tests of one binary run side by side under ctest -j and name their jobs alike.
inline pid_t FindProcess(pid_t ancestor, const std::vector<std::string>& args) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return 0;
  pid_t found = 0;
  while (dirent* e = ::readdir(proc)) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0 || !DescendsFrom(pid, ancestor)) continue;
    std::string cmdline = ReadFile("/proc/" + std::string(e->d_name) + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    bool all = true;
    for (const auto& a : args) all &= cmdline.find(a) != std::string::npos;
    if (all) found = pid;
  }
  ::closedir(proc);
  return found;
}

class ElasticJob : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "herd-elastic-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override {
    for (pid_t pid : pids_) {
      if (::kill(pid, 0) == 0) ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, WNOHANG);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A job of `workers` MLP workers in `mode` with the elastic block `elastic`.
  // A job of `workers` MLP workers in `mode` with the elastic block `elastic` (and `servers`
  // parameter-server shards).
  void Submit(const std::string& name, int workers, int samples, const std::string& elastic,
              const std::string& mode = "allreduce", int servers = 0) {
    const std::string path = dir_ + "/" + name + ".yaml";
    std::ofstream(path) << "name: " << name << "\nmode: " << mode << "\nworkers: " << workers
                        << "\nservers: " << servers
                        << "\nseed: 5\noptimizer: {name: momentum, learning_rate: 0.05}\n"
                        << "training: {model: mlp, epochs: 1, batch_size: 32, train_samples: "
                        << samples << "}\n"
                        << (elastic.empty() ? "" : "elastic: " + elastic + "\n");
    auto submitted = RunHerd({"job", "submit", path, "--scheduler", sched_.address()});
    ASSERT_EQ(submitted.rc, 0) << submitted.out;
  }
  // The shard of a ps_* job, its state under the test's folder, logging to Log("<job>-shard").
  pid_t Shard(const std::string& job) {
    const pid_t pid = SpawnHerd({"server", "--scheduler", sched_.address(), "--job", job, "--state",
                                 dir_ + "/" + job + "-shard", "--wait-for-job", "60"},
                                Log(job + "-shard"));
    pids_.push_back(pid);
    return pid;
  }
  // Four MLP workers of `job` in `mode` (a ps_* mode with one shard) run to the end; with
  // `kill`, worker 1 is killed with SIGKILL a third in (iteration 78 of 234) and the other
  // three must finish it (`killed_at`: when, in Unix ms). The scheduler must run. Returns the
  // job's `herd job status`.
  std::string FourWorkers(const std::string& job, const std::string& mode, bool kill,
                          int64_t* killed_at = nullptr) {
    const bool ps = mode.rfind("ps_", 0) == 0;
    Submit(job, 4, 30000, "{min_workers: 2, max_failures: 1}", mode, ps ? 1 : 0);
    const pid_t shard = ps ? Shard(job) : 0;
    std::vector<pid_t> w;
    for (int i = 0; i < 4; ++i) w.push_back(Worker(job, i));
    if (kill) {
      WaitForIteration(job, 78);
      if (killed_at != nullptr) *killed_at = NowUnixMs();
      ::kill(w[1], SIGKILL);
    }
    for (int i = 0; i < 4; ++i) {
      if (kill && i == 1) continue;
      EXPECT_EQ(ExitCode(w[i], 180), 0) << ReadFile(Log(job + "-w" + std::to_string(i)));
    }
    if (ps) {
      EXPECT_EQ(ExitCode(shard, 60), 0) << ReadFile(Log(job + "-shard"));
    }
    return Status(job);
  }
  // Worker `i` of `job` (name "w<i>", rank i), logging to Log("<job>-w<i><log_suffix>").
  pid_t Worker(const std::string& job, int i, const std::string& log_suffix = "") {
    const std::string name = "w" + std::to_string(i);
    const pid_t pid =
        SpawnHerd({"worker", "--scheduler", sched_.address(), "--job", job, "--name", name,
                   "--rank", std::to_string(i), "--wait-for-job", "60", "--threads", "1",
                   "--timeout", "60", "--loss-file", LossFile(job, i)},
                  Log(job + "-" + name + log_suffix));
    pids_.push_back(pid);
    return pid;
  }
  std::string Log(const std::string& name) const { return dir_ + "/" + name + ".log"; }
  // Worker i's losses, a line per iteration it completed ("ITERATION LOSS").
  std::string LossFile(const std::string& job, int i) const {
    return dir_ + "/" + job + "-w" + std::to_string(i) + ".loss";
  }
  int ExitCode(pid_t pid, int seconds) {
    const int status = WaitExit(pid, seconds);
    return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string Status(const std::string& job) {
    return RunHerd({"job", "status", job, "--scheduler", sched_.address()}).out;
  }
  std::string Json(const std::string& job) {
    return RunHerd({"job", "status", job, "--json", "--scheduler", sched_.address()}).out;
  }
  // Until worker 0 of `job` completed `iteration` (or later), for at most a minute. Read from
  // its loss file, written as each iteration ends: the job's status trails the workers by their
  // batched reports and costs a `herd job status` process per look, seconds on a loaded machine.
  void WaitForIteration(const std::string& job, long long iteration) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < give_up) {
      std::ifstream in(LossFile(job, 0));
      long long last = -1;
      for (std::string line; std::getline(in, line);)
        last = std::max(last, std::atoll(line.c_str()));
      if (last >= iteration) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // A number field of the JSON status ("resumedUnixMs": "123" or 123); -1 when absent.
  static long long JsonNumber(const std::string& json, const std::string& field) {
    std::smatch m;
    if (!std::regex_search(json, m, std::regex("\"" + field + "\":\\s*\"?(-?[0-9.]+)"))) return -1;
    return std::atoll(m[1].str().c_str());
  }
  // Every occurrence of a number field, in order (e.g. one per membership event).
  static std::vector<long long> JsonNumbers(const std::string& json, const std::string& field) {
    std::vector<long long> out;
    const std::regex re("\"" + field + "\":\\s*\"?(-?[0-9.]+)");
    for (auto it = std::sregex_iterator(json.begin(), json.end(), re); it != std::sregex_iterator();
         ++it) {
      out.push_back(std::atoll((*it)[1].str().c_str()));
    }
    return out;
  }
  // Every occurrence of a string field, in order.
  static std::vector<std::string> JsonStrings(const std::string& json, const std::string& field) {
    std::vector<std::string> out;
    const std::regex re("\"" + field + "\":\\s*\"([^\"]*)\"");
    for (auto it = std::sregex_iterator(json.begin(), json.end(), re); it != std::sregex_iterator();
         ++it) {
      out.push_back((*it)[1].str());
    }
    return out;
  }
  static double JsonDouble(const std::string& json, const std::string& field) {
    std::smatch m;
    if (!std::regex_search(json, m, std::regex("\"" + field + "\":\\s*([-0-9.eE+]+)"))) return -1;
    return std::atof(m[1].str().c_str());
  }
  static double Accuracy(const std::string& status) {
    const size_t at = status.find("test accuracy ");
    return at == std::string::npos ? -1 : std::atof(status.c_str() + at + 14);
  }

  // Four workers of `job` in `mode` (ps_async with one shard); worker 1 is killed with SIGKILL
  // a sixth into the job (iteration 40 of 234: the status trails the workers by up to a second of
  // iterations, and the restart, its detection and the join's horizon take seconds more on a
  // loaded machine, all before the job's end) and started again at once under its name: it
  // waits until the scheduler declared its predecessor dead, registers, and rejoins with the
  // live workers' state (in ps_async: pulls it from the shard). Every worker, the restarted one
  // included, must exit 0. Starts the scheduler unless `scheduler_runs`. Returns the JSON
  // status.
  std::string KillAndRestart(const std::string& job, const std::string& mode,
                             bool scheduler_runs = false) {
    if (!scheduler_runs) sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "3s"});
    const bool ps = mode.rfind("ps_", 0) == 0;
    Submit(job, 4, 30000, "{min_workers: 2, max_failures: 2, pending_timeout: 30s}", mode,
           ps ? 1 : 0);
    const pid_t shard = ps ? Shard(job) : 0;
    std::vector<pid_t> w;
    for (int i = 0; i < 4; ++i) w.push_back(Worker(job, i));
    WaitForIteration(job, 40);
    ::kill(w[1], SIGKILL);
    (void)WaitExit(w[1], 10);
    const pid_t again = Worker(job, 1, "-restarted");
    for (int i : {0, 2, 3}) {
      EXPECT_EQ(ExitCode(w[i], 180), 0) << ReadFile(Log(job + "-w" + std::to_string(i)));
    }
    EXPECT_EQ(ExitCode(again, 180), 0) << ReadFile(Log(job + "-w1-restarted"));
    if (ps) {
      EXPECT_EQ(ExitCode(shard, 60), 0) << ReadFile(Log(job + "-shard"));
    }
    const std::string status = Status(job);
    EXPECT_NE(status.find("COMPLETED"), std::string::npos) << status;
    EXPECT_NE(status.find("completed: 4 of 4 workers finished"), std::string::npos) << status;
    EXPECT_NE(status.find("'w1' (rank 1) declared dead"), std::string::npos) << status;
    EXPECT_NE(status.find("worker 'w1' (rank 1) rejoined; 4 workers from iteration"),
              std::string::npos)
        << status;
    EXPECT_NE(status.find("(rejoin time)"), std::string::npos) << status;
    const std::string joined = ReadFile(Log(job + "-w1-restarted"));
    EXPECT_NE(joined.find("joined job '" + job + "' at iteration"), std::string::npos) << joined;
    // Its model and data were ready before it registered: the live workers, which wait for it
    // from its registration on, did not wait for its start-up (docs/elastic.md, "Rejoin").
    const size_t ready = joined.find("model and data ready");
    const size_t registered = joined.find("joins the running job");
    EXPECT_NE(ready, std::string::npos) << joined;
    EXPECT_NE(registered, std::string::npos) << joined;
    EXPECT_LT(ready, registered) << joined;
    return Json(job);
  }
  // A ps_sync or ps_ec job `job` whose worker 1 was killed and restarted (KillAndRestart): the
  // joiner took its state from worker 0, the lowest live rank, past the kill; worker 0 logged the
  // handover; the shard counted the joiner from the source's announcement or its own first push
  // of the open round (which reaches a key first is a race either wins), never dropped a push of
  // it; the four final models are one. Returns the joiner's line: iteration, round, bytes,
  // source, seconds.
  std::smatch ExpectHandedBackByWorkerZero(const std::string& job, const std::string& json,
                                           std::string* joined) {
    *joined = ReadFile(Log(job + "-w1-restarted"));
    std::smatch took;
    EXPECT_TRUE(std::regex_search(
        *joined, took,
        std::regex("joined job '" + job +
                   "' at iteration ([0-9]+) \\(round ([0-9]+)\\) with 4 workers: took ([0-9]+) "
                   "bytes of state \\([^)]*\\) from worker ([0-9]+) in ([0-9.]+) s")))
        << *joined;
    if (took.empty()) return took;
    EXPECT_GE(std::atoll(took[1].str().c_str()), 40) << "past the kill, where the live workers are";
    EXPECT_EQ(took[4].str(), "0") << "the lowest live rank is the source";
    const std::string source = ReadFile(Log(job + "-w0"));
    EXPECT_NE(source.find("to worker 1, back in its slot"), std::string::npos) << source;
    const std::string shard = ReadFile(Log(job + "-shard"));
    EXPECT_TRUE(std::regex_search(
        shard, std::regex("worker 1 is back in job '" + job +
                          "': key \\([^)]*\\) counts it from round [0-9]+ on \\((its own first "
                          "push|announced by worker 0)")))
        << shard;
    const auto digests = JsonStrings(json, "paramsDigest");
    EXPECT_GE(digests.size(), 4u) << json;
    for (const auto& d : digests) EXPECT_EQ(d, digests.front()) << json;
    return took;
  }
  // The figures of a KillAndRestart job (its last event, the join) for docs/BENCHMARKS.md
  // ("Elastic membership").
  void PrintRejoin(const std::string& mode, const std::string& job, const std::string& json) {
    const std::string status = Status(job);
    for (size_t at = status.find("membership"); at != std::string::npos;
         at = status.find("membership", at + 1)) {
      std::printf("%s\n", status.substr(at, status.find('\n', at) - at).c_str());
    }
    const auto detected = JsonNumbers(json, "detectedUnixMs");
    const auto resumed = JsonNumbers(json, "resumedUnixMs");
    const double bytes = JsonDouble(json, "elastic_handover_bytes");
    const double ms = JsonDouble(json, "elastic_handover_ms");
    std::printf(
        "%s: rejoin (registration to every worker done with an iteration of the new epoch) %lld "
        "ms; the newcomer's start (model, data, the wait to register) %.1f ms, of it after "
        "registering %.1f ms, its join in Attach (communicator and state) %.1f ms; state "
        "handed over %.0f bytes in %.2f ms (%.1f MB/s)\n",
        mode.c_str(),
        !detected.empty() && detected.size() == resumed.size() ? resumed.back() - detected.back()
                                                               : -1LL,
        JsonDouble(json, "elastic_startup_ms"), JsonDouble(json, "elastic_startup_registered_ms"),
        JsonDouble(json, "elastic_join_ms"), bytes, ms, ms > 0 ? bytes / 1e3 / ms : 0.0);
  }

  std::string dir_;
  SchedulerProcess sched_;
  std::vector<pid_t> pids_;
};

}  // namespace herd::elastic_testing
