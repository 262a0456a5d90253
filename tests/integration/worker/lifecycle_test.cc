// The job lifecycle an operator sees, with the pieces started by hand as real processes: a
// scheduler, `herd job submit`, `herd server` and `herd worker`s. Processes started before
// their job wait for it; a job that completes ends every process with 0; a cancelled job's
// processes exit; a worker that dies fails the job and the survivors say who; an ended job is
// deleted and its name reused.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>

#include <chrono>
#include <filesystem>
#include <fstream>
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

class Lifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "herd-lifecycle-XXXXXX").string();
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

  // A job spec file: `mode` with `servers` shards, 2 MLP workers; no tensors (the first
  // worker declares the model).
  std::string SpecFile(const std::string& name, const std::string& mode, int servers, int samples) {
    const std::string path = dir_ + "/" + name + ".yaml";
    std::ofstream(path) << "name: " << name << "\nmode: " << mode
                        << "\nworkers: 2\nservers: " << servers
                        << "\noptimizer: {name: momentum, learning_rate: 0.05}\n"
                        << "training: {model: mlp, epochs: 1, batch_size: 64, train_samples: "
                        << samples << "}\n";
    return path;
  }
  pid_t Worker(const std::string& job, int i, const std::string& wait = "60") {
    const std::string name = "w" + std::to_string(i);
    return Spawn({"worker", "--scheduler", sched_.address(), "--job", job, "--name", name, "--rank",
                  std::to_string(i), "--wait-for-job", wait, "--threads", "1"},
                 name);
  }
  pid_t Server(const std::string& job) {
    return Spawn({"server", "--scheduler", sched_.address(), "--job", job, "--state",
                  dir_ + "/shard-" + job, "--wait-for-job", "60"},
                 "server");
  }
  pid_t Spawn(const std::vector<std::string>& args, const std::string& name) {
    const pid_t pid = SpawnHerd(args, Log(name));
    pids_.push_back(pid);
    return pid;
  }
  std::string Log(const std::string& name) const { return dir_ + "/" + name + ".log"; }
  // Exit code of `pid` (-1: it did not exit in time, or by a signal).
  int ExitCode(pid_t pid, int seconds) {
    const int status = WaitExit(pid, seconds);
    return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string Status(const std::string& job) {
    return RunHerd({"job", "status", job, "--scheduler", sched_.address()}).out;
  }

  // Until the job has completed iteration 3 or later, for at most a minute (each look starts a
  // process, slow on a loaded machine: bounded by time, not by a count of looks). Any iteration
  // from 3 on counts: on a fast machine the reports may skip past 3 itself.
  void WaitForIteration3(const std::string& job) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (CompletedIteration(Status(job)) < 3 && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  static long long CompletedIteration(const std::string& status) {
    const std::string key = "completed iteration ";
    const size_t at = status.find(key);
    return at == std::string::npos ? -1 : std::atoll(status.c_str() + at + key.size());
  }

  std::string dir_;
  SchedulerProcess sched_;
  std::vector<pid_t> pids_;
};

TEST_F(Lifecycle, ProcessesStartedFirstWaitAndEveryOneExitsZeroWhenTheJobCompletes) {
  sched_.Start(dir_ + "/scheduler", 0);
  // Started before the job exists, as pods start in any order. allreduce with a shard: the
  // shard stands by through the collective mode.
  const pid_t w0 = Worker("byhand", 0), w1 = Worker("byhand", 1), s0 = Server("byhand");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  for (pid_t p : {w0, w1, s0}) ASSERT_EQ(::kill(p, 0), 0) << "still waiting for the job";
  auto submitted = RunHerd(
      {"job", "submit", SpecFile("byhand", "allreduce", 1, 2000), "--scheduler", sched_.address()});
  ASSERT_EQ(submitted.rc, 0) << submitted.out;
  EXPECT_EQ(ExitCode(w0, 120), 0) << ReadFile(Log("w0"));
  EXPECT_EQ(ExitCode(w1, 60), 0) << ReadFile(Log("w1"));
  EXPECT_EQ(ExitCode(s0, 30), 0) << ReadFile(Log("server"));
  const std::string status = Status("byhand");
  EXPECT_NE(status.find("COMPLETED"), std::string::npos) << status;
  EXPECT_NE(status.find("test accuracy"), std::string::npos) << status;
  EXPECT_NE(ReadFile(Log("server")).find("stands by"), std::string::npos)
      << ReadFile(Log("server"));
  auto json = RunHerd({"job", "status", "byhand", "--json", "--scheduler", sched_.address()});
  EXPECT_NE(json.out.find("\"testAccuracy\""), std::string::npos) << json.out;

  // The finished job is deleted and its name is free again.
  auto again = RunHerd(
      {"job", "submit", SpecFile("byhand", "allreduce", 1, 2000), "--scheduler", sched_.address()});
  EXPECT_NE(again.rc, 0) << "the name is taken until the job is deleted";
  auto deleted = RunHerd({"job", "delete", "byhand", "--scheduler", sched_.address()});
  ASSERT_EQ(deleted.rc, 0) << deleted.out;
  again = RunHerd(
      {"job", "submit", SpecFile("byhand", "allreduce", 1, 2000), "--scheduler", sched_.address()});
  EXPECT_EQ(again.rc, 0) << again.out;
}

TEST_F(Lifecycle, ACancelledJobsProcessesExitWithTheReason) {
  sched_.Start(dir_ + "/scheduler", 0);
  auto submitted = RunHerd(
      {"job", "submit", SpecFile("long", "ps_sync", 1, 60000), "--scheduler", sched_.address()});
  ASSERT_EQ(submitted.rc, 0) << submitted.out;
  const pid_t w0 = Worker("long", 0), w1 = Worker("long", 1), s0 = Server("long");
  // Let it train a little.
  for (int i = 0; i < 200 && Status("long").find("iteration 3") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto cancel = RunHerd(
      {"job", "cancel", "long", "--reason", "operator test", "--scheduler", sched_.address()});
  ASSERT_EQ(cancel.rc, 0) << cancel.out;
  // Exit 3: the job ended without completing (cli/command.h), not the process's own error.
  for (auto [pid, name] : {std::pair{w0, "w0"}, {w1, "w1"}, {s0, "server"}}) {
    EXPECT_EQ(ExitCode(pid, 30), 3) << name << ": " << ReadFile(Log(name));
    EXPECT_NE(ReadFile(Log(name)).find("was cancelled: operator test"), std::string::npos)
        << name << ": " << ReadFile(Log(name));
  }
}

TEST_F(Lifecycle, AWorkerThatDiesFailsTheJobAndTheSurvivorNamesIt) {
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "1s"});
  auto submitted = RunHerd({"job", "submit", SpecFile("fragile", "allreduce", 0, 60000),
                            "--scheduler", sched_.address()});
  ASSERT_EQ(submitted.rc, 0) << submitted.out;
  const pid_t w0 = Worker("fragile", 0), w1 = Worker("fragile", 1);
  WaitForIteration3("fragile");
  const auto killed_at = std::chrono::steady_clock::now();
  ::kill(w1, SIGKILL);
  EXPECT_EQ(ExitCode(w0, 30), 3) << "the job failed elsewhere: " << ReadFile(Log("w0"));
  const auto took = std::chrono::steady_clock::now() - killed_at;
  EXPECT_LT(took, std::chrono::seconds(10)) << "the survivor stops soon after the death";
  const std::string out = ReadFile(Log("w0"));
  EXPECT_NE(out.find("'w1' (rank 1)"), std::string::npos) << out;
  const std::string status = Status("fragile");
  EXPECT_NE(status.find("FAILED"), std::string::npos) << status;
}

// ps_sync: the survivor is blocked on the shard, waiting for a round the dead worker will never
// push. It learns of the death from the scheduler (the job fails) within the heartbeat
// deadline and ends naming the dead worker, instead of waiting out the shard's deadline and
// ending with a bare DEADLINE_EXCEEDED.
TEST_F(Lifecycle, APsSyncWorkerThatDiesEndsTheSurvivorWithinTheHeartbeatDeadline) {
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "2s"});
  auto submitted = RunHerd(
      {"job", "submit", SpecFile("psdeath", "ps_sync", 1, 60000), "--scheduler", sched_.address()});
  ASSERT_EQ(submitted.rc, 0) << submitted.out;
  const pid_t w0 = Worker("psdeath", 0), w1 = Worker("psdeath", 1), s0 = Server("psdeath");
  WaitForIteration3("psdeath");
  const auto killed_at = std::chrono::steady_clock::now();
  ::kill(w1, SIGKILL);
  EXPECT_EQ(ExitCode(w0, 60), 3) << "the job failed elsewhere: " << ReadFile(Log("w0"));
  const auto took = std::chrono::steady_clock::now() - killed_at;
  // Death declared within 2.2 s, heard at the next heartbeat (every 2/3 s): 8 s leaves room for
  // a loaded machine and is far below the shard's round deadline (the worker's --timeout, 120 s).
  EXPECT_LT(took, std::chrono::seconds(8)) << "the survivor stops within the heartbeat deadline";
  const std::string out = ReadFile(Log("w0"));
  EXPECT_NE(out.find("worker 'w1' (rank 1) declared dead"), std::string::npos) << out;
  EXPECT_EQ(out.find("Deadline Exceeded"), std::string::npos) << out;
  EXPECT_EQ(ExitCode(s0, 30), 3) << ReadFile(Log("server"));
}

// A shard killed and restarted on its state directory without a fixed port gets a new port and
// registers it; the workers, finding the old address UNAVAILABLE, look it up in the plan and
// finish the job there.
TEST_F(Lifecycle, AShardRestartedOnANewPortIsFoundThroughThePlan) {
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "3s"});
  auto submitted = RunHerd(
      {"job", "submit", SpecFile("moved", "ps_sync", 1, 30000), "--scheduler", sched_.address()});
  ASSERT_EQ(submitted.rc, 0) << submitted.out;
  const std::vector<std::string> shard = {
      "server",  "--scheduler",         sched_.address(), "--job",       "moved",
      "--state", dir_ + "/shard-moved", "--listen",       "127.0.0.1:0", "--register-timeout",
      "30"};
  const pid_t w0 = Worker("moved", 0), w1 = Worker("moved", 1);
  const pid_t s0 = Spawn(shard, "server");
  WaitForIteration3("moved");
  ::kill(s0, SIGKILL);
  ::waitpid(s0, nullptr, 0);
  const pid_t s1 = Spawn(shard, "server-again");
  EXPECT_EQ(ExitCode(w0, 120), 0) << ReadFile(Log("w0")) << ReadFile(Log("server-again"));
  EXPECT_EQ(ExitCode(w1, 60), 0) << ReadFile(Log("w1"));
  EXPECT_EQ(ExitCode(s1, 30), 0) << ReadFile(Log("server-again"));
  EXPECT_NE(ReadFile(Log("w0")).find("(the plan says so); reconnecting"), std::string::npos)
      << ReadFile(Log("w0"));
  EXPECT_NE(Status("moved").find("COMPLETED"), std::string::npos) << Status("moved");
}

}  // namespace
}  // namespace herd
