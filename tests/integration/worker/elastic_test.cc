// Elastic membership with real processes (docs/elastic.md): a scheduler, `herd job submit` of
// an allreduce job with an `elastic` block, and four `herd worker`s over UCX. A worker killed
// with SIGKILL about a third into the job: the three survivors go on at P = 3 within the
// heartbeat deadline plus 2 s and the job completes with a useful model; below min_workers the
// job pauses, then fails naming the empty slots; failures past max_failures fail it with the
// count.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/scheduler/scheduler_process.h"

namespace herd {
namespace {

using scheduler::testing::ReadFile;
using scheduler::testing::RunHerd;
using scheduler::testing::SchedulerProcess;
using scheduler::testing::SpawnHerd;
using scheduler::testing::WaitExit;
namespace fs = std::filesystem;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class Elastic : public ::testing::Test {
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

  // An allreduce job of `workers` MLP workers with the elastic block `elastic`.
  void Submit(const std::string& name, int workers, int samples, const std::string& elastic) {
    const std::string path = dir_ + "/" + name + ".yaml";
    std::ofstream(path) << "name: " << name << "\nmode: allreduce\nworkers: " << workers
                        << "\nseed: 5\noptimizer: {name: momentum, learning_rate: 0.05}\n"
                        << "training: {model: mlp, epochs: 1, batch_size: 32, train_samples: "
                        << samples << "}\n"
                        << (elastic.empty() ? "" : "elastic: " + elastic + "\n");
    auto submitted = RunHerd({"job", "submit", path, "--scheduler", sched_.address()});
    ASSERT_EQ(submitted.rc, 0) << submitted.out;
  }
  pid_t Worker(const std::string& job, int i) {
    const std::string name = "w" + std::to_string(i);
    const pid_t pid = SpawnHerd(
        {"worker", "--scheduler", sched_.address(), "--job", job, "--name", name, "--rank",
         std::to_string(i), "--wait-for-job", "60", "--threads", "1", "--timeout", "60"},
        Log(job + "-" + name));
    pids_.push_back(pid);
    return pid;
  }
  std::string Log(const std::string& name) const { return dir_ + "/" + name + ".log"; }
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
  // Until the job completed `iteration` (or later), for at most a minute.
  void WaitForIteration(const std::string& job, long long iteration) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < give_up) {
      const std::string s = Status(job);
      const size_t at = s.find("completed iteration ");
      if (at != std::string::npos && std::atoll(s.c_str() + at + 20) >= iteration) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  // A number field of the JSON status ("resumedUnixMs": "123" or 123); -1 when absent.
  static long long JsonNumber(const std::string& json, const std::string& field) {
    std::smatch m;
    if (!std::regex_search(json, m, std::regex("\"" + field + "\":\\s*\"?(-?[0-9.]+)"))) return -1;
    return std::atoll(m[1].str().c_str());
  }
  static double Accuracy(const std::string& status) {
    const size_t at = status.find("test accuracy ");
    return at == std::string::npos ? -1 : std::atof(status.c_str() + at + 14);
  }

  std::string dir_;
  SchedulerProcess sched_;
  std::vector<pid_t> pids_;
};

// 12000 samples, global batch 4 x 32: 93 iterations; the kill lands near iteration 30.
TEST_F(Elastic, AWorkerKilledAThirdInLeavesThreeThatFinishTheJob) {
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "1s"});
  Submit("shrink", 4, 12000, "{min_workers: 2, max_failures: 2, pending_timeout: 30s}");
  std::vector<pid_t> w;
  for (int i = 0; i < 4; ++i) w.push_back(Worker("shrink", i));
  WaitForIteration("shrink", 30);
  const int64_t killed_at = NowUnixMs();
  ::kill(w[1], SIGKILL);
  for (int i : {0, 2, 3}) {
    EXPECT_EQ(ExitCode(w[i], 120), 0) << ReadFile(Log("shrink-w" + std::to_string(i)));
  }
  const std::string status = Status("shrink");
  EXPECT_NE(status.find("COMPLETED"), std::string::npos) << status;
  EXPECT_NE(status.find("membership"), std::string::npos) << status;
  EXPECT_NE(status.find("'w1' (rank 1) declared dead"), std::string::npos) << status;
  EXPECT_NE(status.find("3 workers from iteration"), std::string::npos) << status;
  EXPECT_NE(status.find("1 of at most 2 failures"), std::string::npos) << status;
  // The survivors went on at P = 3 (every one completed an iteration of the new epoch) within
  // the heartbeat deadline plus 2 s of the kill.
  const std::string json = Json("shrink");
  const long long resumed = JsonNumber(json, "resumedUnixMs");
  ASSERT_GT(resumed, 0) << json;
  EXPECT_LT(resumed - killed_at, 1000 + 2000) << json;
  const std::string w0 = ReadFile(Log("shrink-w0"));
  EXPECT_NE(w0.find("runs iteration"), std::string::npos) << w0;
  EXPECT_NE(w0.find("again with 3 workers"), std::string::npos) << w0;
  EXPECT_NE(w0.find("held no state of its own"), std::string::npos) << w0;
  // One epoch of the MLP reaches about 0.75 here undisturbed (the slow test compares).
  EXPECT_GT(Accuracy(status), 0.6) << status;
}

TEST_F(Elastic, BelowMinWorkersTheJobPausesThenFailsNamingTheEmptySlots) {
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "1s"});
  Submit("few", 4, 60000, "{min_workers: 3, max_failures: 3, pending_timeout: 3s}");
  std::vector<pid_t> w;
  for (int i = 0; i < 4; ++i) w.push_back(Worker("few", i));
  WaitForIteration("few", 5);
  ::kill(w[1], SIGKILL);
  ::kill(w[2], SIGKILL);
  for (int i : {0, 3}) {
    EXPECT_EQ(ExitCode(w[i], 60), 1) << ReadFile(Log("few-w" + std::to_string(i)));
  }
  const std::string w0 = ReadFile(Log("few-w0"));
  EXPECT_NE(w0.find("paused"), std::string::npos) << w0;
  EXPECT_NE(w0.find("below min_workers 3"), std::string::npos) << w0;
  const std::string status = Status("few");
  EXPECT_NE(status.find("FAILED"), std::string::npos) << status;
  EXPECT_NE(status.find("pending_timeout 3.0 s"), std::string::npos) << status;
  EXPECT_NE(status.find("empty slots: rank 1 ('w1'), rank 2 ('w2')"), std::string::npos) << status;
}

TEST_F(Elastic, FailuresPastMaxFailuresFailTheJobWithTheCount) {
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "1s"});
  Submit("flaky", 4, 60000, "{min_workers: 1, max_failures: 1}");
  std::vector<pid_t> w;
  for (int i = 0; i < 4; ++i) w.push_back(Worker("flaky", i));
  WaitForIteration("flaky", 5);
  ::kill(w[3], SIGKILL);
  // The first failure is survived: wait until the three went on, then lose another.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (JsonNumber(Json("flaky"), "resumedUnixMs") <= 0 &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(w[2], SIGKILL);
  for (int i : {0, 1}) {
    EXPECT_EQ(ExitCode(w[i], 60), 1) << ReadFile(Log("flaky-w" + std::to_string(i)));
  }
  const std::string status = Status("flaky");
  EXPECT_NE(status.find("FAILED"), std::string::npos) << status;
  EXPECT_NE(status.find("2 worker failures, more than the job's max_failures of 1"),
            std::string::npos)
      << status;
  EXPECT_NE(ReadFile(Log("flaky-w0")).find("max_failures"), std::string::npos)
      << ReadFile(Log("flaky-w0"));
}

}  // namespace
}  // namespace herd
