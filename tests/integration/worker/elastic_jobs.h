#pragma once
// The fixture of the elastic tests with real processes (elastic_test.cc, elastic_slow_test.cc):
// a real scheduler, `herd job submit` of an allreduce job of MLP workers with an `elastic`
// block, `herd worker` processes over UCX, and readers of `herd job status`.
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

namespace herd::elastic_testing {

using scheduler::testing::ReadFile;
using scheduler::testing::RunHerd;
using scheduler::testing::SchedulerProcess;
using scheduler::testing::SpawnHerd;
using scheduler::testing::WaitExit;
namespace fs = std::filesystem;

inline int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
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
  void Submit(const std::string& name, int workers, int samples, const std::string& elastic,
              const std::string& mode = "allreduce") {
    const std::string path = dir_ + "/" + name + ".yaml";
    std::ofstream(path) << "name: " << name << "\nmode: " << mode << "\nworkers: " << workers
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
  static double JsonDouble(const std::string& json, const std::string& field) {
    std::smatch m;
    if (!std::regex_search(json, m, std::regex("\"" + field + "\":\\s*([-0-9.eE+]+)"))) return -1;
    return std::atof(m[1].str().c_str());
  }
  static double Accuracy(const std::string& status) {
    const size_t at = status.find("test accuracy ");
    return at == std::string::npos ? -1 : std::atof(status.c_str() + at + 14);
  }

  std::string dir_;
  SchedulerProcess sched_;
  std::vector<pid_t> pids_;
};

}  // namespace herd::elastic_testing
